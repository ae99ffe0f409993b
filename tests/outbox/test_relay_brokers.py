"""The relay against real brokers: headers arrive on every broker, a payload over RabbitMQ's size limit is parked
alone (and does not hold back its key), publishers stay open across passes, and a broker killed while the relay
sends a few hundred rows costs nothing: the relay keeps running, every row arrives, a receiver's inbox sees each once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from edinbox import AsyncInbox, ConfigurationError, Inbox, Message, Outcome, Outgoing
from edinbox.loop import Publishers, Relay
from edinbox.loop._outage import Outage
from edinbox.sources import Delivery, open_source
from edinbox.sources._kafka_config import MockCluster
from servers import PrivateServer
from services import require_service
from sources.test_rabbitmq import drop

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"
HEADERS = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "kind": "997"}


def relay_for(inbox: AsyncInbox, *, limit: int = 100, destinations: Sequence[str] = (RABBITMQ,)) -> Relay:
    """A relay as `edinbox relay` builds it: backoff through outages, never giving up; the passwords of the rows'
    destinations from `destinations` (the shared RabbitMQ's)."""
    outage = Outage(logging.getLogger("edinbox.test"), give_up_after=None, name="relay")
    return Relay(inbox, outage=outage, stop=asyncio.Event(), limit=limit, idle=0.2, destinations=destinations)


def received_once(deliveries: list[Delivery], tmp_path: Path) -> int:
    """Run the deliveries through a receiver's inbox keyed by producer id; return how many it processed."""
    processed = 0
    with Inbox(f"sqlite:///{tmp_path / 'receiver.db'}", consumer="partner") as receiver:
        receiver.create_schema()
        for delivery in deliveries:
            message = Message(delivery.message_id or "", "relay", delivery.payload)
            processed += receiver.process(message, lambda tx, m: None) is Outcome.PROCESSED
    return processed


def fill(db: str, destination: str, keys: list[str], *, headers: dict[str, str] | None = None) -> None:
    """Create the journal and commit one outbox row per key (payload: the key), ten rows a transaction."""
    with Inbox(db, consumer="hub") as inbox:
        inbox.create_schema()
        for start in range(0, len(keys), 10):
            inbox.transaction(
                lambda tx, s=start: [
                    tx.publish(destination, k.encode(), key=k, headers=headers) for k in keys[s : s + 10]
                ]
            )


async def drain(url: str, count: int, *, within: float = 30) -> list[Delivery]:
    """Receive and ack until `count` deliveries arrived (or `within` seconds passed), then a little longer for
    copies."""
    got: list[Delivery] = []
    deadline = time.monotonic() + within
    async with open_source(url, consumer="receiver") as source:
        while time.monotonic() < deadline:
            batch = await source.receive(max_messages=100, timeout=1.0)
            for delivery in batch:
                await source.ack(delivery)
            got += batch
            if len(got) >= count and not batch:
                break
    return got


async def until(check: Callable[[], bool], *, within: float, what: str) -> None:
    """Return once `check()` holds, looking every 5 ms; fail the test, naming `what` was awaited, when it still does
    not hold `within` seconds (of the clock, however slow each look is) after the call."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"gave up waiting after {within:g} s: {what}")
        await asyncio.sleep(0.005)


async def test_until_fails_at_its_deadline_in_seconds() -> None:
    """until() raises an AssertionError naming what it awaited once its seconds are spent, however slow each look
    is: here one look takes 50 ms, so counting 5 ms passes would wait eleven times longer and then return."""

    def slow_never() -> bool:
        time.sleep(0.05)
        return False

    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"gave up waiting after 0.2 s: the impossible"):
        await until(slow_never, within=0.2, what="the impossible")
    assert time.monotonic() - started < 1.5
    await until(lambda: True, within=0, what="what already holds")


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    """A librdkafka mock cluster in this process."""
    mock = MockCluster(brokers=1)
    yield mock
    mock.close()


def read_kafka(bootstrap: str, topic: str, count: int) -> list[Any]:
    """The first `count` records of a topic, read from the start of every partition."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "log_level": 3})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
        records: list[Any] = []
        deadline = time.monotonic() + 30
        while len(records) < count and time.monotonic() < deadline:
            records += [r for r in consumer.consume(count, 1.0) if r.error() is None]
        return records
    finally:
        consumer.close()


@pytest.mark.parametrize("broker", ["rabbitmq", "nats", "redis"])
async def test_headers_arrive_with_the_producer_id(broker: str, tmp_path: Path, unique_name: str) -> None:
    """Headers published with a row reach the receiver beside the producer id: AMQP headers, NATS headers, Redis
    stream-entry fields."""
    require_service(broker)
    url = {
        "rabbitmq": f"{RABBITMQ}?queue={unique_name}",
        "nats": f"nats://127.0.0.1:4222?stream={unique_name}&subject={unique_name}.acks",
        "redis": f"redis://127.0.0.1:6379/0?stream={unique_name}",
    }[broker]
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    fill(db, url, ["ack/1", "ack/2"], headers=HEADERS)
    try:
        async with AsyncInbox(db, consumer="hub") as inbox:
            totals = await relay_for(inbox).run(once=True)
        assert totals["sent"] == 2
        got = await drain(url, 2)
        assert sorted(d.message_id or "" for d in got) == ["ack/1", "ack/2"]
        for delivery in got:
            assert {k: delivery.headers.get(k) for k in HEADERS} == HEADERS
    finally:
        if broker == "rabbitmq":
            await drop(unique_name)


async def test_headers_arrive_as_kafka_record_headers(cluster: MockCluster, tmp_path: Path, unique_name: str) -> None:
    """On Kafka the headers are record headers beside the producer id's header."""
    url = cluster.url(topic=unique_name)
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    fill(db, url, ["ack/1"], headers=HEADERS)
    async with AsyncInbox(db, consumer="hub") as inbox:
        assert (await relay_for(inbox).run(once=True))["sent"] == 1
    [record] = await asyncio.to_thread(read_kafka, cluster.bootstrap, unique_name, 1)
    headers = {name: value.decode() for name, value in record.headers()}
    assert headers == {**HEADERS, "message_id": "ack/1"}


async def test_a_payload_over_rabbitmqs_max_message_size_is_parked(tmp_path: Path, unique_name: str) -> None:
    """RabbitMQ refusing a payload over its max_message_size (128 MiB by default) parks that row with the broker's
    reason; the rows beside it, and the row published after it under the same key, are sent; nothing is retried."""
    require_service("rabbitmq")
    url = f"{RABBITMQ}?queue={unique_name}&queue_type=classic"
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    rows = [("a", b"a"), ("big", b"x" * (128 * 1024 * 1024 + 1)), ("b", b"b"), ("big", b"after")]
    with Inbox(db, consumer="hub") as inbox:
        inbox.create_schema()
        inbox.transaction(lambda tx: [tx.publish(url, payload, key=key) for key, payload in rows])
    try:
        async with AsyncInbox(db, consumer="hub") as inbox:
            relay = relay_for(inbox)
            totals = await relay.run(once=True)
            assert (totals["sent"], totals["parked"]) == (3, 1)
            assert (await relay_for(inbox).run(once=True))["sent"] == 0  # the parked row is never tried again
            stats = await inbox.outbox_stats()
            assert (stats.backlog, stats.parked, stats.sent) == (0, 1, 3)
            found = await inbox.read(lambda tx: tx.unit.fetch("outbox_rows", {"key": "big"}))
        (parked, after) = found
        assert parked[5] is not None
        assert "larger than configured max size" in parked[6]
        assert after[4] is not None
        assert after[5] is None
        got = await drain(url, 3)
        # "a", confirmed before the broker closed the channel, is sent again when the group is retried row by row
        assert sorted({(d.message_id, d.payload) for d in got}) == [("a", b"a"), ("b", b"b"), ("big", b"after")]
    finally:
        await drop(unique_name)


async def test_publishers_stay_open_across_passes(tmp_path: Path, unique_name: str) -> None:
    """Ten passes to one RabbitMQ queue open one connection, not ten; the relay closes it when it stops."""
    require_service("rabbitmq")
    url = f"{RABBITMQ}?queue={unique_name}"
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    fill(db, url, [f"ack/{n}" for n in range(50)])
    try:
        async with AsyncInbox(db, consumer="hub") as inbox:
            relay = relay_for(inbox, limit=5)
            assert (await relay.run(once=True))["sent"] == 50
        assert relay.publishers.opened == 1
        assert relay.publishers._open == {}
        assert len(await drain(url, 50)) == 50
    finally:
        await drop(unique_name)


@pytest.mark.parametrize("kind", ["nats", "redis"])
async def test_a_broker_killed_while_the_relay_sends(kind: str, tmp_path: Path, unique_name: str) -> None:
    """A private broker SIGKILLed while the relay sends 300 rows, and started again 1.5 s later: the relay keeps
    running (a failed send closes its publisher and is retried with backoff; nats-py may instead ride the outage out
    on its own reconnect), every row arrives, and a receiver's inbox processes each exactly once."""
    (tmp_path / kind).mkdir()
    server = PrivateServer(kind, tmp_path / kind)
    server.start()
    url = {
        "nats": f"nats://127.0.0.1:{server.port}?stream={unique_name}&subject={unique_name}.acks&open_timeout=1",
        "redis": f"redis://127.0.0.1:{server.port}/0?stream={unique_name}&open_timeout=1",
    }[kind]
    keys = [f"ack/{n:04d}" for n in range(300)]
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    fill(db, url, keys)
    try:
        async with AsyncInbox(db, consumer="hub") as inbox:
            relay = relay_for(inbox, limit=10)
            running = asyncio.ensure_future(relay.run())
            await until(lambda: relay.totals["sent"] >= 60, within=60, what="the relay sent 60 rows before the kill")
            server.kill()
            killed_at = relay.totals["sent"]
            await asyncio.sleep(1.5)
            assert not running.done(), "the relay stopped on a broker outage"
            await asyncio.to_thread(server.start)
            await until(
                lambda: relay.totals["sent"] >= 300, within=60, what="the relay sent all 300 rows after the restart"
            )
            assert not running.done()
            relay.stop.set()
            await running
            stats = await inbox.outbox_stats()
        assert 60 <= killed_at < 300
        assert (stats.backlog, stats.parked, stats.sent) == (0, 0, 300)
        if kind == "redis":  # redis-py fails the pipeline: that publisher was closed and a new one opened
            assert relay.publishers.opened >= 2
        got = await drain(url, 300)
        assert sorted({d.message_id or "" for d in got}) == keys
        assert received_once(got, tmp_path) == 300
    finally:
        server.kill()


async def test_publishers_close_when_idle_and_after_a_failure(tmp_path: Path) -> None:
    """A publisher unused for `keep_open` seconds is closed by `close_idle`; a send that fails closes its
    publisher, and the next send opens a new one."""
    url = f"dir://{tmp_path / 'out'}"
    publishers = Publishers(keep_open=0.0)
    await publishers.send(url, [Outgoing("a", b"1")])
    assert list(publishers._open) == [url]
    await publishers.close_idle()
    assert publishers._open == {}
    with pytest.raises(ConfigurationError, match="carries no headers"):
        await publishers.send(url, [Outgoing("b", b"2", {"kind": "997"})])
    assert publishers._open == {}
    await publishers.send(url, [Outgoing("c", b"3")])
    assert publishers.opened == 3
    await publishers.aclose()
    assert publishers._open == {}


async def test_the_relay_waits_out_an_exception_no_source_mapped(tmp_path: Path) -> None:
    """A send failing with a driver's own exception (not one of edinbox's) is taken as transient: the relay backs
    off and sends the row on the next try instead of stopping."""
    url = f"dir://{tmp_path / 'out'}"
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    fill(db, url, ["ack/1"])
    async with AsyncInbox(db, consumer="hub") as inbox:
        relay = relay_for(inbox)
        real, calls = relay.publishers.send, []

        async def flaky(destination: str, messages: Sequence[Outgoing]) -> None:
            calls.append(destination)
            if len(calls) == 1:
                raise OSError("network is unreachable")
            await real(destination, messages)

        relay.publishers.send = flaky  # type: ignore[method-assign]
        totals = await relay.run(once=True)
    assert (totals["sent"], len(calls)) == (1, 2)
    assert [d.message_id for d in await drain(url, 1, within=5)] == ["ack/1"]
