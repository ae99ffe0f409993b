"""The outbox between relays: several relays share the rows, each sent once in key order, none waiting on the rows
another holds; a commit wakes a waiting relay, a deadlock victim's mark runs again (PostgreSQL)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence

import psycopg
import pymysql

from edinbox import Inbox, Tx
from edinbox._message import Outgoing
from edinbox.stores._mysql_sql import connect_options
from outbox.recorder import Recorder
from threads import in_threads


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
