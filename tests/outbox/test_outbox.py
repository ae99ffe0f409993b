"""The outbox in the library: published in the transaction, sent by the relay after the commit, sync and async."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta

import psycopg
import pymysql
import pytest

from edinbox import AsyncInbox, ConfigurationError, Inbox, LimitError, Message, Outcome, SourceError, Tx
from edinbox._message import Outgoing
from edinbox._urls import database_url
from edinbox.stores._mysql_sql import connect_options
from threads import in_threads


class Recorder:
    """A send that records what it got, and fails as told."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, bytes]] = []
        self.fail: Exception | None = None
        self.bad: bytes | None = None
        self.headers: list[Mapping[str, str] | None] = []

    def __call__(self, destination: str, messages: Sequence[Outgoing]) -> None:
        if self.fail is not None:
            raise self.fail
        if any(m.payload == self.bad for m in messages):
            raise ConfigurationError("payload refused")
        self.sent += [(destination, m.message_id, m.payload) for m in messages]
        self.headers += [m.headers for m in messages]

    async def send(self, destination: str, messages: Sequence[Outgoing]) -> None:
        """The async form."""
        self(destination, messages)


def test_published_rows_are_sent_after_the_commit_once(db: tuple[str, str]) -> None:
    """A handler's publish is sent by the next relay pass with its key, marked sent, and never sent again."""
    url, table = db
    recorder = Recorder()
    with Inbox(url, consumer="c", table=table) as inbox:

        def handler(tx: Tx, message: Message) -> None:
            tx.publish("dir:///out", b"ack:" + message.payload, key=f"ack/{message.message_id}")

        assert inbox.process(Message("1", "s", b"a"), handler) is Outcome.PROCESSED
        assert inbox.process(Message("1", "s", b"a"), handler) is Outcome.DUPLICATE
        assert inbox.outbox_stats().backlog == 1
        result = inbox.relay(recorder, limit=10)
        assert (result.sent, result.parked, result.error) == (1, (), None)
        assert recorder.sent == [("dir:///out", "ack/1", b"ack:a")]
        assert inbox.relay(recorder).sent == 0
        stats = inbox.outbox_stats()
        assert (stats.backlog, stats.sent, stats.oldest_unsent) == (0, 1, None)


def test_a_rolled_back_handler_publishes_nothing(db: tuple[str, str]) -> None:
    """A handler that publishes and then fails leaves no outbox row: nothing is sent for a rolled-back transaction."""
    url, table = db
    recorder = Recorder()
    with Inbox(url, consumer="c", table=table) as inbox:

        def handler(tx: Tx, message: Message) -> None:
            tx.publish("dir:///out", b"x", key="k")
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            inbox.process(Message("1", "s", b"a"), handler)
        assert inbox.relay(recorder).sent == 0
        assert recorder.sent == []


def test_async_publish_and_relay(db: tuple[str, str]) -> None:
    """AsyncInbox publishes with `await tx.publish` in a batch and relays with an async send."""
    url, table = db
    recorder = Recorder()

    async def main() -> None:
        async with AsyncInbox(url, consumer="c", table=table) as inbox:

            async def handler(tx: Tx, messages: list[Message]) -> None:
                for message in messages:
                    await tx.publish("amqp://h/?queue=q", message.payload, key=message.message_id)

            await inbox.process_batch([Message(str(i), "s", b"p%d" % i) for i in range(5)], handler)
            assert (await inbox.outbox_stats()).backlog == 5
            assert (await inbox.relay(recorder.send, limit=3)).sent == 3
            assert (await inbox.relay(recorder.send, limit=3)).sent == 2

    asyncio.run(main())
    assert [key for _, key, _ in recorder.sent] == ["0", "1", "2", "3", "4"]


def test_order_per_destination_and_key(db: tuple[str, str]) -> None:
    """Two rows of one key go out in the order published, one per pass; other keys are not held back."""
    url, table = db
    recorder = Recorder()
    with Inbox(url, consumer="c", table=table) as inbox:

        def work(tx: Tx) -> None:
            for key, payload in (("k", b"1"), ("k", b"2"), ("j", b"3"), ("k", b"4")):
                tx.publish("dir:///out", payload, key=key)

        inbox.transaction(work)
        assert inbox.relay(recorder).sent == 2
        assert [p for _, _, p in recorder.sent] == [b"1", b"3"]
        while inbox.relay(recorder).sent:
            pass
        assert [p for _, k, p in recorder.sent if k == "k"] == [b"1", b"2", b"4"]


def test_a_permanent_failure_parks_only_its_row(db: tuple[str, str]) -> None:
    """A send refused for one payload parks that row with its reason; its batch-mates are sent."""
    url, table = db
    recorder = Recorder()
    recorder.bad = b"bad"
    with Inbox(url, consumer="c", table=table) as inbox:

        def work(tx: Tx) -> None:
            for key, payload in (("a", b"ok1"), ("b", b"bad"), ("c", b"ok2")):
                tx.publish("dir:///out", payload, key=key)

        inbox.transaction(work)
        result = inbox.relay(recorder)
        assert result.sent == 2
        assert result.parked == (("b", "ConfigurationError: payload refused"),)
        assert inbox.relay(recorder).sent == 0
        stats = inbox.outbox_stats()
        assert (stats.backlog, stats.parked, stats.sent) == (0, 1, 2)


def test_a_transient_failure_leaves_rows_unsent(db: tuple[str, str]) -> None:
    """A broker failure marks nothing and is returned; the next pass sends the same rows."""
    url, table = db
    recorder = Recorder()
    recorder.fail = SourceError("broker down")
    with Inbox(url, consumer="c", table=table) as inbox:
        inbox.transaction(lambda tx: tx.publish("dir:///out", b"x", key="k"))
        result = inbox.relay(recorder)
        assert (result.sent, result.parked, result.error) == (0, (), recorder.fail)
        stats = inbox.outbox_stats()
        assert stats.backlog == 1
        assert stats.oldest_unsent is not None
        recorder.fail = None
        assert inbox.relay(recorder).sent == 1


def test_purge_deletes_sent_rows_past_the_horizon_only(db: tuple[str, str]) -> None:
    """`purge` deletes sent outbox rows older than its retention, never unsent or parked ones."""
    url, table = db
    recorder = Recorder()
    recorder.bad = b"bad"
    with Inbox(url, consumer="c", table=table, horizon=timedelta(0)) as inbox:

        def work(tx: Tx) -> None:
            for key, payload in (("a", b"ok"), ("b", b"bad")):
                tx.publish("dir:///out", payload, key=key)

        inbox.transaction(work)
        inbox.relay(recorder)
        inbox.transaction(lambda tx: tx.publish("dir:///out", b"later", key="c"))
        assert inbox.purge(timedelta(days=1)) == 0
        assert inbox.purge(timedelta(0)) == 1
        stats = inbox.outbox_stats()
        assert (stats.backlog, stats.parked, stats.sent) == (1, 1, 0)


def test_purge_max_rate_paces_the_outbox_rows_too(db: tuple[str, str]) -> None:
    """`purge(max_rate=50)` of 50 sent outbox rows in batches of 10 takes at least a second: the journal's throttle
    counts the outbox's rows as well."""
    url, table = db
    recorder = Recorder()
    with Inbox(url, consumer="c", table=table, horizon=timedelta(0)) as inbox:

        def work(tx: Tx) -> None:
            for i in range(50):
                tx.publish("dir:///out", b"ok", key=f"k{i}")

        inbox.transaction(work)
        while inbox.relay(recorder).sent:
            pass
        assert inbox.outbox_stats().sent == 50
        started = time.monotonic()
        assert inbox.purge(timedelta(0), batch_size=10, max_rate=50) == 50
        assert 0.99 <= time.monotonic() - started < 15
        assert inbox.outbox_stats().sent == 0


def test_publish_refuses_what_no_relay_could_send(db: tuple[str, str]) -> None:
    """A destination that is not a URL, an empty or oversized key, or a str payload are refused at publish."""
    url, table = db
    with Inbox(url, consumer="c", table=table) as inbox:
        for destination, payload, key in (("out", b"x", "k"), ("dir:///o", b"x", ""), ("dir:///o", "x", "k")):
            with pytest.raises(ConfigurationError):
                inbox.transaction(lambda tx, d=destination, p=payload, k=key: tx.publish(d, p, key=k))
        with pytest.raises(LimitError):
            inbox.transaction(lambda tx: tx.publish("dir:///o", b"x", key="k" * 600))
        assert inbox.outbox_stats().backlog == 0


def test_publish_joins_the_callers_transaction(db: tuple[str, str]) -> None:
    """On the caller's connection, a publish is kept only when the caller commits."""
    url, table = db
    recorder = Recorder()
    target = database_url(url)
    connection: psycopg.Connection | sqlite3.Connection | pymysql.Connection
    if target.dialect == "postgresql":
        connection = psycopg.connect(url)
    elif target.dialect == "mysql":  # as an application opens it: autocommit off
        connection = pymysql.connect(**connect_options(url) | {"autocommit": False})
    else:
        connection = sqlite3.connect(target.target, isolation_level="DEFERRED")
    with Inbox(connection, consumer="c", table=table) as joined:
        joined.transaction(lambda tx: tx.publish("dir:///o", b"rolled back", key="r"))
        connection.rollback()
        joined.transaction(lambda tx: tx.publish("dir:///o", b"committed", key="c"))
        connection.commit()
    connection.close()
    with Inbox(url, consumer="c", table=table) as inbox:
        inbox.relay(recorder)
    assert [p for _, _, p in recorder.sent] == [b"committed"]


def test_publish_needs_a_transaction() -> None:
    """Lease mode has no transaction: publish is a configuration error there."""
    with pytest.raises(ConfigurationError):
        Tx(None, "sqlite").publish("dir:///o", b"x", key="k")


def test_two_relays_send_each_row_once_in_key_order(server: tuple[str, str]) -> None:
    """Two relays draining one outbox at once (PostgreSQL, MariaDB: FOR UPDATE SKIP LOCKED) send every row exactly
    once, each key's rows in order."""
    url, table = server
    with Inbox(url, consumer="c", table=table) as inbox:
        inbox.create_schema()

        def work(tx: Tx) -> None:
            for n in range(200):
                tx.publish("dir:///o", str(n).encode(), key=f"k{n % 7}")

        inbox.transaction(work)
    got: list[tuple[str, int]] = []
    lock = threading.Lock()

    def send(destination: str, messages: Sequence[Outgoing]) -> None:
        with lock:
            got.extend((m.message_id, int(m.payload)) for m in messages)
        time.sleep(0.002)  # a send takes a moment: the other relay claims meanwhile

    def relay() -> None:
        with Inbox(url, consumer="c", table=table) as mine:
            while mine.relay(send, limit=5).sent or mine.outbox_stats().backlog:
                pass

    in_threads(relay, relay, timeout=120)
    assert sorted(n for _, n in got) == list(range(200))
    for k in range(7):
        mine = [n for key, n in got if key == f"k{k}"]
        assert mine == sorted(mine)


def test_a_relay_skips_the_rows_another_relay_holds(server: tuple[str, str]) -> None:
    """While one relay is inside its send (its claim's rows locked), a second relay neither waits for those rows
    nor sends them, nor the next row of a held key; it sends the other keys' rows at once."""
    url, table = server
    with Inbox(url, consumer="c", table=table) as inbox:
        inbox.create_schema()

        def work(tx: Tx) -> None:
            for key, payload in (("a", b"a1"), ("a", b"a2"), ("b", b"b1"), ("c", b"c1")):
                tx.publish("dir:///o", payload, key=key)

        inbox.transaction(work)
    with held(url, table, limit=1) as first:
        recorder = Recorder()
        with Inbox(url, consumer="c", table=table) as other:
            started = time.monotonic()
            assert other.relay(recorder).sent == 2
            assert time.monotonic() - started < 30  # skipped, not waited for (the held row is released only at the end)
    assert first == [b"a1"]
    assert sorted(p for _, _, p in recorder.sent) == [b"b1", b"c1"]  # a2 waits for a1: order per key


@contextlib.contextmanager
def held(url: str, table: str, *, limit: int) -> Iterator[list[bytes]]:
    """A relay on a thread of its own, inside its send of up to `limit` rows until the block ends; yields the
    payloads it holds."""
    inside, release = threading.Event(), threading.Event()
    first: list[bytes] = []

    def slow(destination: str, messages: Sequence[Outgoing]) -> None:
        first.extend(m.payload for m in messages)
        inside.set()
        assert release.wait(120)

    def hold() -> None:
        with Inbox(url, consumer="c", table=table) as mine:
            mine.relay(slow, limit=limit)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert inside.wait(60)
        yield first
    finally:
        release.set()
        thread.join(60)


def test_a_relay_marks_its_rows_without_waiting_for_those_another_relay_holds(server: tuple[str, str]) -> None:
    """In an outbox long in use (most rows sent), a relay marks what it sent at once while another relay holds rows
    inside its send: the mark reads its own rows alone (on MariaDB, a mark that went through the unsent rows' index
    waited for every unsent row another relay held, and two such marks deadlocked)."""
    url, table = server
    with Inbox(url, consumer="c", table=table) as inbox:
        inbox.create_schema()
        sent_long_ago(url, f"{table}_outbox", 300)
        inbox.transaction(lambda tx: tx.publish_many([("dir:///o", key.encode(), key) for key in "abcd"]))
    with held(url, table, limit=2) as first:
        recorder = Recorder()
        with Inbox(url, consumer="c", table=table) as other:
            started = time.monotonic()
            assert other.relay(recorder).sent == 2
            assert time.monotonic() - started < 30  # not waited for (a lock wait gives up after 50 s)
    assert first == [b"a", b"b"]
    assert sorted(p for _, _, p in recorder.sent) == [b"c", b"d"]
    with Inbox(url, consumer="c", table=table) as inbox:
        assert inbox.outbox_stats().backlog == 0


def test_a_claim_holds_only_the_rows_it_returns(server: tuple[str, str]) -> None:
    """A relay's claim locks only the rows it sends: the rows it read and passed over (each behind an older row of its
    key that another relay holds) stay free, so once that relay has sent the older rows a third relay sends them at
    once, while the second is still inside its send (on MariaDB the claim kept every row it passed over locked, even
    at READ COMMITTED, until its own send ended)."""
    url, table = server
    with Inbox(url, consumer="c", table=table) as inbox:
        inbox.create_schema()
        rows = [("dir:///o", payload.encode(), payload[0]) for payload in ("a1", "b1", "a2", "b2", "c1")]
        inbox.transaction(lambda tx: tx.publish_many(rows))
    with contextlib.ExitStack() as first_relay:
        first = first_relay.enter_context(held(url, table, limit=2))
        with held(url, table, limit=1) as second:
            first_relay.close()  # the first relay marks a1 and b1 sent: a2 and b2 are next of their keys
            recorder = Recorder()
            with Inbox(url, consumer="c", table=table) as third:
                assert third.relay(recorder).sent == 2
    assert (first, second) == ([b"a1", b"b1"], [b"c1"])
    assert [p for _, _, p in recorder.sent] == [b"a2", b"b2"]


def sent_long_ago(url: str, outbox: str, count: int) -> None:
    """Insert `count` rows sent already into `outbox` (`schema.name`), as an outbox long in use holds them (the index
    entries their marks left behind purged), and refresh the planner's statistics."""
    keys = [(f"old{n}",) for n in range(count)]
    if url.startswith("mysql://"):
        quoted = ".".join(f"`{part}`" for part in outbox.split("."))
        connection = pymysql.connect(**connect_options(url) | {"autocommit": True})
        with connection, connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {quoted} (destination, `key`, payload, sent_at)"
                " VALUES ('dir:///o', %s, 'old', UTC_TIMESTAMP(6))",
                keys,
            )
            cursor.execute(f"ANALYZE TABLE {quoted}")
        return
    with psycopg.connect(url, autocommit=True) as pg, pg.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {outbox} (destination, key, payload, sent_at) VALUES ('dir:///o', %s, 'old', now())".encode(),
            keys,
        )
        cursor.execute(f"ANALYZE {outbox}".encode())


def test_a_commit_that_publishes_wakes_a_waiting_relay_on_postgresql(postgres_url: str, unique_name: str) -> None:
    """`wait_outbox` returns at the commit of a publish (LISTEN/NOTIFY), long before its timeout."""
    table = f"{unique_name}.inbox"
    try:
        with (
            Inbox(postgres_url, consumer="c", table=table) as inbox,
            Inbox(postgres_url, consumer="c", table=table) as waiter,
        ):
            inbox.create_schema()
            waiter.wait_outbox(0.01)  # listening from now on
            thread = threading.Thread(target=waiter.wait_outbox, args=(600,))
            thread.start()
            inbox.transaction(lambda tx: tx.publish("dir:///o", b"x", key="k"))
            thread.join(60)
            assert not thread.is_alive()
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA {unique_name} CASCADE".encode())


def test_a_deadlock_victims_mark_is_run_again_on_postgresql(postgres_url: str, unique_name: str) -> None:
    """On PostgreSQL too, the relay's mark that the server aborts as a deadlock's victim (40P01) is run again: the pass
    returns its result, the row sent once and marked. The other transaction locks the outbox in SHARE mode during the
    send (the mark's UPDATE waits for it), then asks for the relay's row; the relay, waiting longest, finds the
    deadlock first and is aborted (MariaDB's deadlock: `test_outbox_mariadb_locks.py`)."""
    table = f"{unique_name}.inbox"
    outbox = f'"{unique_name}"."inbox_outbox"'.encode()
    other = psycopg.connect(postgres_url)
    outcome: list[str] = []

    def close_the_cycle() -> None:
        with psycopg.connect(postgres_url, autocommit=True) as watcher:
            deadline = time.monotonic() + 30
            while not watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                (f"%{unique_name}%",),
            ).fetchone()[0]:
                assert time.monotonic() < deadline, "the relay's mark never waited"
                time.sleep(0.01)
        try:
            other.execute(b"SELECT id FROM " + outbox + b" FOR UPDATE")
            outcome.append("granted")
        except psycopg.errors.DeadlockDetected:
            outcome.append("victim")  # the relay was not rolled back: the test proves nothing
        finally:
            other.rollback()

    cycle = threading.Thread(target=close_the_cycle)
    sent: list[bytes] = []

    def record(destination: str, messages: Sequence[Outgoing]) -> None:
        sent.extend(m.payload for m in messages)
        other.execute(b"LOCK TABLE " + outbox + b" IN SHARE MODE")
        cycle.start()

    try:
        with Inbox(postgres_url, consumer="c", table=table) as inbox:
            inbox.create_schema()
            inbox.transaction(lambda tx: tx.publish("dir:///o", b"1", key="a"))
            try:
                assert inbox.relay(record).sent == 1
            finally:
                if cycle.is_alive():
                    cycle.join(60)
            assert (outcome, sent) == (["granted"], [b"1"])
            assert inbox.outbox_stats().backlog == 0
    finally:
        other.close()
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA {unique_name} CASCADE".encode())


def test_publish_many_stores_each_in_order(db: tuple[str, str]) -> None:
    """`publish_many` stores several rows in one batch of statements, relayed in the order given."""
    url, table = db
    recorder = Recorder()
    with Inbox(url, consumer="c", table=table) as inbox:
        inbox.transaction(lambda tx: tx.publish_many([("dir:///o", b"1", "a"), ("dir:///o", b"2", "b")]))
        assert inbox.relay(recorder).sent == 2
    assert recorder.sent == [("dir:///o", "a", b"1"), ("dir:///o", "b", b"2")]


def test_headers_reach_the_send_and_what_no_broker_carries_is_refused(db: tuple[str, str]) -> None:
    """Headers published with a row are handed to the send with it; headers for a spool folder, a header in the
    place of the producer id, and a value with a line break are refused at publish, nothing stored."""
    url, table = db
    recorder = Recorder()
    with Inbox(url, consumer="c", table=table) as inbox:

        def work(tx: Tx) -> None:
            tx.publish("amqp://h/?queue=q", b"1", key="a", headers={"traceparent": "00-ab", "kind": "997"})
            tx.publish("amqp://h/?queue=q", b"2", key="b")

        inbox.transaction(work)
        refused = [
            ("dir:///o", {"kind": "997"}, "carries no headers"),
            ("amqp://h/?queue=q", {"X-Message-Id": "other"}, "reserved"),
            ("nats://h?stream=s&subject=s.x", {"Nats-Msg-Id": "other"}, "reserved"),
            ("redis://h?stream=s", {"payload": "x"}, "reserved"),
            ("kafka://h:9092?topic=t", {"message_id": "x"}, "reserved"),
            ("amqp://h/?queue=q", {"kind": "a\r\nb"}, "line break"),
            ("amqp://h/?queue=q", {"bad name": "x"}, "printable"),
        ]
        for destination, headers, why in refused:
            with pytest.raises(ConfigurationError, match=why):
                inbox.transaction(lambda tx, d=destination, h=headers: tx.publish(d, b"x", key="k", headers=h))
        assert inbox.relay(recorder).sent == 2
    assert recorder.headers == [{"kind": "997", "traceparent": "00-ab"}, None]


def test_rows_behind_a_parked_row_of_the_same_key_are_sent(db: tuple[str, str]) -> None:
    """A parked row leaves the order of its key: the next row of the same destination and key is sent (the parked
    one never will be), and the parked row stays counted with its reason."""
    url, table = db
    recorder = Recorder()
    recorder.bad = b"bad"
    with Inbox(url, consumer="c", table=table) as inbox:
        inbox.transaction(lambda tx: [tx.publish("dir:///o", p, key="k") for p in (b"1", b"bad", b"3")])
        passes = [inbox.relay(recorder) for _ in range(4)]
        assert [(r.sent, len(r.parked)) for r in passes] == [(1, 0), (0, 1), (1, 0), (0, 0)]
        assert [p for _, _, p in recorder.sent] == [b"1", b"3"]
        stats = inbox.outbox_stats()
        assert (stats.backlog, stats.parked, stats.sent) == (0, 1, 2)


def test_on_complete_publishes_with_the_lease_modes_completion(db: tuple[str, str]) -> None:
    """In lease mode `on_complete(tx)` publishes in the transaction that completes the claim: once, never for a
    duplicate, and nothing (the claim still held) when it fails; without a lease it joins the handler's transaction."""
    url, table = db
    published: list[str] = []
    with Inbox(url, consumer="c", table=table) as inbox:

        def effect(tx: Tx, message: Message) -> None:
            assert tx.connection is None  # lease mode: the handler is outside any transaction

        def complete(tx: Tx) -> None:
            published.append("done")
            tx.publish("dir:///out", b"ack", key="ack/1")

        lease = timedelta(seconds=30)
        assert inbox.process(Message("1", "s", b"a"), effect, lease=lease, on_complete=complete) is Outcome.PROCESSED
        assert inbox.process(Message("1", "s", b"a"), effect, lease=lease, on_complete=complete) is Outcome.DUPLICATE
        assert (published, inbox.outbox_stats().backlog) == (["done"], 1)

        def failing(tx: Tx) -> None:
            tx.publish("dir:///out", b"ack", key="ack/2")
            raise RuntimeError("the acknowledgment could not be written")

        with pytest.raises(RuntimeError):
            inbox.process(Message("2", "s", b"b"), effect, lease=lease, on_complete=failing)
        assert inbox.get("s", "2").status.value == "in_progress"  # not completed: its lease runs out, then a retry
        assert inbox.outbox_stats().backlog == 1

        def handler(tx: Tx, message: Message) -> None:
            assert tx.connection is not None

        assert inbox.process(Message("3", "s", b"c"), handler, on_complete=complete) is Outcome.PROCESSED
        assert (published, inbox.outbox_stats().backlog) == (["done", "done"], 2)
