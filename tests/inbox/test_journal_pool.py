"""The MariaDB and PostgreSQL journals the contract tests keep between tests: given back empty when as the store made
them, dropped when a test changed them, so each test still starts on an empty journal of the store's own shape."""

from __future__ import annotations

from typing import Any

import pytest
from inbox_harness import MySQLHarness, PostgresHarness

from edinbox.testing.contract import msg
from journal_pool import MYSQL_TABLES, POSTGRES_SCHEMA, JournalPool
from services import MYSQL_URL, POSTGRES_URL, require_service


def harness(pool: JournalPool) -> MySQLHarness | PostgresHarness:
    """A harness on a journal from `pool`, its schema made (and its shape noted when new)."""
    name, made = pool.take()
    h: MySQLHarness | PostgresHarness
    if pool.dialect is MYSQL_TABLES:
        h = MySQLHarness(MYSQL_URL, table=name, asynchronous=False, pool=pool, made=made)
    else:
        h = PostgresHarness(POSTGRES_URL, schema=name, asynchronous=False, pool=pool, made=made)
    h.make(h.target)
    h.made = h.made or pool.shape(h.admin, name)
    return h


def left(h: MySQLHarness | PostgresHarness, name: str) -> bool:
    """Whether anything of the journal `name` is left in the database."""
    if isinstance(h, MySQLHarness):
        return bool(MYSQL_TABLES.tables(h.admin, name))
    return bool(h.admin("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)))


@pytest.fixture(params=["mariadb", "postgres"])
def pool(request: pytest.FixtureRequest) -> JournalPool:
    """An empty pool for one of the two databases."""
    require_service(request.param)
    return JournalPool(MYSQL_TABLES if request.param == "mariadb" else POSTGRES_SCHEMA)


def test_a_journal_left_as_made_comes_back_empty_to_the_next_harness(pool: JournalPool) -> None:
    """A harness's rows and effects are gone when the next one takes its journal: same name, empty journal."""
    first = harness(pool)
    try:
        first.process(msg("1"))
        assert first.effects() == 1
    finally:
        first.close()
    second = harness(pool)
    name = second.schema if isinstance(second, PostgresHarness) else second.table
    try:
        assert second.table == first.table
        assert second.call("records") == []
        assert second.effects() == 0
    finally:
        second.close()
        pool.drop_all(second.admin)
        assert not left(second, name)


def test_a_journal_a_test_changed_is_dropped_and_never_handed_out(pool: JournalPool) -> None:
    """A dropped key, another stored version or a table of the test's own beside the journal: the journal is dropped
    whole (the added table too) and the next harness gets a fresh one."""
    changes: list[Any] = [
        lambda h: h.drop_key(),
        lambda h: h.set_version(99),
        lambda h: h.admin(f"CREATE TABLE {h.table}_small (v INTEGER)"),
    ]
    for change in changes:
        h = harness(pool)
        name = h.schema if isinstance(h, PostgresHarness) else h.table
        change(h)
        h.close()
        assert not left(h, name)
        assert pool.free == []
