"""Two deliveries of the same message at the same moment, on real concurrent connections: one effect."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest
from inbox_harness import aexecute, execute

from edinbox import AsyncInbox, Inbox, Message, Outcome, Tx
from services import MYSQL_URL, require_service
from threads import in_threads

HOLD = 0.3  # seconds the first handler keeps its transaction open


class Boom(Exception):
    """A handler failure."""


def _mariadb(sql: str) -> tuple[Any, ...] | None:
    """Run `sql` on the test MariaDB database (autocommit); its first row."""
    connection = pymysql.connect(host="127.0.0.1", port=3306, user="root", database="test", autocommit=True)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchone()  # type: ignore[no-any-return]
    finally:
        connection.close()


def _tables(name: str) -> str:
    """The journal's tables (`name`, its version, outbox and kept payloads) and the business table, for DROP TABLE."""
    return ", ".join(name + suffix for suffix in ("", "_version", "_outbox", "_payloads", "_fx"))


@pytest.fixture(params=["postgresql", "mysql", "sqlite-file"])
def database(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A fresh journal and business table; yields the URL, the table and how to count effects."""
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"CREATE TABLE {unique_name}_fx (message_id text)")
        with Inbox(url, consumer="c", table=unique_name) as inbox:
            inbox.create_schema()
        yield {"url": url, "table": unique_name, "insert": f"INSERT INTO {unique_name}_fx VALUES (%s)"}
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP TABLE IF EXISTS {_tables(unique_name)}")
            admin.execute(f"DROP DOMAIN IF EXISTS {unique_name}_status")
        return
    if request.param == "mysql":
        require_service("mariadb")
        _mariadb(f"CREATE TABLE {unique_name}_fx (message_id VARCHAR(100))")
        with Inbox(MYSQL_URL, consumer="c", table=unique_name) as inbox:
            inbox.create_schema()
        yield {"url": MYSQL_URL, "table": unique_name, "insert": f"INSERT INTO {unique_name}_fx VALUES (%s)"}
        _mariadb(f"DROP TABLE IF EXISTS {_tables(unique_name)}")
        return
    path = tmp_path / "inbox.db"
    with sqlite3.connect(path) as admin:
        admin.execute(f"CREATE TABLE {unique_name}_fx (message_id TEXT)")
    url = f"sqlite:///{path}"
    with Inbox(url, consumer="c", table=unique_name) as inbox:
        inbox.create_schema()
    yield {"url": url, "table": unique_name, "insert": f"INSERT INTO {unique_name}_fx VALUES (?)"}


def effects(database: dict[str, Any]) -> int:
    """Committed business rows."""
    sql = f"SELECT count(*) FROM {database['table']}_fx"
    if database["url"].startswith("postgresql"):
        with psycopg.connect(database["url"]) as connection:
            row = connection.execute(sql.encode()).fetchone()
    elif database["url"].startswith("mysql"):
        row = _mariadb(sql)
    else:
        with sqlite3.connect(database["url"].removeprefix("sqlite:///")) as connection:
            row = connection.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def together(database: dict[str, Any], deliveries: list[Callable[[Inbox], Any]]) -> list[Any]:
    """Run each delivery in a thread of its own, each with its own inbox, all at the same moment; what each
    returned, or the exception it raised."""
    barrier = threading.Barrier(len(deliveries))
    results: list[Any] = [None] * len(deliveries)

    def deliver(index: int) -> None:
        with Inbox(database["url"], consumer="c", table=database["table"]) as inbox:
            inbox.stats()  # connect before the start line
            barrier.wait()
            try:
                results[index] = deliveries[index](inbox)
            except Exception as exc:
                results[index] = exc

    in_threads(*(partial(deliver, i) for i in range(len(deliveries))))
    return results


def race(database: dict[str, Any], handlers: list[Any]) -> list[Any]:
    """Deliver message "1" from one thread per handler (each with its own inbox), all at the same moment."""
    return together(database, [lambda inbox, h=h: inbox.process(Message("1", "s", b"x"), h) for h in handlers])


def test_concurrent_duplicate_waits_and_sees_duplicate(database: dict[str, Any]) -> None:
    """Two threads deliver the same message at once: one effect; the other waits for the commit, gets DUPLICATE."""
    calls: list[float] = []

    def slow(tx: Tx, message: Message) -> None:
        calls.append(time.monotonic())
        execute(tx.connection, database["insert"], (message.message_id,))
        time.sleep(HOLD)

    started = time.monotonic()
    results = race(database, [slow, slow])
    assert sorted(r.value for r in results) == ["duplicate", "processed"]
    assert len(calls) == 1
    assert effects(database) == 1
    assert time.monotonic() - started >= HOLD  # the duplicate returned only after the first transaction ended


def test_concurrent_duplicate_processes_when_the_first_rolls_back(database: dict[str, Any]) -> None:
    """When the first delivery's handler fails and rolls back, the waiting one processes the message."""
    lock = threading.Lock()
    order: list[str] = []

    def first_fails(tx: Tx, message: Message) -> None:
        with lock:
            order.append("call")
            first = len(order) == 1
        execute(tx.connection, database["insert"], (message.message_id,))
        if first:
            time.sleep(HOLD)
            raise Boom

    results = race(database, [first_fails, first_fails])
    assert len(order) == 2
    assert sum(isinstance(r, Boom) for r in results) == 1
    assert Outcome.PROCESSED in results
    assert effects(database) == 1


def _deliver_all(database: dict[str, Any], ids: list[str], barrier: Any, queue: Any) -> None:
    """Child process: open an inbox, wait for the others, deliver every id, report the outcomes."""

    def handler(tx: Tx, message: Message) -> None:
        execute(tx.connection, database["insert"], (message.message_id,))

    with Inbox(database["url"], consumer="c", table=database["table"]) as inbox:
        inbox.stats()
        barrier.wait()
        queue.put([inbox.process(Message(i, "s", b"x"), handler).value for i in ids])


def test_processes_delivering_the_same_messages_make_one_effect_each(database: dict[str, Any]) -> None:
    """Four processes deliver the same 25 messages at the same moment: exactly 25 effects, 75 duplicates."""
    context = multiprocessing.get_context("fork")
    ids = [f"m{i}" for i in range(25)]
    barrier = context.Barrier(4)
    queue = context.Queue()
    args = (database, ids, barrier, queue)
    processes = [context.Process(target=_deliver_all, args=args) for _ in range(4)]
    for process in processes:
        process.start()
    outcomes = [value for _ in processes for value in queue.get(timeout=60)]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert outcomes.count("processed") == 25
    assert outcomes.count("duplicate") == 75
    assert effects(database) == 25


def test_async_concurrent_duplicates_make_one_effect(database: dict[str, Any]) -> None:
    """Two AsyncInbox deliveries of one message in the same loop, on two connections: one effect."""

    async def slow(tx: Tx, message: Message) -> None:
        await aexecute(tx.connection, database["insert"], (message.message_id,))
        await asyncio.sleep(HOLD)

    async def scenario() -> list[Outcome]:
        inboxes = [AsyncInbox(database["url"], consumer="c", table=database["table"]) for _ in range(2)]
        try:
            for inbox in inboxes:
                await inbox.stats()
            results = await asyncio.gather(*(inbox.process(Message("1", "s"), slow) for inbox in inboxes))
        finally:
            for inbox in inboxes:
                await inbox.aclose()
        return list(results)

    assert sorted(o.value for o in asyncio.run(scenario())) == ["duplicate", "processed"]
    assert effects(database) == 1


def test_threads_sharing_one_inbox_make_one_effect_per_key(database: dict[str, Any]) -> None:
    """Eight threads share one Inbox (its own connection plus a pool when they overlap): one effect per key."""
    ids = [f"k{i}" for i in range(10)]
    outcomes: list[Outcome] = []
    lock = threading.Lock()

    def handler(tx: Tx, message: Message) -> None:
        execute(tx.connection, database["insert"], (message.message_id,))
        time.sleep(0.005)

    with Inbox(database["url"], consumer="c", table=database["table"], pool_size=4) as inbox:
        barrier = threading.Barrier(8)

        def worker() -> None:
            barrier.wait()
            for message_id in ids:
                outcome = inbox.process(Message(message_id, "s"), handler)
                with lock:
                    outcomes.append(outcome)

        in_threads(*[worker] * 8)
    assert outcomes.count(Outcome.PROCESSED) == 10
    assert outcomes.count(Outcome.DUPLICATE) == 70
    assert effects(database) == 10


def test_tasks_sharing_one_async_inbox_make_one_effect_per_key(database: dict[str, Any]) -> None:
    """Six tasks share one AsyncInbox (its own connection, a pool when they overlap): one effect per key."""

    async def handler(tx: Tx, message: Message) -> None:
        await aexecute(tx.connection, database["insert"], (message.message_id,))
        await asyncio.sleep(0.005)

    async def scenario() -> list[Outcome]:
        async with AsyncInbox(database["url"], consumer="c", table=database["table"], pool_size=3) as inbox:

            async def worker() -> list[Outcome]:
                return [await inbox.process(Message(f"k{i}", "s"), handler) for i in range(8)]

            results = await asyncio.gather(*(worker() for _ in range(6)))
        return [outcome for result in results for outcome in result]

    outcomes = asyncio.run(scenario())
    assert outcomes.count(Outcome.PROCESSED) == 8
    assert outcomes.count(Outcome.DUPLICATE) == 40
    assert effects(database) == 8


def batch_race(database: dict[str, Any], handlers: list[Any], batches: list[list[str]]) -> list[Any]:
    """Deliver one batch per handler from one thread each (each with its own inbox), all at the same moment; the
    outcomes of each batch, or the exception it raised."""
    return together(
        database,
        [
            lambda inbox, h=h, keys=keys: inbox.process_batch([Message(k, "s", b"x") for k in keys], h)
            for h, keys in zip(handlers, batches, strict=True)
        ],
    )


def test_concurrent_batches_sharing_keys_make_one_effect_each(database: dict[str, Any]) -> None:
    """Three batches holding the same 20 keys (two of them also 5 keys of their own) at once: one effect per key;
    the batches that wait for the first see its keys as duplicates and still process their own."""

    def slow(tx: Tx, messages: list[Message]) -> None:
        for message in messages:
            execute(tx.connection, database["insert"], (message.message_id,))
        time.sleep(HOLD)

    shared = [f"k{i:02d}" for i in range(20)]
    batches = [shared, [*shared, *(f"a{i}" for i in range(5))], [*shared, *(f"b{i}" for i in range(5))]]
    results = batch_race(database, [slow] * 3, batches)
    outcomes = [outcome for result in results for outcome in result]
    assert outcomes.count(Outcome.PROCESSED) == 30
    assert outcomes.count(Outcome.DUPLICATE) == 40
    assert effects(database) == 30


def test_concurrent_batch_processes_the_keys_when_the_first_rolls_back(database: dict[str, Any]) -> None:
    """When the first of two batches of the same keys fails and rolls back, the waiting one processes them all."""
    lock = threading.Lock()
    calls: list[int] = []

    def first_fails(tx: Tx, messages: list[Message]) -> None:
        with lock:
            calls.append(len(messages))
            first = len(calls) == 1
        for message in messages:
            execute(tx.connection, database["insert"], (message.message_id,))
        if first:
            time.sleep(HOLD)
            raise Boom

    keys = [f"k{i:02d}" for i in range(20)]
    results = batch_race(database, [first_fails, first_fails], [keys, keys])
    assert calls == [20, 20]
    assert sum(isinstance(r, Boom) for r in results) == 1
    assert [Outcome.PROCESSED] * 20 in results
    assert effects(database) == 20
