"""Passing the caller's own connection or pool: the journal row joins the caller's transaction."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool
import pytest

from edinbox import AsyncInbox, Inbox, Message, NotSettledError, Outcome, Status, StoreError, Tx


class Boom(Exception):
    """A handler failure."""


@pytest.fixture
def pg(postgres_url: str, unique_name: str) -> Iterator[tuple[str, str]]:
    """A fresh schema with a business table; yields (url, schema)."""
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {unique_name}")
        admin.execute(f"CREATE TABLE {unique_name}.business (note text)")
        Inbox(admin, consumer="c", table=f"{unique_name}.inbox").create_schema()
    yield postgres_url, unique_name
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA {unique_name} CASCADE")


def count(url: str, sql: str) -> int:
    """One number read on a connection of its own (sees committed rows only)."""
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute(sql.encode()).fetchone()
        assert row is not None
        return int(row[0])


def effect(schema: str) -> Any:
    """A handler inserting a business row through tx.connection."""

    def handler(tx: Tx, message: Message) -> None:
        tx.connection.execute(f"INSERT INTO {schema}.business VALUES (%s)".encode(), (message.message_id,))

    return handler


def test_journal_row_joins_the_callers_transaction_and_rolls_back_with_it(pg: tuple[str, str]) -> None:
    """The inbox never commits the caller's transaction: when the caller rolls back, row and effect both vanish."""
    url, schema = pg
    with psycopg.connect(url) as connection:
        inbox = Inbox(connection, consumer="c", table=f"{schema}.inbox")
        connection.execute(f"INSERT INTO {schema}.business VALUES ('caller')".encode())
        assert inbox.process(Message("1", "s"), effect(schema)) is Outcome.PROCESSED
        assert count(url, f"SELECT count(*) FROM {schema}.inbox") == 0  # not committed by the inbox
        connection.rollback()
        assert count(url, f"SELECT count(*) FROM {schema}.business") == 0
        with connection.transaction():
            assert inbox.process(Message("1", "s"), effect(schema)) is Outcome.PROCESSED
        assert count(url, f"SELECT count(*) FROM {schema}.inbox") == 1
        assert count(url, f"SELECT count(*) FROM {schema}.business") == 1


def test_duplicate_never_aborts_the_callers_transaction(pg: tuple[str, str]) -> None:
    """A duplicate inside the caller's transaction returns DUPLICATE and the caller's own work still commits."""
    url, schema = pg
    with psycopg.connect(url) as connection:
        inbox = Inbox(connection, consumer="c", table=f"{schema}.inbox")
        with connection.transaction():
            inbox.process(Message("1", "s"), effect(schema))
        with connection.transaction():
            connection.execute(f"INSERT INTO {schema}.business VALUES ('before')".encode())
            assert inbox.process(Message("1", "s"), effect(schema)) is Outcome.DUPLICATE
            connection.execute(f"INSERT INTO {schema}.business VALUES ('after')".encode())
    assert count(url, f"SELECT count(*) FROM {schema}.business") == 3


def test_handler_failure_rolls_back_to_the_savepoint_only(pg: tuple[str, str]) -> None:
    """A failing handler undoes only the inbox's part; the caller's work and the recorded attempt commit with it."""
    url, schema = pg

    def failing(tx: Tx, message: Message) -> None:
        effect(schema)(tx, message)
        raise Boom

    with psycopg.connect(url) as connection:
        inbox = Inbox(connection, consumer="c", table=f"{schema}.inbox")
        with connection.transaction():
            connection.execute(f"INSERT INTO {schema}.business VALUES ('caller')".encode())
            with pytest.raises(Boom):
                inbox.process(Message("1", "s"), failing)
            connection.execute(f"INSERT INTO {schema}.business VALUES ('still usable')".encode())
        record = inbox.get("s", "1")
    assert record is not None
    assert (record.status, record.attempts) == (Status.FAILED, 1)
    assert count(url, f"SELECT count(*) FROM {schema}.business") == 2


def test_autocommit_connection_gets_a_transaction_of_the_inbox(pg: tuple[str, str]) -> None:
    """With an autocommit connection there is no caller transaction: the inbox commits its own."""
    url, schema = pg
    with psycopg.connect(url, autocommit=True) as connection:
        inbox = Inbox(connection, consumer="c", table=f"{schema}.inbox")
        assert inbox.process(Message("1", "s"), effect(schema)) is Outcome.PROCESSED
    assert count(url, f"SELECT count(*) FROM {schema}.business") == 1


def test_swallowed_database_error_in_the_handler_is_not_committed(pg: tuple[str, str]) -> None:
    """A handler that swallows a database error leaves an aborted transaction: StoreError, nothing committed."""
    url, schema = pg

    def swallowing(tx: Tx, message: Message) -> None:
        effect(schema)(tx, message)
        with contextlib.suppress(psycopg.Error):
            tx.connection.execute(b"SELECT 1 / 0")

    with Inbox(url, consumer="c", table=f"{schema}.inbox") as inbox:
        with pytest.raises(StoreError, match="failed inside the inbox transaction"):
            inbox.process(Message("1", "s"), swallowing)
        assert inbox.get("s", "1") is None
    assert count(url, f"SELECT count(*) FROM {schema}.business") == 0


def test_callers_pool_is_used_and_left_open(pg: tuple[str, str]) -> None:
    """An inbox on the caller's pool commits its own transactions and does not close the pool."""
    url, schema = pg
    with psycopg_pool.ConnectionPool(url, min_size=1, max_size=2) as pool:
        with Inbox(pool, consumer="c", table=f"{schema}.inbox") as inbox:
            assert inbox.process(Message("1", "s"), effect(schema)) is Outcome.PROCESSED
        with pool.connection() as connection:
            assert connection.execute(f"SELECT count(*) FROM {schema}.business".encode()).fetchone() == (1,)


def test_async_journal_row_joins_the_callers_transaction(pg: tuple[str, str]) -> None:
    """AsyncInbox on the caller's AsyncConnection: the caller's rollback undoes row and effect."""
    url, schema = pg

    async def handler(tx: Tx, message: Message) -> None:
        await tx.connection.execute(f"INSERT INTO {schema}.business VALUES (%s)".encode(), (message.message_id,))

    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(url) as connection:
            inbox = AsyncInbox(connection, consumer="c", table=f"{schema}.inbox")
            assert await inbox.process(Message("1", "s"), handler) is Outcome.PROCESSED
            await connection.rollback()
            async with connection.transaction():
                assert await inbox.process(Message("2", "s"), handler) is Outcome.PROCESSED

    asyncio.run(scenario())
    assert count(url, f"SELECT count(*) FROM {schema}.inbox") == 1
    assert count(url, f"SELECT count(*) FROM {schema}.business") == 1


def test_sqlite_callers_connection_keeps_control_of_its_transaction(tmp_path: Path) -> None:
    """On a (legacy-transaction) sqlite3 connection the inbox never commits: the caller's rollback undoes all."""
    path = tmp_path / "app.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE business (note TEXT)")
    connection.commit()
    inbox = Inbox(connection, consumer="c", table="inbox")
    inbox.create_schema()
    connection.commit()

    def handler(tx: Tx, message: Message) -> None:
        tx.connection.execute("INSERT INTO business VALUES (?)", (message.message_id,))

    assert inbox.process(Message("1", "s"), handler) is Outcome.PROCESSED
    connection.rollback()
    assert inbox.get("s", "1") is None
    assert inbox.process(Message("1", "s"), handler) is Outcome.PROCESSED
    connection.execute("INSERT INTO business VALUES ('caller')")
    assert inbox.process(Message("1", "s"), handler) is Outcome.DUPLICATE
    connection.commit()
    other = sqlite3.connect(path)
    assert other.execute("SELECT count(*) FROM business").fetchone() == (2,)
    assert other.execute("SELECT count(*) FROM inbox").fetchone() == (1,)
    other.close()
    connection.close()


def test_prepared_inserts_survive_deallocate(pg: tuple[str, str]) -> None:
    """If something drops the inbox's prepared statements (DEALLOCATE ALL, DISCARD ALL), it prepares them again."""
    url, schema = pg
    with psycopg.connect(url, autocommit=True) as connection:
        inbox = Inbox(connection, consumer="c", table=f"{schema}.inbox")
        assert inbox.process(Message("1", "s"), effect(schema)) is Outcome.PROCESSED
        connection.execute(b"DEALLOCATE ALL")
        assert inbox.process(Message("2", "s"), effect(schema)) is Outcome.PROCESSED
        assert inbox.process(Message("2", "s"), effect(schema)) is Outcome.DUPLICATE
    assert count(url, f"SELECT count(*) FROM {schema}.business") == 2


def test_one_purger_at_a_time_on_postgresql(pg: tuple[str, str]) -> None:
    """While another session holds the purge advisory lock, purge() deletes nothing and returns 0."""
    url, schema = pg
    with Inbox(url, consumer="c", table=f"{schema}.inbox", horizon=timedelta(0)) as inbox:
        for i in range(5):
            inbox.process(Message(str(i), "s"), effect(schema))
        lock = f"edinbox:{schema}.inbox:purge:c"
        with psycopg.connect(url, autocommit=True) as other:
            other.execute(b"SELECT pg_advisory_lock(hashtextextended(%s, 0))", (lock,))
            assert inbox.purge(timedelta(0)) == 0
            assert inbox.stats().processed == 5
            other.execute(b"SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (lock,))
        assert inbox.purge(timedelta(0), batch_size=2) == 5
        assert inbox.stats().total == 0


def test_purge_deletes_in_bounded_batches(tmp_path: Path) -> None:
    """purge(batch_size=10) over 25 settled rows runs three DELETE transactions of at most 10 rows each (and one
    more each for the kept payloads, a read of the rows to take out of the full-text index first, and the outbox,
    which have no rows to delete)."""
    connection = sqlite3.connect(tmp_path / "app.db", isolation_level=None)
    statements: list[str] = []
    inbox = Inbox(connection, consumer="c", table="inbox", horizon=timedelta(0))
    inbox.create_schema()
    for i in range(25):
        inbox.process(Message(str(i), "s"), lambda tx, m: None)
    connection.set_trace_callback(statements.append)
    assert inbox.purge(timedelta(0), batch_size=10) == 25
    connection.set_trace_callback(None)
    bodies = ["\n".join(line for line in s.splitlines() if not line.startswith("--")) for s in statements]
    deletes = [s.split()[2] for s in bodies if s.lstrip().startswith("DELETE")]
    assert deletes == ['"inbox"'] * 3 + ['"inbox_outbox"']
    assert any(s.lstrip().startswith("SELECT p.rowid, p.rowid <= m.indexed_to") for s in bodies)  # the kept payloads
    assert [s.split()[0] for s in bodies if s.strip()].count("COMMIT") == 5
    connection.close()


def test_live_lease_in_a_batch_settles_nothing(tmp_path: Path) -> None:
    """A batch containing a message under a live lease raises NotSettledError and commits none of the batch."""
    inbox = Inbox(f"sqlite:///{tmp_path / 'app.db'}", consumer="c")
    inbox.create_schema()

    class Crash(BaseException):
        """A process dying mid-effect."""

    def crash(tx: Tx, message: Message) -> None:
        raise Crash

    with pytest.raises(Crash):
        inbox.process(Message("leased", "s"), crash, lease=timedelta(minutes=5))
    with pytest.raises(NotSettledError):
        inbox.process_batch([Message("new", "s"), Message("leased", "s")], lambda tx, ms: None)
    assert inbox.get("s", "new") is None
    inbox.close()


def test_isolated_batch_on_the_callers_connection_commits_with_the_caller(pg: tuple[str, str]) -> None:
    """isolate=True in the caller's transaction: batch-mates' effects and the poison's attempt commit with it."""
    url, schema = pg

    def handler(tx: Tx, messages: list[Message]) -> None:
        for message in messages:
            tx.connection.execute(f"INSERT INTO {schema}.business VALUES (%s)".encode(), (message.message_id,))
        if any(m.message_id == "poison" for m in messages):
            raise Boom("bad one")

    with psycopg.connect(url) as connection:
        inbox = Inbox(connection, consumer="c", table=f"{schema}.inbox")
        batch = [Message("a", "s"), Message("poison", "s"), Message("b", "s")]
        results = inbox.process_batch(batch, handler, isolate=True)
        assert [r if isinstance(r, Outcome) else type(r) for r in results] == [
            Outcome.PROCESSED,
            Boom,
            Outcome.PROCESSED,
        ]
        assert count(url, f"SELECT count(*) FROM {schema}.inbox") == 0  # nothing committed by the inbox
        connection.commit()
    assert count(url, f"SELECT count(*) FROM {schema}.business") == 2
    with psycopg.connect(url, autocommit=True) as connection:
        inbox = Inbox(connection, consumer="c", table=f"{schema}.inbox")
        poison = inbox.get("s", "poison")
        assert poison is not None
        assert (poison.status, poison.attempts) == (Status.FAILED, 1)


def test_fresh_batch_searches_the_unique_index_once_per_key(pg: tuple[str, str]) -> None:
    """A batch of new keys goes in as a plain INSERT: no index scan of the journal's unique index (ON CONFLICT's
    arbiter scans it once per key before inserting); a batch with a known key falls back inside the caller's
    transaction, whose own work survives."""
    url, schema = pg
    with psycopg.connect(url) as connection:
        inbox = Inbox(connection, consumer="c", table=f"{schema}.inbox")
        scans = f"SELECT pg_stat_get_xact_numscans('{schema}.inbox_key'::regclass)".encode()
        with connection.transaction():
            batch = [Message(f"m{i}", "s") for i in range(50)]
            assert inbox.process_batch(batch, lambda tx, ms: None) == [Outcome.PROCESSED] * 50
            row = connection.execute(scans).fetchone()
            assert row is not None
            assert row[0] == 0
        with connection.transaction():
            connection.execute(f"INSERT INTO {schema}.business VALUES ('caller')".encode())
            batch = [Message("new", "s"), Message("m7", "s"), Message("new", "s")]
            outcomes = inbox.process_batch(batch, lambda tx, ms: None)
            assert outcomes == [Outcome.PROCESSED, Outcome.DUPLICATE, Outcome.DUPLICATE]
    assert count(url, f"SELECT count(*) FROM {schema}.business") == 1
    assert count(url, f"SELECT count(*) FROM {schema}.inbox") == 51


def test_a_run_of_redelivered_batches_meets_one_unique_violation(pg: tuple[str, str]) -> None:
    """After a batch that met a known key, the batches go through ON CONFLICT (its arbiter scans the unique index)
    until one inserts every key; the batch after that goes as a plain INSERT again (no scan)."""
    url, schema = pg
    with psycopg.connect(url) as connection:
        inbox = Inbox(connection, consumer="c", table=f"{schema}.inbox")
        scans = f"SELECT pg_stat_get_xact_numscans('{schema}.inbox_key'::regclass)".encode()

        def scanned(batch: list[Message]) -> tuple[list[Outcome], int]:
            """The batch's outcomes and its scans of the unique index (the counter runs on in one transaction)."""
            before = connection.execute(scans).fetchone()
            outcomes = inbox.process_batch(batch, lambda tx, ms: None)
            after = connection.execute(scans).fetchone()
            assert before is not None
            assert after is not None
            return outcomes, after[0] - before[0]

        assert scanned([Message(f"a{i}", "s") for i in range(5)]) == ([Outcome.PROCESSED] * 5, 0)
        redelivered = [Message("a1", "s"), Message("b1", "s")]
        assert scanned(redelivered)[0] == [Outcome.DUPLICATE, Outcome.PROCESSED]
        again = scanned([Message("a2", "s"), Message("b2", "s")])
        assert again[0] == [Outcome.DUPLICATE, Outcome.PROCESSED]
        assert again[1] > 0  # straight to ON CONFLICT: no plain INSERT tried, no unique violation logged
        assert scanned([Message(f"c{i}", "s") for i in range(3)])[1] > 0  # all fresh, through ON CONFLICT
        assert scanned([Message(f"d{i}", "s") for i in range(3)]) == ([Outcome.PROCESSED] * 3, 0)
