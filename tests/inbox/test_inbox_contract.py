"""The inbox contract on every store of edinbox (PostgreSQL, MariaDB, SQLite on a file, SQLite in memory) in both
APIs: the shipped `edinbox.testing.contract.InboxContract`, plus the checks that need a store's own SQL."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from inbox_harness import Harness

from edinbox import DataError, Outcome, SchemaError, Status
from edinbox.testing.contract import SOURCE, InboxContract, InboxHarnessFactory, msg


class StoreContract(InboxContract):
    """The contract on one of edinbox's stores and APIs, with the checks written in each store's SQL dialect."""

    store: ClassVar[str]
    asynchronous: ClassVar[bool]

    @pytest.fixture
    def store_harness(self, harness_factory: Any) -> InboxHarnessFactory:
        """Harnesses on this store and API."""
        return lambda **options: harness_factory(  # type: ignore[no-any-return]
            self.store, asynchronous=self.asynchronous, **options
        )

    def test_a_driver_data_error_of_the_handler_sql_parks_the_message(self, h: Harness) -> None:
        """The store's data errors raised by the handler's own SQL become DataError and park the message."""
        if h.dialect == "postgresql":
            statements: list[tuple[str, Any]] = [
                ("SELECT 99999999999::int", None),  # numeric value out of range
                ("CREATE TEMP TABLE short (v varchar(3)); INSERT INTO short VALUES ('abcd')", None),  # too long
                ("SELECT convert_from('\\xff'::bytea, 'UTF8')", None),  # invalid byte sequence
                ("SELECT convert_to('\u20ac', 'LATIN1')", None),  # untranslatable character
                ("SELECT %s::text", ("a\x00b",)),  # NUL in text
                (  # index row too large (program limit exceeded)
                    "CREATE TEMP TABLE big (v text); CREATE INDEX ON big (v); "
                    "INSERT INTO big SELECT string_agg(md5(i::text), '') FROM generate_series(1, 300) i",
                    None,
                ),
            ]
        elif h.dialect == "mysql":
            h.admin(
                f"CREATE TABLE {h.table}_small (v VARCHAR(3), n TINYINT, l VARCHAR(8) CHARACTER SET latin1, d DATE)"
            )
            statements = [
                (f"INSERT INTO {h.table}_small (v) VALUES ('abcd')", None),  # 1406 data too long
                (f"INSERT INTO {h.table}_small (n) VALUES (1000)", None),  # 1264 out of range
                (f"INSERT INTO {h.table}_small (l) VALUES (%s)", ("\u20ac\U0001f600",)),  # 1366 incorrect string
                ("SELECT 18446744073709551615 + 1", None),  # 1690 BIGINT value out of range
                (f"INSERT INTO {h.table}_small (d) VALUES ('2024-13-45')", None),  # 1292 incorrect date value
                (
                    "CREATE TEMPORARY TABLE long_key (v VARCHAR(1000) CHARACTER SET utf8mb4 PRIMARY KEY)",
                    None,
                ),  # 1071 key
            ]
        else:
            h.admin(f"CREATE TABLE {h.table}_strict (v INTEGER) STRICT")
            statements = [
                ("SELECT zeroblob(2000000000)", None),  # string or blob too big
                (f"INSERT INTO {h.table}_strict VALUES ('x')", None),  # a STRICT column cannot hold the value
            ]
        for index, (statement, params) in enumerate(statements):
            message = msg(f"data{index}")
            assert h.call("process", message, h.statement_handler(statement, params)) is Outcome.DEAD, statement
            record = h.call("get", message.source, message.message_id)
            assert record.status is Status.DEAD
            assert record.last_error.startswith("DataError: "), record.last_error
        assert h.effects() == 0

    def test_a_permanent_error_in_an_isolated_batch_parks_only_that_message(self, h: Harness) -> None:
        """isolate=True: a DataError of one message's SQL parks it (DEAD, settled); its batch-mates commit."""
        statement = h.sql("SELECT 99999999999::int", "SELECT zeroblob(2000000000)", "SELECT 18446744073709551615 + 1")
        batch = [msg("d1"), msg("d2"), msg("d3")]
        handler = h.statement_handler(statement, poison="d2")
        with pytest.raises(DataError) as raised:
            h.call("process_batch", batch, handler)
        assert raised.value.__cause__ is not None
        assert h.call("records") == []
        assert h.call("process_batch", batch, handler, isolate=True) == [
            Outcome.PROCESSED,
            Outcome.DEAD,
            Outcome.PROCESSED,
        ]
        assert [h.effects(m.message_id) for m in batch] == [1, 0, 1]
        assert h.call("get", SOURCE, "d2").status is Status.DEAD

    def test_verify_refuses_when_the_unique_key_is_dropped(self, h: Harness) -> None:
        """Without the unique index the pattern cannot work: verify() raises SchemaError until it is restored."""
        h.call("verify")
        h.drop_key()
        with pytest.raises(SchemaError, match="unique index"):
            h.call("verify")
        h.call("create_schema")
        h.call("verify")


class TestPostgresSync(StoreContract):
    """The contract on PostgreSQL, sync API."""

    store = "postgresql"
    asynchronous = False


class TestPostgresAsync(StoreContract):
    """The contract on PostgreSQL, async API."""

    store = "postgresql"
    asynchronous = True


class TestMySQLSync(StoreContract):
    """The contract on MariaDB, sync API (PyMySQL)."""

    store = "mysql"
    asynchronous = False


class TestMySQLAsync(StoreContract):
    """The contract on MariaDB, async API (aiomysql)."""

    store = "mysql"
    asynchronous = True


class TestMySQLWithoutReturningSync(StoreContract):
    """The contract on MariaDB taking MySQL 8's batch path (no INSERT ... RETURNING), sync API."""

    store = "mysql-no-returning"
    asynchronous = False


class TestMySQLWithoutReturningAsync(StoreContract):
    """The contract on MariaDB taking MySQL 8's batch path (no INSERT ... RETURNING), async API."""

    store = "mysql-no-returning"
    asynchronous = True


class TestSQLiteFileSync(StoreContract):
    """The contract on an SQLite file, sync API."""

    store = "sqlite-file"
    asynchronous = False


class TestSQLiteFileAsync(StoreContract):
    """The contract on an SQLite file, async API."""

    store = "sqlite-file"
    asynchronous = True


class TestSQLiteMemorySync(StoreContract):
    """The contract on SQLite in memory, sync API."""

    store = "sqlite-memory"
    asynchronous = False


class TestSQLiteMemoryAsync(StoreContract):
    """The contract on SQLite in memory, async API."""

    store = "sqlite-memory"
    asynchronous = True
