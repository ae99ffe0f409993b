"""The outbox in the library: published in the transaction, sent by the relay after the commit, sync and async."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import timedelta

import psycopg
import pymysql
import pytest

from edinbox import AsyncInbox, ConfigurationError, Inbox, LimitError, Message, Outcome, SourceError, Tx
from edinbox._urls import database_url
from edinbox.stores._mysql_sql import connect_options
from outbox.recorder import Recorder


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
