"""MariaDB specifics: the caller's connection joined with savepoints, REPEATABLE READ, one purger, URLs, errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pymysql
import pytest
from inbox_harness import execute

from edinbox import ConfigurationError, Inbox, Message, Outcome, SchemaError, StoreError, Tx
from edinbox.stores._mysql_sql import lock_name
from services import MYSQL_URL, require_service
from threads import in_threads


class Boom(Exception):
    """A handler failure."""


def connect(**options: Any) -> pymysql.Connection:
    """A PyMySQL connection to the test database, as an application would open it (not autocommit by default)."""
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", database="test", **options)


def count(sql: str) -> int:
    """One number read (or a statement run) on a connection of its own, autocommit: sees committed rows only."""
    connection = connect(autocommit=True)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            row = cursor.fetchone()
            return int(row[0]) if row else 0
    finally:
        connection.close()


@pytest.fixture
def table(unique_name: str) -> Iterator[str]:
    """A fresh journal and a business table beside it; yields the journal's name."""
    require_service("mariadb")
    admin = connect(autocommit=True)
    try:
        execute(admin, f"CREATE TABLE {unique_name}_business (note VARCHAR(100))")
        Inbox(admin, consumer="c", table=unique_name).create_schema()
        yield unique_name
        execute(
            admin,
            f"DROP TABLE IF EXISTS {unique_name}, {unique_name}_version, {unique_name}_outbox, {unique_name}_payloads, "
            f"{unique_name}_business",
        )
    finally:
        admin.close()


def effect(table: str) -> Any:
    """A handler inserting a business row through tx.connection."""

    def handler(tx: Tx, message: Message) -> None:
        execute(tx.connection, f"INSERT INTO {table}_business VALUES (%s)", (message.message_id,))

    return handler


def test_journal_row_joins_the_callers_transaction_and_rolls_back_with_it(table: str) -> None:
    """The inbox never commits the caller's transaction: when the caller rolls back, row and effect both vanish."""
    connection = connect()
    try:
        inbox = Inbox(connection, consumer="c", table=table)
        execute(connection, f"INSERT INTO {table}_business VALUES ('caller')")
        assert inbox.process(Message("1", "s"), effect(table)) is Outcome.PROCESSED
        assert count(f"SELECT count(*) FROM {table}") == 0  # not committed by the inbox
        connection.rollback()
        assert count(f"SELECT count(*) FROM {table}_business") == 0
        assert inbox.process(Message("1", "s"), effect(table)) is Outcome.PROCESSED
        connection.commit()
        assert count(f"SELECT count(*) FROM {table}") == 1
        assert count(f"SELECT count(*) FROM {table}_business") == 1
    finally:
        connection.close()


def test_handler_failure_rolls_back_to_the_savepoint_only(table: str) -> None:
    """A failing handler undoes its own statements and the journal insert; the caller's earlier work stays."""
    connection = connect()
    try:
        inbox = Inbox(connection, consumer="c", table=table)
        execute(connection, f"INSERT INTO {table}_business VALUES ('caller')")

        def failing(tx: Tx, message: Message) -> None:
            effect(table)(tx, message)
            raise Boom

        with pytest.raises(Boom):
            inbox.process(Message("1", "s"), failing)
        connection.commit()
        assert count(f"SELECT count(*) FROM {table}_business") == 1  # the caller's row only
        assert inbox.process(Message("1", "s"), effect(table)) is Outcome.PROCESSED  # retried: it failed once
        connection.commit()
        assert count(f"SELECT attempts FROM {table}") == 2
    finally:
        connection.close()


def test_concurrent_duplicates_on_callers_connections_at_repeatable_read(table: str) -> None:
    """Two callers at REPEATABLE READ (MariaDB's default), each holding a snapshot taken before the other committed,
    deliver one message at once: one effect; the second waits, and its locking read sees the first's row."""
    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]

    def deliver(index: int) -> None:
        connection = connect()
        try:
            execute(connection, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            execute(connection, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
            execute(connection, f"SELECT count(*) FROM {table}")  # the snapshot: no row yet
            inbox = Inbox(connection, consumer="c", table=table)
            barrier.wait()
            try:
                results[index] = inbox.process(Message("1", "s"), effect(table))
                connection.commit()
            except Exception as exc:
                results[index] = exc
                connection.rollback()
        finally:
            connection.close()

    in_threads(lambda: deliver(0), lambda: deliver(1))
    assert sorted(str(r) for r in results) == ["Outcome.DUPLICATE", "Outcome.PROCESSED"]
    assert count(f"SELECT count(*) FROM {table}_business") == 1


def test_one_purger_at_a_time(table: str) -> None:
    """While another session holds the purge lock, purge() returns 0 at once; afterwards it deletes."""
    inbox = Inbox(MYSQL_URL, consumer="c", table=table, horizon=timedelta(0))
    try:
        inbox.process(Message("1", "s"), effect(table))
        count(f"UPDATE {table} SET settled_at = settled_at - INTERVAL 2 DAY")
        holder = connect(autocommit=True)
        lock = lock_name(f"{table}:purge:c")
        try:
            with holder.cursor() as cursor:
                cursor.execute("SELECT GET_LOCK(%s, 0)", (lock,))
                assert inbox.purge(timedelta(days=1)) == 0
                cursor.execute("SELECT RELEASE_LOCK(%s)", (lock,))  # at once: a closing session frees it later
        finally:
            holder.close()
        assert inbox.purge(timedelta(days=1)) == 1
    finally:
        inbox.close()


def test_mariadb_url_scheme_reaches_the_same_journal(table: str) -> None:
    """mariadb:// is the same store as mysql://."""
    with Inbox(MYSQL_URL.replace("mysql://", "mariadb://"), consumer="c", table=table) as inbox:
        inbox.verify()
        assert inbox.process(Message("1", "s"), effect(table)) is Outcome.PROCESSED
    with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
        assert inbox.process(Message("1", "s"), effect(table)) is Outcome.DUPLICATE


def test_a_wrong_password_is_a_configuration_error_without_the_password() -> None:
    """Access denied is a configuration error (no wait brings a password back); the password is masked."""
    require_service("mariadb")
    with (
        Inbox("mysql://root:hunter2@127.0.0.1:3306/test", consumer="c") as inbox,
        pytest.raises(ConfigurationError) as raised,
    ):
        inbox.stats()
    assert "hunter2" not in str(raised.value)
    assert "1045" in str(raised.value)


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    """A MariaDB that cannot be reached raises StoreError (not settled), with the password masked."""
    with Inbox("mysql://root:hunter2@127.0.0.1:1/test", consumer="c") as inbox, pytest.raises(StoreError) as raised:
        inbox.process(Message("1", "s"), lambda tx, m: None)
    assert "hunter2" not in str(raised.value)


@pytest.mark.parametrize("table", ["{name}", "{name}.inbox"])
def test_a_missing_table_or_database_is_a_schema_error(unique_name: str, table: str) -> None:
    """A journal never created (no table, or no database for a qualified one) is a SchemaError naming the cure,
    not a StoreError waited on forever; nothing is created by the delivery."""
    require_service("mariadb")
    with (
        Inbox(MYSQL_URL, consumer="c", table=table.format(name=unique_name)) as inbox,
        pytest.raises(SchemaError, match="create the schema first") as raised,
    ):
        inbox.process(Message("1", "s"), lambda tx, m: None)
    assert "1146" in str(raised.value)
    assert count(f"SELECT count(*) FROM information_schema.tables WHERE table_name LIKE '{unique_name}%'") == 0


@pytest.mark.parametrize("url", ["mysql://root@127.0.0.1:3306/", "mysql://root@127.0.0.1:3306/a/b"])
def test_a_url_without_one_database_is_refused_before_connecting(url: str) -> None:
    """The database is part of a MariaDB URL: without it, ConfigurationError at once."""
    with pytest.raises(ConfigurationError, match="invalid MariaDB URL"):
        Inbox(url, consumer="c")


def test_a_transaction_the_server_rolled_back_is_not_committed(table: str) -> None:
    """MariaDB rolls a deadlocked transaction back whole; a handler that swallows that (here: ends the transaction
    itself) gets StoreError, not PROCESSED, and nothing it wrote afterwards is committed alone."""

    def swallowing(tx: Tx, message: Message) -> None:
        execute(tx.connection, "ROLLBACK")  # what a deadlock (1213) does to the whole transaction
        effect(table)(tx, message)  # in a new transaction now, which must not be committed

    with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
        with pytest.raises(StoreError, match="rolled back"):
            inbox.process(Message("1", "s"), swallowing)
        assert inbox.get("s", "1") is None
        assert count(f"SELECT count(*) FROM {table}_business") == 0
        assert inbox.process(Message("1", "s"), effect(table)) is Outcome.PROCESSED
    assert count(f"SELECT count(*) FROM {table}_business") == 1


def test_a_deadlock_swallowed_by_the_handler_commits_nothing(table: str) -> None:
    """A real deadlock inside the handler, caught and swallowed by it, then more writes: MariaDB rolled the journal
    row and the first effect back, and the inbox refuses to commit the writes that followed (StoreError, not
    settled), so no half of the delivery is kept; the redelivery then runs the handler whole."""
    rows = f"{table}_rows"
    count(f"CREATE TABLE {rows} (id INTEGER PRIMARY KEY, note VARCHAR(20), ballast INTEGER)")
    count(f"INSERT INTO {rows} (id, note) VALUES (1, 'a'), (2, 'b')")
    both_hold_one = threading.Barrier(2, timeout=30)
    caught: list[int] = []

    def other_transaction() -> None:
        connection = connect()
        try:
            # heavier than the handler's transaction (more rows written): InnoDB picks the handler's as the victim
            with connection.cursor() as cursor:
                cursor.executemany(f"INSERT INTO {rows} (id, ballast) VALUES (%s, 0)", [(n,) for n in range(3, 2003)])
            execute(connection, f"UPDATE {rows} SET note = 'other' WHERE id = 2")
            both_hold_one.wait()
            execute(connection, f"UPDATE {rows} SET note = 'other' WHERE id = 1")
            connection.commit()
        finally:
            connection.close()

    def deadlocking(tx: Tx, message: Message) -> None:
        execute(tx.connection, f"UPDATE {rows} SET note = 'handler' WHERE id = 1")
        both_hold_one.wait()
        try:
            execute(tx.connection, f"UPDATE {rows} SET note = 'handler' WHERE id = 2")
        except pymysql.OperationalError as exc:
            caught.append(exc.args[0])  # swallowed
        effect(table)(tx, message)

    other = threading.Thread(target=other_transaction)
    try:
        with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
            other.start()
            try:
                with pytest.raises(StoreError, match="rolled back"):
                    inbox.process(Message("1", "s"), deadlocking)
            finally:
                other.join(timeout=60)
            assert caught == [1213]  # ER_LOCK_DEADLOCK
            assert inbox.get("s", "1") is None  # no journal row, no effect before or after the deadlock:
            assert count(f"SELECT count(*) FROM {table}_business") == 0
            assert count(f"SELECT count(*) FROM {rows} WHERE note = 'other'") == 2  # the other transaction won
            assert inbox.process(Message("1", "s"), effect(table)) is Outcome.PROCESSED
        assert count(f"SELECT count(*) FROM {table}_business") == 1
    finally:
        count(f"DROP TABLE {rows}")


def test_a_duplicate_is_seen_on_a_found_rows_connection(table: str) -> None:
    """On a caller's connection opened with CLIENT_FOUND_ROWS (as SQLAlchemy opens them), where a no-op update
    counts as a changed row, a redelivery is still DUPLICATE."""
    connection = connect(client_flag=pymysql.constants.CLIENT.FOUND_ROWS)
    try:
        inbox = Inbox(connection, consumer="c", table=table)
        assert inbox.process(Message("1", "s"), effect(table)) is Outcome.PROCESSED
        connection.commit()
        assert inbox.process(Message("1", "s"), effect(table)) is Outcome.DUPLICATE
        connection.commit()
    finally:
        connection.close()
    assert count(f"SELECT count(*) FROM {table}_business") == 1


def test_a_batch_statement_left_uncommitted_is_rolled_back_when_its_unit_is_released(table: str) -> None:
    """On the store's own connection (autocommit off) a write run by run_many (one executemany) in a unit that never
    commits is rolled back when the unit is released, as a single statement's is: it must not wait, open, for the
    next BEGIN on that connection to commit it implicitly."""
    try:
        with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
            inbox.process(Message("m", "s"), lambda tx, message: tx.publish("dir:///acks", b"ack", key="k"))
            row_id = count(f"SELECT id FROM {table}_outbox")
            parked = [{"id": row_id, "reason": "never committed"}]
            assert inbox.read(lambda tx: tx.unit.run_many("outbox_park", parked)) == 1
            inbox.transaction(lambda tx: None)  # the next transaction on the same connection
            assert count(f"SELECT COUNT(*) FROM {table}_outbox WHERE parked_at IS NOT NULL") == 0
    finally:
        count(f"DROP TABLE IF EXISTS {table}_outbox")


@pytest.mark.parametrize("level", ["own", "REPEATABLE READ"])
def test_a_batchs_duplicates_lock_their_own_rows_alone(table: str, level: str) -> None:
    """A batch reads its known keys back (`find_batch_for_update`: the JSON_TABLE rows joined to the journal's unique
    key, one lookup each) locking those rows alone, on the store's own connections (READ COMMITTED) and on a caller's
    at REPEATABLE READ: while its handler runs, another transaction writes the rows beside them and a key between them
    without waiting, and only the batch's own rows are refused to it."""
    with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
        inbox.process_batch([Message(source="s", message_id=f"m{n}", payload=b"p") for n in range(8)], effect_batch)
    inside, release = threading.Event(), threading.Event()

    def holding(tx: Tx, messages: list[Message]) -> None:
        inside.set()
        assert release.wait(60)

    caller = connect(autocommit=True)
    if level != "own":
        caller.cursor().execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {level}")
    batch = [Message(source="s", message_id=m, payload=b"p") for m in ("m2", "m5", "new")]
    outcomes: list[Outcome] = []

    def deliver() -> None:
        with Inbox(MYSQL_URL if level == "own" else caller, consumer="c", table=table) as inbox:
            outcomes.extend(inbox.process_batch(batch, holding))

    thread = threading.Thread(target=deliver)
    thread.start()
    other = connect(autocommit=False)
    try:
        assert inside.wait(30)
        with other.cursor() as cursor:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
            refused = []
            for n in range(8):
                try:
                    cursor.execute(
                        f"SELECT 1 FROM {table} WHERE consumer = 'c' AND source = 's' AND message_id = %s"
                        " FOR UPDATE NOWAIT",
                        (f"m{n}",),
                    )
                except pymysql.err.OperationalError:
                    refused.append(f"m{n}")
            for beside in ("m1", "m3", "m4", "m6"):
                cursor.execute(
                    f"UPDATE {table} SET attempts = 2 WHERE consumer = 'c' AND source = 's' AND message_id = %s",
                    (beside,),
                )
            cursor.execute(
                f"INSERT INTO {table} (consumer, source, message_id, fingerprint) VALUES ('c', 's', 'm2a', 'f')"
            )
        other.rollback()
    finally:
        release.set()
        thread.join(30)
        other.close()
        caller.close()
    assert refused == ["m2", "m5"]
    assert outcomes == [Outcome.DUPLICATE, Outcome.DUPLICATE, Outcome.PROCESSED]


def effect_batch(tx: Tx, messages: list[Message]) -> None:
    """A batch handler that does nothing (the journal rows are the point)."""
