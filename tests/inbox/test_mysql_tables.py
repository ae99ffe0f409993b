"""The MariaDB journals the contract tests keep between tests: given back empty when as the store made them, dropped
when a test changed them, so each test still starts on an empty journal of the store's own shape."""

from __future__ import annotations

from typing import Any

from inbox_harness import MySQLHarness
from mysql_tables import MySQLTables, shape, tables

from edinbox.testing.contract import msg
from services import MYSQL_URL, require_service


def harness(pool: MySQLTables) -> MySQLHarness:
    """A harness on a set from `pool`, its schema made (and its shape noted when new)."""
    name, made = pool.take()
    h = MySQLHarness(MYSQL_URL, table=name, asynchronous=False, pool=pool, made=made)
    h.make(h.target)
    h.made = h.made or shape(h.admin, name)
    return h


def test_a_set_left_as_made_comes_back_empty_to_the_next_harness() -> None:
    """A harness's rows and effects are gone when the next one takes its tables: same name, empty journal."""
    require_service("mariadb")
    pool = MySQLTables()
    first = harness(pool)
    try:
        first.process(msg("1"))
        assert first.effects() == 1
    finally:
        first.close()
    second = harness(pool)
    try:
        assert second.table == first.table
        assert second.call("records") == []
        assert second.effects() == 0
    finally:
        second.close()
        pool.drop_all(second.admin)
        assert tables(second.admin, second.table) == []


def test_a_set_a_test_changed_is_dropped_and_never_handed_out() -> None:
    """A dropped key, another stored version or a table of the test's own beside the journal: the set is dropped
    whole (the added table too) and the next harness gets fresh tables."""
    require_service("mariadb")
    changes: list[Any] = [
        lambda h: h.drop_key(),
        lambda h: h.set_version(99),
        lambda h: h.admin(f"CREATE TABLE {h.table}_small (v INTEGER)"),
    ]
    pool = MySQLTables()
    for change in changes:
        h = harness(pool)
        change(h)
        h.close()
        assert tables(h.admin, h.table) == []
        assert pool.free == []
