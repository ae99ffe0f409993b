"""The source contract and Kafka specifics, on librdkafka's mock cluster hosted by the test process.

The mock brokers listen on loopback ports, so consumers in other processes (a SIGKILLed child) reach them over TCP
exactly as they would reach a real cluster.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest

from edinbox import ConfigurationError, SourceError
from edinbox.sources import open_publisher, open_source
from edinbox.sources.kafka import KafkaSource, MockCluster, publish
from edinbox.testing.contract import collect

from .contract import BrokerContract

FAST = {"group.protocol": "consumer"}
"""KIP-848 groups: the mock assigns partitions at once (a dead member is evicted only after 30 s, though)."""
CLASSIC = {"session.timeout.ms": "3000", "heartbeat.interval.ms": "300"}
"""Classic groups: joining takes 3 s on the mock, and a killed member is evicted after 3 s."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockCluster]:
    """One mock cluster for the module; every test uses its own topic and group."""
    mock = MockCluster(brokers=1)
    yield mock
    mock.close()


def read_topic(bootstrap: str, topic: str) -> list[Any]:
    """Every record of a topic, read from the start of each partition up to its end."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "log_level": 3})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {p: consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10) for p in meta.partitions}
        wanted = sum(high - low for low, high in ends.values())
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in meta.partitions])
        records: list[Any] = []
        while len(records) < wanted:
            records += [r for r in consumer.consume(wanted, 5.0) if r.error() is None]
        return records
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: range = range(4)) -> dict[int, int]:
    """The group's committed offset per partition (-1001 where none)."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    try:
        found = consumer.committed([ck.TopicPartition(topic, p) for p in partitions], timeout=10)
        return {p.partition: p.offset for p in found}
    finally:
        consumer.close()


def produce_to_partition(bootstrap: str, topic: str, ids: list[str], partition: int = 0) -> None:
    """Produce records with producer ids to one partition, so their order is known."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for message_id in ids:
        producer.produce(topic, value=message_id.encode(), headers=[("message_id", message_id)], partition=partition)
    assert producer.flush(10) == 0


class TestKafka(BrokerContract):
    """Kafka: offsets committed after settling, seek back for nack, a dead-letter topic, redelivery after kills."""

    counts_deliveries = False  # classic consumer groups keep no delivery count
    redelivery_wait = 30.0
    quiet = 2.0

    @pytest.fixture
    def url(self, cluster: MockCluster, unique_name: str) -> str:
        """A fresh topic and group on the mock cluster (topics are created on first use)."""
        return cluster.url(topic=unique_name, group=unique_name, **FAST)

    async def dead_letters(self, url: str) -> list[tuple[str | None, bytes]]:
        """The records produced to the dead-letter topic."""
        source = KafkaSource.from_url(url, consumer="x")
        records = await asyncio.to_thread(read_topic, source.bootstrap, source.dead_letter)
        return [(dict(r.headers())["message_id"].decode(), r.value()) for r in records]

    async def test_killed_consumer_redelivers(self, url: str) -> None:
        """A consumer SIGKILLed holding a record (never committed) leaves it to the next member, flagged redelivered."""
        classic = url.replace("group.protocol=consumer", "&".join(f"{k}={v}" for k, v in CLASSIC.items()))
        await super().test_killed_consumer_redelivers(classic)


async def test_commit_follows_settling_and_never_passes_an_unacked_record(
    cluster: MockCluster, unique_name: str
) -> None:
    """The committed offset moves only when every earlier record of the partition is settled, whatever the ack order."""
    await asyncio.to_thread(produce_to_partition, cluster.bootstrap, unique_name, ["a", "b", "c"])
    url = cluster.url(topic=unique_name, group=unique_name, **FAST)
    async with open_source(url, consumer="hub") as source:
        a, b, c = await collect(source, 3, within=10)
        assert [d.key for d in (a, b, c)] == ["a", "b", "c"]
        assert [d.coordinates for d in (a, b, c)] == [f"{unique_name}/0/{n}" for n in range(3)]

        async def point() -> int:
            return (await asyncio.to_thread(committed, cluster.bootstrap, unique_name, unique_name))[0]

        assert await point() == 0
        await source.ack(b)
        assert await point() == 0  # "a" is still in flight
        await source.ack(a)
        assert await point() == 2  # up to "b", not past "c"
        await source.ack(c)
        assert await point() == 3


async def test_commit_on_receive_waits_for_the_next_receive_or_close(cluster: MockCluster, unique_name: str) -> None:
    """With commit=receive an ack only marks the record: the next receive commits it, and close commits the rest."""
    await asyncio.to_thread(produce_to_partition, cluster.bootstrap, unique_name, ["a", "b", "c"])
    url = cluster.url(topic=unique_name, group=unique_name, commit="receive", **FAST)

    async def point() -> int:
        return (await asyncio.to_thread(committed, cluster.bootstrap, unique_name, unique_name))[0]

    async with open_source(url, consumer="hub") as source:
        a, b, c = await collect(source, 3, within=10)
        await source.ack(a)
        await source.ack(b)
        assert await point() == 0
        assert await source.receive(max_messages=1, timeout=0.1) == []
        assert await point() == 2
        await source.ack(c)
        assert await point() == 2
    assert await point() == 3


async def test_out_of_order_ack_then_close_redelivers_from_the_first_unacked(
    cluster: MockCluster, unique_name: str
) -> None:
    """A member closing with a gap in its acks commits up to the gap: the next member gets the rest, flagged."""
    await asyncio.to_thread(produce_to_partition, cluster.bootstrap, unique_name, ["r0", "r1", "r2", "r3"])
    url = cluster.url(topic=unique_name, group=unique_name, **FAST)
    async with open_source(url, consumer="hub") as first:
        got = await collect(first, 4, within=10)
        await first.ack(got[0])
        await first.ack(got[2])  # settled, but r1 before it is not
    async with open_source(url, consumer="hub") as second:
        again = await collect(second, 3, within=10)
        assert [d.key for d in again] == ["r1", "r2", "r3"]
        assert [d.redelivered for d in again] == [True, True, True]
        for delivery in again:
            await second.ack(delivery)
    assert (await asyncio.to_thread(committed, cluster.bootstrap, unique_name, unique_name))[0] == 4


async def test_acks_nacks_and_rejects_after_close_fail_as_a_closed_source_and_park_nothing(
    cluster: MockCluster, unique_name: str
) -> None:
    """An ack, a nack and a reject of records received before `aclose`, called after it: each raises a SourceError
    saying the source is closed (no AttributeError of a consumer already gone), the reject creates no producer and
    produces no dead letter, and nothing is committed past the records, which the next member reads again."""
    await asyncio.to_thread(produce_to_partition, cluster.bootstrap, unique_name, ["a", "b", "c"])
    url = cluster.url(topic=unique_name, group=unique_name, **FAST)
    source = open_source(url, consumer="hub")
    assert isinstance(source, KafkaSource)
    await source.open()
    try:
        a, b, c = await collect(source, 3, within=10)
    finally:
        await source.aclose()
    with pytest.raises(SourceError, match=r"ack of 'a' .* the source is closed") as ack:
        await source.ack(a)
    with pytest.raises(SourceError, match=r"nack of 'b' .* the source is closed"):
        await source.nack(b)
    with pytest.raises(SourceError, match=r"parking 'c' .* the source is closed"):
        await source.reject(c, reason="not EDI")
    assert "AttributeError" not in str(ack.value)
    assert source._producer is None
    assert await asyncio.to_thread(read_topic, cluster.bootstrap, source.dead_letter) == []
    assert (await asyncio.to_thread(committed, cluster.bootstrap, unique_name, unique_name))[0] == 0


class _HeldClose:
    """A source's consumer whose `close` waits for `release` once it has set `closing` (the rest passes through):
    it holds `aclose` in librdkafka's close, so calls can be made at that moment."""

    def __init__(self, consumer: Any) -> None:
        """Wrap `consumer`."""
        self.consumer = consumer
        self.closing = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name: str) -> Any:
        """The consumer's own attribute."""
        return getattr(self.consumer, name)

    def close(self) -> None:
        """Signal `closing`, wait for `release` (a guard of 30 s), then close the consumer."""
        self.closing.set()
        self.release.wait(30)
        self.consumer.close()


async def test_acks_and_rejects_racing_aclose_fail_as_a_closed_source_and_create_no_producer(
    cluster: MockCluster, unique_name: str
) -> None:
    """An ack and a reject while `aclose` is inside librdkafka's close (held there): each raises a SourceError
    saying the source is closed at once, not a SourceError wrapping an AttributeError, and the reject creates no
    dead-letter producer (none that `aclose` would never purge) and produces no dead letter; once the close goes
    on, it ends cleanly and the records are left uncommitted for the next member."""
    await asyncio.to_thread(produce_to_partition, cluster.bootstrap, unique_name, ["a", "b"])
    url = cluster.url(topic=unique_name, group=unique_name, **FAST)
    source = open_source(url, consumer="hub")
    assert isinstance(source, KafkaSource)
    await source.open()
    held = _HeldClose(source._consumer)
    source._consumer = held
    closing = None
    try:
        a, b = await collect(source, 2, within=10)
        closing = asyncio.create_task(source.aclose())
        assert await asyncio.to_thread(held.closing.wait, 30)
        with pytest.raises(SourceError, match=r"ack of 'a' .* the source is closed") as ack:
            await asyncio.wait_for(source.ack(a), timeout=10)
        with pytest.raises(SourceError, match=r"parking 'b' .* the source is closed"):
            await asyncio.wait_for(source.reject(b, reason="not EDI"), timeout=10)
        assert "AttributeError" not in str(ack.value)
        assert source._producer is None
    finally:
        held.release.set()
        if closing is not None:
            await asyncio.wait_for(closing, timeout=30)
        else:
            await source.aclose()
    assert source._producer is None
    assert await asyncio.to_thread(read_topic, cluster.bootstrap, source.dead_letter) == []
    assert (await asyncio.to_thread(committed, cluster.bootstrap, unique_name, unique_name))[0] == 0


_ACK_ONE_THEN_DIE = """
import asyncio, os, signal, sys
from edinbox.sources import open_source

async def main():
    source = open_source(sys.argv[1], consumer="hub")
    await source.open()
    got = []
    while len(got) < 3:
        got += await source.receive(max_messages=3, timeout=20)
    await source.ack(got[0])  # committed; the other two were processed but their commit never happened
    print(" ".join(d.coordinates for d in got), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


async def test_sigkill_after_partial_commit_redelivers_the_same_offsets(cluster: MockCluster, unique_name: str) -> None:
    """A member killed after committing one of three records: the next member reads exactly the other two offsets."""
    await asyncio.to_thread(produce_to_partition, cluster.bootstrap, unique_name, ["k0", "k1", "k2"])
    url = cluster.url(topic=unique_name, group=unique_name, **CLASSIC)
    child = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _ACK_ONE_THEN_DIE, url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert child.returncode == -9, child.stderr
    seen = child.stdout.split()
    assert len(seen) == 3
    async with open_source(url, consumer="hub") as source:
        again = await collect(source, 2, within=15)
        assert [d.coordinates for d in again] == seen[1:]
        assert [d.key for d in again] == ["k1", "k2"]
        assert all(d.redelivered for d in again)
        for delivery in again:
            await source.ack(delivery)
        assert await collect(source, 1, within=1) == []


async def test_rebalance_between_two_members_loses_nothing_and_settles_each_record_once(
    cluster: MockCluster, unique_name: str
) -> None:
    """A second member joining mid-stream takes partitions over at their settled point: no record lost or repeated."""
    url = cluster.url(topic=unique_name, group=unique_name, **FAST)
    ids = [f"m-{n}" for n in range(60)]
    await publish(url, [(i, b"x") for i in ids])
    settled: list[tuple[str, str]] = []
    done, busy = asyncio.Event(), asyncio.Event()

    async def member(name: str, source: KafkaSource) -> None:
        while not done.is_set():
            for delivery in await source.receive(max_messages=2, timeout=0.2):
                await asyncio.sleep(0.2)  # the transaction
                settled.append((name, delivery.key))
                await source.ack(delivery)
            if len(settled) >= 6:
                busy.set()
            if len({key for _, key in settled}) == len(ids):
                done.set()

    first = KafkaSource.from_url(url, consumer="hub")
    second = KafkaSource.from_url(url, consumer="hub")
    await first.open()
    try:
        task_first = asyncio.create_task(member("first", first))
        await asyncio.wait_for(busy.wait(), timeout=30)
        await second.open()
        task_second = asyncio.create_task(member("second", second))
        await asyncio.wait_for(done.wait(), timeout=60)
        await asyncio.gather(task_first, task_second)
    finally:
        await first.aclose()
        await second.aclose()
    assert sorted(key for _, key in settled) == sorted(ids)  # each once: nothing lost, nothing redone
    assert {name for name, _ in settled} == {"first", "second"}  # the partitions really moved
    ends = await asyncio.to_thread(committed, cluster.bootstrap, unique_name, unique_name)
    highs = [r.offset() for r in await asyncio.to_thread(read_topic, cluster.bootstrap, unique_name)]
    assert sum(ends.values()) == len(highs) == len(ids)


async def test_mock_option_hosts_a_cluster_for_one_process(unique_name: str) -> None:
    """`mock=1` runs an in-process mock cluster that publish reaches through the source's bootstrap."""
    # the topic appears after the subscription: a classic group (the mock's KIP-848 groups may never assign a topic
    # created later) and a short metadata refresh let the consumer see it
    url = f"kafka://?topic={unique_name}&mock=1&topic.metadata.refresh.interval.ms=300"
    async with open_source(url, consumer="hub") as source:
        assert isinstance(source, KafkaSource)
        await publish(f"kafka://{source.bootstrap}?topic={unique_name}", [("only", b"x")])
        [delivery] = await collect(source, 1, within=10)
        assert (delivery.key, delivery.payload, delivery.source) == ("only", b"x", f"kafka:{unique_name}")
        await source.ack(delivery)


def test_settings_edinbox_owns_cannot_be_overridden() -> None:
    """Turning auto commit back on through the URL is refused: it would commit records before they settle."""
    with pytest.raises(ConfigurationError, match=r"enable\.auto\.commit"):
        open_source("kafka://127.0.0.1:9092?topic=t&enable.auto.commit=true", consumer="hub")


def test_bad_urls_are_clear_errors_with_the_password_masked() -> None:
    """A missing topic or broker is a ConfigurationError that never shows the SASL password."""
    with pytest.raises(ConfigurationError, match="topic") as missing:
        open_source("kafka://user:s3cret@127.0.0.1:9092?group=g", consumer="hub")
    assert "s3cret" not in str(missing.value)
    with pytest.raises(ConfigurationError, match="host:port"):
        open_source("kafka://?topic=t", consumer="hub")
    source = open_source("kafka://user:s3cret@b1:9092,b2:9092?topic=t&security.protocol=SASL_SSL", consumer="hub")
    assert isinstance(source, KafkaSource)
    assert "s3cret" not in source.url
    assert (source.bootstrap, source.group, source.dead_letter) == ("b1:9092,b2:9092", "hub", "t.dead")


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("topic=t&commit_wiat=1", r"unknown option\(s\) commit_wiat \(did you mean commit_wait=\?\)"),
        ("topic=t&keyheader=id", r"unknown option\(s\) keyheader \(did you mean key_header=\?\)"),
        ("topic=t&colour=red", r"unknown option\(s\) colour \(known: "),
        ("topic=t&commit=never", r"option commit='never' is invalid"),
    ],
)
def test_a_destination_url_with_an_unknown_or_invalid_option_is_refused(query: str, error: str) -> None:
    """The publisher refuses an option it does not know (a misspelt commit_wait would silently keep the default)
    with a one-line ConfigurationError naming it and the closest known option, the password masked."""
    with pytest.raises(ConfigurationError, match=error) as refused:
        open_publisher(f"kafka://user:s3cret@127.0.0.1:9092?{query}")
    assert "s3cret" not in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_source_url_is_a_valid_destination_url() -> None:
    """The source's own options (group, dead_letter, commit) are accepted by the publisher, as the other brokers'
    publishers accept their source URLs: a source's URL can be published to."""
    url = "kafka://127.0.0.1:9092?topic=t&group=g&dead_letter=t.parked&commit=receive&commit_wait=2&key_header=id"
    publisher = open_publisher(url)
    assert publisher.url == url


async def test_a_setting_librdkafka_refuses_fails_the_publisher_open_as_a_configuration_error(unique_name: str) -> None:
    """A librdkafka setting of a destination URL that librdkafka refuses (a misspelt dotted name) fails `open` as a
    ConfigurationError naming it, never a transient SourceError the relay would retry for ever."""
    publisher = open_publisher(f"kafka://127.0.0.1:9092?topic={unique_name}&linger.mss=5")
    try:
        with pytest.raises(ConfigurationError, match=r"linger\.mss"):
            await publisher.open()
    finally:
        await publisher.aclose()


async def test_settings_librdkafka_refuses_are_a_configuration_error_and_failures_a_source_error(
    unique_name: str,
) -> None:
    """A setting librdkafka rejects fails `open` as a ConfigurationError; once closed, every call is a SourceError
    (never a driver exception), and closing twice is quiet. Nothing expires while a record is held."""
    bad = open_source(f"kafka://127.0.0.1:9092?topic={unique_name}&session.timeout.ms=nope", consumer="hub")
    with pytest.raises(ConfigurationError, match=r"session\.timeout\.ms"):
        await bad.open()
    url = f"kafka://?topic={unique_name}&mock=1&topic.metadata.refresh.interval.ms=300"
    source = open_source(url, consumer="hub")
    assert source.ack_wait is None
    await source.open()
    await source.aclose()
    await source.aclose()
    with pytest.raises(SourceError):
        await source.receive(max_messages=1, timeout=0.1)
