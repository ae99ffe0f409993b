"""What the relay locks on MariaDB, and what it does when the server ends one of its statements in a lock conflict.

A relay holds the rows of its claim until they are marked, and nothing else: a relay on a caller's connection at
REPEATABLE READ (MariaDB's default) lets the publishers insert while it sends. A mark that MariaDB rolls back as a
deadlock's victim is run again by the relay itself: the caller gets its result, each row sent once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pymysql
import pytest

from edinbox import AsyncInbox, Inbox, Outgoing, StoreError
from edinbox.stores._mysql_sql import connect_options
from services import MYSQL_URL, drop_database, require_service

APIS = [pytest.param(False, id="sync"), pytest.param(True, id="async")]


def connect(**options: Any) -> pymysql.Connection:
    """A PyMySQL connection of the test's own to the test database (autocommit off unless asked)."""
    settings = {k: v for k, v in connect_options(MYSQL_URL).items() if k in ("host", "port", "user", "database")}
    return pymysql.connect(**settings, **options)


@pytest.fixture
def table(unique_name: str) -> Iterator[str]:
    """A journal with its outbox in a database of its own, dropped afterwards."""
    require_service("mariadb")
    name = f"{unique_name}.inbox"
    with Inbox(MYSQL_URL, consumer="c", table=name) as inbox:
        inbox.create_schema()
    yield name
    drop_database(unique_name)


def quoted(table: str) -> str:
    """The outbox of journal `table` (`schema.name`), quoted for MariaDB."""
    return ".".join(f"`{part}`" for part in f"{table}_outbox".split("."))


def test_a_relay_at_repeatable_read_holds_up_no_publish(table: str) -> None:
    """While a relay on a caller's connection at REPEATABLE READ is inside its send, a transaction publishes at once:
    the claim locked its rows alone (its locking read through the unsent rows' index took the gap after the last
    unsent row, where every publish inserts, and the publish waited for the whole send)."""
    with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
        inbox.transaction(lambda tx: tx.publish_many([("dir:///o", b"1", "a"), ("dir:///o", b"2", "b")]))
    inside, release = threading.Event(), threading.Event()

    def slow(destination: str, messages: Sequence[Outgoing]) -> None:
        inside.set()
        assert release.wait(60)

    relay_connection = connect(autocommit=True)
    relay_connection.cursor().execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    def hold() -> None:
        with Inbox(relay_connection, consumer="c", table=table) as mine:
            mine.relay(slow)

    relay = threading.Thread(target=hold)
    relay.start()
    publisher = connect(autocommit=True)
    publisher.cursor().execute("SET SESSION innodb_lock_wait_timeout = 3")
    try:
        assert inside.wait(30)
        started = time.monotonic()
        with Inbox(publisher, consumer="c", table=table) as inbox:
            inbox.transaction(lambda tx: tx.publish("dir:///o", b"3", key="c"))
        assert time.monotonic() - started < 2
    finally:
        release.set()
        relay.join(30)
        publisher.close()
        relay_connection.close()
    with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
        assert inbox.outbox_stats().backlog == 1


class Deadlock:
    """Another transaction that makes a relay's mark the victim of a deadlock: it holds the gap where the mark moves
    the row in the unsent rows' index (a range read at REPEATABLE READ), waits until the mark waits for it, then asks
    for the row the relay holds. It wrote more rows than the relay (ballast), so InnoDB rolls the relay back."""

    def __init__(self, table: str) -> None:
        """Hold the gap (the relay's claim locks nothing there, its mark will wait)."""
        self.table = table
        self.ballast = f"{table}_ballast"
        self.connection = connect()
        self.victim = False
        with self.connection.cursor() as cursor:
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute(f"CREATE TABLE {self.ballast} (id INTEGER PRIMARY KEY)")
            cursor.executemany(f"INSERT INTO {self.ballast} (id) VALUES (%s)", [(n,) for n in range(2000)])
            cursor.execute(
                f"SELECT id FROM {quoted(table)} FORCE INDEX ({table.split('.')[1]}_outbox_unsent)"
                " WHERE sent_at > '2000-01-01' FOR UPDATE"
            )

    def close_the_cycle(self) -> None:
        """Once the relay's mark waits for this transaction, ask for the relay's row (the deadlock), then roll back."""
        watcher = connect(autocommit=True)
        try:
            with watcher.cursor() as cursor:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    cursor.execute(
                        "SELECT COUNT(*) FROM information_schema.innodb_trx"
                        " WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE %s",
                        (f"%{quoted(self.table)}%",),
                    )
                    if cursor.fetchone()[0]:
                        break
                    time.sleep(0.01)
                else:
                    pytest.fail("the relay's mark never waited for the other transaction")
        finally:
            watcher.close()
        try:
            with self.connection.cursor() as cursor:
                cursor.execute(f"SELECT id FROM {quoted(self.table)} FOR UPDATE")
        except pymysql.err.OperationalError:
            self.victim = True  # the relay was not rolled back: the test proves nothing
        finally:
            self.connection.rollback()
            self.connection.close()


@pytest.mark.parametrize("asynchronous", APIS)
def test_a_mark_rolled_back_as_a_deadlock_victim_is_run_again(table: str, asynchronous: bool) -> None:
    """The relay's mark, rolled back by MariaDB as a deadlock's victim, is run again in a transaction of its own: the
    pass returns its result (no StoreError reaches the caller), the row was sent once and is marked sent."""
    with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
        inbox.transaction(lambda tx: tx.publish("dir:///o", b"1", key="a"))
    other = Deadlock(table)
    sent: list[bytes] = []
    cycle = threading.Thread(target=other.close_the_cycle)

    def record(destination: str, messages: Sequence[Outgoing]) -> None:
        sent.extend(m.payload for m in messages)
        cycle.start()  # the mark comes next

    async def record_async(destination: str, messages: Sequence[Outgoing]) -> None:
        record(destination, messages)

    async def relay_async() -> int:
        async with AsyncInbox(MYSQL_URL, consumer="c", table=table) as inbox:
            return (await inbox.relay(record_async)).sent

    try:
        if asynchronous:
            count = asyncio.run(relay_async())
        else:
            with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
                count = inbox.relay(record).sent
    finally:
        if cycle.is_alive():
            cycle.join(60)
    assert not other.victim
    assert (count, sent) == (1, [b"1"])
    with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
        assert inbox.outbox_stats().backlog == 0
        assert inbox.relay(record).sent == 0


def test_a_deadlock_in_the_callers_transaction_is_raised(table: str) -> None:
    """On a caller's connection inside its transaction, the relay does not run a rolled-back mark again: MariaDB rolled
    back the caller's work with it, so the StoreError reaches the caller."""
    with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
        inbox.transaction(lambda tx: tx.publish("dir:///o", b"1", key="a"))
    other = Deadlock(table)
    cycle = threading.Thread(target=other.close_the_cycle)

    def record(destination: str, messages: Sequence[Outgoing]) -> None:
        cycle.start()

    caller = connect()  # autocommit off: the relay works in a savepoint of the caller's transaction
    caller.cursor().execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    try:
        with Inbox(caller, consumer="c", table=table) as inbox, pytest.raises(StoreError, match="eadlock"):
            inbox.relay(record)
    finally:
        if cycle.is_alive():
            cycle.join(60)
        caller.close()
    assert not other.victim
    with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
        assert inbox.outbox_stats().backlog == 1
