"""A transaction MariaDB rolls back whole under a handler that swallows the error, on the store's own connections.

InnoDB rolls the whole transaction back on a deadlock, and on a lock wait timeout when the server runs with
`innodb_rollback_on_timeout`; a handler that catches the error and goes on writes in a new transaction. The store
must not commit those writes without their journal row: the delivery raises StoreError (not settled, nothing
counted), nothing of it is kept, and the redelivery runs the handler whole. A statement's own error (a duplicate
key; a lock wait timeout without `innodb_rollback_on_timeout`, the same error number 1205) rolls back only that
statement: the handler that swallows it still settles PROCESSED with everything else it wrote. Sync and async.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from edinbox import AsyncInbox, Inbox, Message, Outcome, StoreError, Tx
from edinbox._errors import TransientError
from edinbox.stores._mysql_sql import connect_options
from servers import PrivateMariaDB
from services import MYSQL_URL, require_service

APIS = [pytest.param(False, id="sync"), pytest.param(True, id="async")]
LOCK_WAIT = 1205  # ER_LOCK_WAIT_TIMEOUT
DEADLOCK = 1213  # ER_LOCK_DEADLOCK
DUPLICATE = 1062  # ER_DUP_ENTRY


def connect(url: str, **options: Any) -> pymysql.Connection:
    """A PyMySQL connection of the test's own to the database of `url` (autocommit off unless asked)."""
    settings = {k: v for k, v in connect_options(url).items() if k in ("host", "port", "user", "password", "database")}
    return pymysql.connect(**settings, **options)


def run(url: str, *statements: str) -> int:
    """Run `statements` on a connection of their own, autocommit; the first column of the last one's first row."""
    connection = connect(url, autocommit=True)
    try:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
            row = cursor.fetchone()
            return int(row[0]) if row else 0
    finally:
        connection.close()


class Tables:
    """A journal, a business table and a table of rows to lock, fresh for one test on the server of `url`."""

    def __init__(self, url: str, name: str) -> None:
        """Create the tables."""
        self.url = url
        self.journal = name
        self.business = f"{name}_business"
        self.rows = f"{name}_rows"
        run(
            url,
            f"CREATE TABLE {self.business} (note VARCHAR(100) PRIMARY KEY)",
            f"CREATE TABLE {self.rows} (id INTEGER PRIMARY KEY, note VARCHAR(20), ballast INTEGER)",
            f"INSERT INTO {self.rows} (id, note) VALUES (1, 'a'), (2, 'b')",
        )
        with Inbox(url, consumer="c", table=name) as inbox:
            inbox.create_schema()

    def drop(self) -> None:
        """Drop the tables."""
        run(
            self.url,
            f"DROP TABLE IF EXISTS {self.journal}, {self.journal}_version, {self.journal}_outbox, "
            f"{self.journal}_payloads",
        )
        run(self.url, f"DROP TABLE IF EXISTS {self.business}, {self.rows}")

    def effects(self) -> list[str]:
        """The business rows committed, sorted."""
        connection = connect(self.url, autocommit=True)
        try:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT note FROM {self.business} ORDER BY note")
                return [row[0] for row in cursor.fetchall()]
        finally:
            connection.close()


class Steps:
    """A handler's statements on `tx.connection`, each one swallowing a driver error into `caught` when asked."""

    def __init__(self, asynchronous: bool) -> None:
        """Steps for the sync or the async API."""
        self.asynchronous = asynchronous
        self.caught: list[int] = []

    def handler(self, steps: list[tuple[str, bool]], *, before: threading.Barrier | None = None) -> Any:
        """A handler running `steps` ((statement, swallow its error), in order); `before` is awaited (in a thread)
        ahead of the last swallowed step, so another transaction can take its lock first."""
        last = max((i for i, (_, swallow) in enumerate(steps) if swallow), default=-1)
        caught = self.caught

        def sync_handler(tx: Tx, message: Message) -> None:
            for i, (statement, swallow) in enumerate(steps):
                if i == last and before is not None:
                    before.wait()
                try:
                    with tx.connection.cursor() as cursor:
                        cursor.execute(statement)
                except pymysql.MySQLError as exc:
                    if not swallow:
                        raise
                    caught.append(exc.args[0])

        async def async_handler(tx: Tx, message: Message) -> None:
            import asyncmy

            for i, (statement, swallow) in enumerate(steps):
                if i == last and before is not None:
                    await asyncio.to_thread(before.wait)
                try:
                    async with tx.connection.cursor() as cursor:
                        await cursor.execute(statement)
                except asyncmy.MySQLError as exc:
                    if not swallow:
                        raise
                    caught.append(exc.args[0])

        return async_handler if self.asynchronous else sync_handler


def process(url: str, table: str, message: Message, handler: Any, *, asynchronous: bool) -> Outcome:
    """Deliver `message` once through an inbox of its own by URL (the store's own connections), sync or async."""
    if not asynchronous:
        with Inbox(url, consumer="c", table=table) as inbox:
            return inbox.process(message, handler)

    async def deliver() -> Outcome:
        async with AsyncInbox(url, consumer="c", table=table) as inbox:
            return await inbox.process(message, handler)

    return asyncio.run(deliver())


def get(url: str, table: str, message: Message) -> Any:
    """The journal row of `message`, or None."""
    with Inbox(url, consumer="c", table=table) as inbox:
        return inbox.get(message.source, message.message_id)


@pytest.fixture
def shared(unique_name: str) -> Iterator[Tables]:
    """Fresh tables on the shared MariaDB (innodb_rollback_on_timeout off, the default)."""
    require_service("mariadb")
    tables = Tables(MYSQL_URL, unique_name)
    yield tables
    tables.drop()


@pytest.fixture(scope="module")
def rolling_back_server() -> Iterator[PrivateMariaDB]:
    """A private MariaDB that rolls the whole transaction back on a lock wait timeout, after one second."""
    if sys.platform != "linux":
        pytest.skip("private MariaDB servers are started on Linux")
    with PrivateMariaDB(options=["--innodb-rollback-on-timeout=ON", "--innodb-lock-wait-timeout=1"]) as db:
        yield db


@pytest.fixture
def private(rolling_back_server: PrivateMariaDB, unique_name: str) -> Iterator[Tables]:
    """Fresh tables on that private server."""
    tables = Tables(rolling_back_server.url, unique_name)
    yield tables
    tables.drop()


def holding(url: str, statement: str) -> tuple[threading.Thread, threading.Event]:
    """A thread of another transaction that runs `statement` and keeps its locks until the returned event is set,
    then rolls back; started, and holding them when this returns."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        connection = connect(url)
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement)
            locked.set()
            release.wait(timeout=60)
            connection.rollback()
        finally:
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert locked.wait(timeout=30)
    return thread, release


@pytest.mark.parametrize("asynchronous", APIS)
def test_a_deadlock_swallowed_by_the_handler_commits_nothing(shared: Tables, asynchronous: bool) -> None:
    """A real deadlock between the handler's transaction and another, swallowed by the handler, which then writes
    more: MariaDB rolled back the journal row and the first write; the delivery raises StoreError and nothing of
    it is committed (the write after the deadlock neither); the redelivery then runs the handler whole."""
    both_hold_one = threading.Barrier(2, timeout=30)

    def other_transaction() -> None:
        connection = connect(shared.url)
        try:
            # heavier than the handler's transaction (more rows written): InnoDB picks the handler's as the victim
            with connection.cursor() as cursor:
                rows = [(n,) for n in range(3, 2003)]
                cursor.executemany(f"INSERT INTO {shared.rows} (id, ballast) VALUES (%s, 0)", rows)
                cursor.execute(f"UPDATE {shared.rows} SET note = 'other' WHERE id = 2")
                both_hold_one.wait()
                cursor.execute(f"UPDATE {shared.rows} SET note = 'other' WHERE id = 1")
            connection.commit()
        finally:
            connection.close()

    steps = Steps(asynchronous)
    handler = steps.handler(
        [
            (f"INSERT INTO {shared.business} VALUES ('before')", False),
            (f"UPDATE {shared.rows} SET note = 'handler' WHERE id = 1", False),
            (f"UPDATE {shared.rows} SET note = 'handler' WHERE id = 2", True),  # the deadlock, swallowed
            (f"INSERT INTO {shared.business} VALUES ('after')", False),
        ],
        before=both_hold_one,
    )
    message = Message("1", "s")
    other = threading.Thread(target=other_transaction)
    other.start()
    try:
        with pytest.raises(StoreError, match="rolled back") as raised:
            process(shared.url, shared.journal, message, handler, asynchronous=asynchronous)
    finally:
        other.join(timeout=60)
    assert isinstance(raised.value, TransientError)  # not settled, nothing counted: the broker redelivers
    assert steps.caught == [DEADLOCK]
    assert get(shared.url, shared.journal, message) is None
    assert shared.effects() == []  # neither the write before the deadlock nor the one after it
    assert run(shared.url, f"SELECT count(*) FROM {shared.rows} WHERE note = 'other'") == 2  # the other one won
    plain = Steps(asynchronous).handler([(f"INSERT INTO {shared.business} VALUES ('whole')", False)])
    assert process(shared.url, shared.journal, message, plain, asynchronous=asynchronous) is Outcome.PROCESSED
    assert shared.effects() == ["whole"]
    assert get(shared.url, shared.journal, message).attempts == 1


@pytest.mark.parametrize("asynchronous", APIS)
def test_a_lock_wait_timeout_that_rolled_back_the_transaction_commits_nothing(
    private: Tables, asynchronous: bool
) -> None:
    """Under innodb_rollback_on_timeout a lock wait timeout (1205) rolls the whole transaction back: swallowed by
    the handler, which writes more, the delivery raises StoreError and nothing of it is committed; once the lock is
    free the redelivery is processed whole."""
    other, release = holding(private.url, f"UPDATE {private.rows} SET note = 'other' WHERE id = 1")
    steps = Steps(asynchronous)
    handler = steps.handler(
        [
            (f"INSERT INTO {private.business} VALUES ('before')", False),
            (f"UPDATE {private.rows} SET note = 'handler' WHERE id = 1", True),  # waits 1 s, then 1205, swallowed
            (f"INSERT INTO {private.business} VALUES ('after')", False),
        ]
    )
    message = Message("1", "s")
    try:
        with pytest.raises(StoreError, match="rolled back"):
            process(private.url, private.journal, message, handler, asynchronous=asynchronous)
    finally:
        release.set()
        other.join(timeout=60)
    assert steps.caught == [LOCK_WAIT]
    assert get(private.url, private.journal, message) is None
    assert private.effects() == []
    plain = Steps(asynchronous).handler([(f"INSERT INTO {private.business} VALUES ('whole')", False)])
    assert process(private.url, private.journal, message, plain, asynchronous=asynchronous) is Outcome.PROCESSED
    assert private.effects() == ["whole"]


@pytest.mark.parametrize("asynchronous", APIS)
def test_a_statement_error_swallowed_by_the_handler_keeps_the_transaction(shared: Tables, asynchronous: bool) -> None:
    """A duplicate key (1062) and a lock wait timeout without innodb_rollback_on_timeout (1205, the same number as
    above) roll back only their statement: the handler that swallows them settles PROCESSED, with the journal row
    and every other write it made committed."""
    other, release = holding(shared.url, f"UPDATE {shared.rows} SET note = 'other' WHERE id = 1")
    steps = Steps(asynchronous)
    handler = steps.handler(
        [
            (f"INSERT INTO {shared.business} VALUES ('before')", False),
            (f"INSERT INTO {shared.business} VALUES ('before')", True),  # 1062, swallowed
            ("SET SESSION innodb_lock_wait_timeout = 1", False),
            (f"UPDATE {shared.rows} SET note = 'handler' WHERE id = 1", True),  # 1205, swallowed
            ("SET SESSION innodb_lock_wait_timeout = DEFAULT", False),
            (f"INSERT INTO {shared.business} VALUES ('after')", False),
        ]
    )
    message = Message("1", "s")
    try:
        assert process(shared.url, shared.journal, message, handler, asynchronous=asynchronous) is Outcome.PROCESSED
    finally:
        release.set()
        other.join(timeout=60)
    assert steps.caught == [DUPLICATE, LOCK_WAIT]
    assert shared.effects() == ["after", "before"]
    assert get(shared.url, shared.journal, message).attempts == 1


@pytest.mark.parametrize("asynchronous", APIS)
def test_a_handler_reading_through_an_unbuffered_cursor_settles(shared: Tables, asynchronous: bool) -> None:
    """An unbuffered result set (SSCursor), whose reply carries no status until its rows are read (asyncmy reports
    0 meanwhile), is not taken for the end of the transaction: the delivery settles PROCESSED."""
    seen: list[int] = []
    message = Message("1", "s")

    def sync_handler(tx: Tx, message: Message) -> None:
        with tx.connection.cursor(pymysql.cursors.SSCursor) as cursor:
            cursor.execute(f"SELECT id FROM {shared.rows}")
            seen.extend(row[0] for row in cursor.fetchall())
        with tx.connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {shared.business} VALUES ('after')")

    async def async_handler(tx: Tx, message: Message) -> None:
        from asyncmy.cursors import SSCursor

        async with tx.connection.cursor(SSCursor) as cursor:
            await cursor.execute(f"SELECT id FROM {shared.rows}")
            seen.extend(row[0] for row in await cursor.fetchall())
        async with tx.connection.cursor() as cursor:
            await cursor.execute(f"INSERT INTO {shared.business} VALUES ('after')")

    handler = async_handler if asynchronous else sync_handler
    assert process(shared.url, shared.journal, message, handler, asynchronous=asynchronous) is Outcome.PROCESSED
    assert sorted(seen) == [1, 2]
    assert shared.effects() == ["after"]


@pytest.mark.parametrize("asynchronous", APIS)
def test_a_transaction_whose_first_statements_open_none_commits(shared: Tables, asynchronous: bool) -> None:
    """`transaction(work)` whose work starts with statements that open no transaction (a SELECT of no table, a SET:
    their replies say none is open) and then writes: nothing ended, the write is committed."""
    statements = ["SELECT 1", "SET @edinbox_test = 1", f"INSERT INTO {shared.business} VALUES ('written')"]

    def sync_work(tx: Tx) -> None:
        with tx.connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)

    async def async_work(tx: Tx) -> None:
        async with tx.connection.cursor() as cursor:
            for statement in statements:
                await cursor.execute(statement)

    if asynchronous:

        async def run_async() -> None:
            async with AsyncInbox(shared.url, consumer="c", table=shared.journal) as inbox:
                await inbox.transaction(async_work)

        asyncio.run(run_async())
    else:
        with Inbox(shared.url, consumer="c", table=shared.journal) as inbox:
            inbox.transaction(sync_work)
    assert shared.effects() == ["written"]
