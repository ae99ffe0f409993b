"""MySQL 8's batch path (no `INSERT ... RETURNING`), forced on MariaDB through the store's `returning` option: the
server is detected by its version string, the path really runs (one INSERT per message), it joins a caller's
connection, and two overlapping batches racing on it still process each key once."""

from __future__ import annotations

import threading
import time
from typing import Any

import pymysql
import pytest
import test_inbox_mariadb
from inbox_harness import execute
from test_inbox_mariadb import connect

from edinbox import Inbox, Message, NotSettledError, Outcome, StoreError, Tx
from edinbox.stores._mysql_sql import has_returning
from services import MYSQL_URL, require_service
from threads import in_threads

table = test_inbox_mariadb.table  # the fixture: a fresh journal with a business table beside it


def effect(table: str, *, hold: float = 0.0) -> Any:
    """A batch handler inserting one effect row per message through tx.connection (then holding the transaction
    open `hold` seconds)."""

    def handler(tx: Tx, messages: list[Message]) -> None:
        for message in messages:
            execute(tx.connection, f"INSERT INTO {table}_business VALUES (%s)", (message.message_id,))
        time.sleep(hold)

    return handler


def status(connection: pymysql.Connection, name: str) -> int:
    """A session status counter of `connection` (Com_insert, Com_insert_select...)."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE %s", (name,))
        row = cursor.fetchone()
    return int(row[1]) if row else 0


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("5.5.5-10.11.19-MariaDB-0+deb12u1", True),
        ("10.6.16-MariaDB-log", True),
        ("8.0.36", False),
        ("8.4.0-commercial", False),
    ],
)
def test_the_server_is_told_by_its_version_string(version: str, expected: bool) -> None:
    """MariaDB's version strings name it (RETURNING available); MySQL's do not (the path without RETURNING)."""
    assert has_returning(version) is expected


def test_the_store_detects_mariadb_and_the_option_forces_the_mysql_path(table: str) -> None:
    """On a caller's connection the batch is one INSERT ... VALUES with RETURNING on MariaDB by default, and one
    INSERT per message with `returning = False`; the outcomes are the same."""
    connection = connect()
    try:
        inbox = Inbox(connection, consumer="c", table=table)
        assert inbox._store.returning is None  # decided by the server
        before = (status(connection, "Com_insert"), status(connection, "Com_insert_select"))
        batch = [Message(f"r{i}", "s") for i in range(4)]
        assert inbox.process_batch(batch, effect(table)) == [Outcome.PROCESSED] * 4
        after = (status(connection, "Com_insert"), status(connection, "Com_insert_select"))
        assert after == (before[0] + 1 + len(batch), before[1])  # the batch's one INSERT ... RETURNING, the effects
        inbox._store.returning = False
        before = (status(connection, "Com_insert"), status(connection, "Com_insert_select"))
        mixed = [Message("r0", "s"), Message("n1", "s"), Message("n2", "s"), Message("n1", "s")]
        assert inbox.process_batch(mixed, effect(table)) == [
            Outcome.DUPLICATE,
            Outcome.PROCESSED,
            Outcome.PROCESSED,
            Outcome.DUPLICATE,  # a later copy of a key in the batch
        ]
        after = (status(connection, "Com_insert"), status(connection, "Com_insert_select"))
        assert after[1] == before[1]  # no INSERT ... SELECT
        # one INSERT IGNORE per message, then the handler's two effect rows
        assert after[0] - before[0] == len(mixed) + 2
        connection.commit()
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT note FROM {table}_business ORDER BY note")
            assert [row[0] for row in cursor.fetchall()] == ["n1", "n2", "r0", "r1", "r2", "r3"]
    finally:
        connection.close()


def test_two_overlapping_batches_on_the_mysql_path_process_each_key_once(table: str) -> None:
    """Two threads run batches sharing keys at the same moment, both without RETURNING: every key has one effect
    and is PROCESSED in exactly one of them, the other seeing DUPLICATE."""
    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]
    batches = [[Message(f"k{i}", "s") for i in range(8)], [Message(f"k{i}", "s") for i in range(4, 12)]]

    def deliver(index: int) -> None:
        with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
            inbox._store.returning = False  # type: ignore[attr-defined]
            inbox.stats()  # connect before the start line
            barrier.wait()
            try:
                results[index] = inbox.process_batch(batches[index], effect(table, hold=0.3))
            except (StoreError, NotSettledError) as exc:  # a deadlock between the two: nothing settled, retried
                results[index] = exc

    in_threads(lambda: deliver(0), lambda: deliver(1))
    processed: list[str] = []
    for batch, result in zip(batches, results, strict=True):
        assert result is not None
        if isinstance(result, Exception):
            continue
        processed += [m.message_id for m, outcome in zip(batch, result, strict=True) if outcome is Outcome.PROCESSED]
    admin = connect(autocommit=True)
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"SELECT note, count(*) FROM {table}_business GROUP BY note")
            counts = dict(cursor.fetchall())
    finally:
        admin.close()
    assert sorted(processed) == sorted(counts)
    assert set(counts.values()) <= {1}
    assert len(processed) == len(set(processed))
    # the shared keys are inserted in the same order by both: the second waits on the first, then skips them
    assert not [r for r in results if isinstance(r, Exception)], results
    assert sorted(processed) == sorted(f"k{i}" for i in range(12))


def test_indexes_are_created_once_and_skipped_when_they_exist(unique_name: str) -> None:
    """`CREATE INDEX` without IF NOT EXISTS (MySQL 8 has none): `init` run twice creates each index once and the
    second run skips them (duplicate key name); a dropped unique key is restored by `create_schema()`."""
    import asyncio

    from edinbox.hub import HubConfig
    from hub_ops import init
    from services import drop_database

    require_service("mariadb")
    config = HubConfig(db=MYSQL_URL, table=f"{unique_name}.inbox")
    admin = connect(autocommit=True)

    def indexes() -> list[tuple[str, str]]:
        with admin.cursor() as cursor:
            cursor.execute(
                "SELECT DISTINCT table_name, index_name FROM information_schema.statistics"
                " WHERE table_schema = %s AND index_name <> 'PRIMARY' ORDER BY 1, 2",
                (unique_name,),
            )
            return list(cursor.fetchall())

    try:
        asyncio.run(init(config))
        first = indexes()
        assert ("inbox", "inbox_key") in first
        assert ("inbox_outbox", "inbox_outbox_pending") in first
        hub = [name for table, name in first if name.endswith("_index") and table != "inbox_payloads"]
        assert len(hub) == 7  # the console's six and the ledger's `changed` (hub step 7)
        assert {name for table, name in first if table == "inbox_payloads"} == {  # the message store's
            "inbox_payloads_kept_index",
            "inbox_payloads_text_index",
        }
        asyncio.run(init(config))
        assert indexes() == first
        execute(admin, f"DROP INDEX inbox_key ON `{unique_name}`.inbox")
        with Inbox(MYSQL_URL, consumer="c", table=f"{unique_name}.inbox") as inbox:
            inbox.create_schema()
            inbox.verify()
        assert indexes() == first
    finally:
        admin.close()
        drop_database(unique_name)
