"""Rejects on Kafka while the dead-letter topic cannot be written (librdkafka's mock cluster, its brokers set down
and up): a reject waits `commit_wait` at most, fails as a SourceError and leaves its record unsettled, receives
failing until the dead letter is produced; after the outage the record is produced to the dead-letter topic once
and parked once with its reason, and SIGTERM during the outage stops the hub at once. A record too large for the
dead-letter topic is parked at once with a stand-in without its payload, never read and rejected again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from edinbox import SourceError
from edinbox.hub.config._model import HubConfig
from edinbox.sources import Delivery
from edinbox.sources.kafka import KafkaSource, publish
from hub.poison import bad_date, not_edi
from hub.test_outage import HubProcess, invoices, wait_for
from hub_ops import init
from sources.test_kafka import committed, read_topic

from .kafka_hub import created_once, one_outage, rows, terminated
from .kafka_mock import ControlledCluster

KAFKA = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "commit_wait": "1"}


@pytest.fixture
def cluster() -> Iterator[ControlledCluster]:
    """A mock cluster of two brokers for this test alone."""
    with ControlledCluster(brokers=2) as mock:
        yield mock


def topics(cluster: ControlledCluster, name: str) -> str:
    """The URL of topic `name` and group `name`, both on broker 1, its dead-letter topic on broker 2."""
    cluster.topic(name, leader=1)
    cluster.topic(f"{name}.dead", leader=2)
    cluster.coordinator(name, broker=1)
    return cluster.url(topic=name, group=name, **KAFKA)


def outcomes(hub: HubProcess, outcome: str) -> list[str]:
    """The hub's `settled` lines of one outcome (a reject that failed logs its line too, once per delivery)."""
    return [line for line in hub.events("settled") if f"outcome={outcome}" in line]


def dead_letters(cluster: ControlledCluster, topic: str) -> list[tuple[str, str]]:
    """The producer id and reason of each record of the dead-letter topic."""
    records = read_topic(cluster.bootstrap, f"{topic}.dead")
    return [(dict(r.headers())["message_id"].decode(), dict(r.headers())["edinbox-reason"].decode()) for r in records]


async def receive_one(source: KafkaSource) -> Delivery:
    """The next delivery (a guard of 30 s, not a measurement)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if found := await source.receive(max_messages=1, timeout=0.5):
            return found[0]
    pytest.fail("no delivery")


async def receives(source: KafkaSource) -> list[Delivery]:
    """What receives return until one returns nothing without raising: those that raise while the brokers come
    back are retried (a guard of 30 s, not a measurement)."""
    got: list[Delivery] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            found = await source.receive(max_messages=10, timeout=0.5)
        except SourceError:
            await asyncio.sleep(0.2)
            continue
        if not found:
            return got
        got += found
    pytest.fail("the receives did not settle down")


async def test_a_reject_while_the_brokers_are_down_fails_within_commit_wait_and_settles_its_record_after(
    cluster: ControlledCluster, unique_name: str
) -> None:
    """Every broker set down while a record is held: its reject raises SourceError within commit_wait (1 s) plus
    a second, not after librdkafka's 30 s flush, and receives raise it while the dead letter waits; once the
    brokers are back a receive settles the record (the offset committed past it) without reading it again, and the
    dead-letter topic holds it once, with its reason."""
    url = topics(cluster, unique_name)
    await publish(url, [("poison", b"not EDI")])
    source = KafkaSource.from_url(url, consumer="hub")
    await source.open()
    try:
        delivery = await receive_one(source)
        cluster.down()
        started = time.monotonic()
        with pytest.raises(SourceError, match=r"\.dead"):
            await asyncio.wait_for(source.reject(delivery, reason="not EDI"), timeout=10)
        assert time.monotonic() - started < 2
        with pytest.raises(SourceError, match="dead letter"):
            await source.receive(max_messages=1, timeout=0.5)
        cluster.up()
        assert await receives(source) == []
    finally:
        await source.aclose()
    assert dead_letters(cluster, unique_name) == [("poison", "not EDI")]
    assert committed(cluster.bootstrap, unique_name, unique_name, range(1)) == {0: 1}


@pytest.mark.parametrize("refusals", [1, 2])
async def test_a_dead_letter_the_topic_refuses_as_too_large_settles_its_record_without_its_payload(
    cluster: ControlledCluster, unique_name: str, refusals: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker answers the dead letter's produce with MSG_SIZE_TOO_LARGE (the topic's limit): the reject returns
    (no SourceError, no seek back) and the record is settled, its dead letter a stand-in without the payload, in one
    warning line; refused again, the stand-in too, the record is settled without a dead letter, in one error line
    saying where it is. Either way it is never read again, and the reject returns where the payload is: the topic
    read, at the record's offset."""
    url = topics(cluster, unique_name)
    await publish(url, [("poison", b"not EDI")])
    source = KafkaSource.from_url(url, consumer="hub")
    await source.open()
    try:
        delivery = await receive_one(source)
        cluster.refuse_produce(refusals)
        kept = await asyncio.wait_for(source.reject(delivery, reason="not EDI"), timeout=10)
        assert await receives(source) == []
    finally:
        await source.aclose()
    assert committed(cluster.bootstrap, unique_name, unique_name, range(1)) == {0: 1}
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.getMessage().startswith("dead-letter-")]
    letters = read_topic(cluster.bootstrap, f"{unique_name}.dead")
    assert kept is not None
    assert kept.startswith(f"the topic {unique_name} of {source.url} at {unique_name}/0/0 while its retention keeps it")
    if refusals == 1:
        assert f"its dead letter in {unique_name}.dead is a stand-in without it" in kept
        [letter] = letters
        headers = {name: value.decode() for name, value in letter.headers()}
        assert (letter.value() or b"", headers["edinbox-reason"], headers["edinbox-size"]) == (b"", "not EDI", "7")
        assert [level for level, _ in lines] == ["WARNING"]
    else:
        assert "it has no dead letter" in kept
        assert letters == []
        assert [level for level, _ in lines] == ["WARNING", "ERROR"]
        assert lines[1][1].startswith("dead-letter-lost ")
        assert f"kept_in={unique_name}" in lines[1][1]


def test_the_hub_waits_out_its_dead_letter_topic_and_parks_each_poison_record_once(
    cluster: ControlledCluster, unique_name: str, tmp_path: Path
) -> None:
    """The dead-letter topic's broker set down for 4 s while the hub works through 60 invoices and 2 poison records
    one at a time: the first reject fails (SourceError within commit_wait) and receives fail until the broker is
    back, so the hub logs one outage of its source and backs off; after the outage each invoice is created once
    with one attempt, and each poison record is parked once (one delivery) with its reason and produced to the
    dead-letter topic once."""
    db = tmp_path / "hub.db"
    url = topics(cluster, unique_name)
    asyncio.run(init(HubConfig(db=f"sqlite:///{db}")))
    traffic = invoices(60)
    traffic[12:12] = [("poison-date", bad_date())]
    traffic[40:40] = [("poison-png", not_edi())]
    asyncio.run(publish(url, traffic))
    cluster.down(2)
    hub = HubProcess("--db", f"sqlite:///{db}", "--source", url, "--consumer", "hub", "--batch-size", "1")
    try:
        wait_for(lambda: bool(hub.events("dependency-down")), timeout=60, what="the dependency-down line")
        time.sleep(4)  # the hub backs off: its receives fail while the dead letter waits
        assert not hub.events("dependency-back")
        assert len(outcomes(hub, "processed")) == 12, "\n".join(hub.lines)  # the invoices before the poison record
        cluster.up(2)
        wait_for(lambda: len(outcomes(hub, "processed")) >= 60, timeout=90, what="every invoice settled")
        last = f"delivery={unique_name}/0/40"  # the second poison record
        wait_for(lambda: any(last in line for line in outcomes(hub, "rejected")), timeout=30, what="its parking")
        assert hub.stop() == 0
    finally:
        if hub.proc.poll() is None:
            hub.proc.kill()
    one_outage(hub)
    assert len(outcomes(hub, "rejected")) == 2, "\n".join(hub.lines)  # neither poison record was read again
    assert rows(db, "SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices") == [(60, 60)]
    journal = rows(db, "SELECT status, attempts, count(*) FROM inbox GROUP BY status, attempts ORDER BY status")
    assert journal == [("processed", 1, 60)]
    parked = rows(db, "SELECT delivery, deliveries, reason FROM edinbox_hub_rejected ORDER BY id")
    assert [row[:2] for row in parked] == [(f"{unique_name}/0/12", 1), (f"{unique_name}/0/40", 1)]
    assert dead_letters(cluster, unique_name) == [("poison-date", parked[0][2]), ("poison-png", parked[1][2])]


def test_a_poison_record_too_large_for_the_dead_letter_topic_is_parked_once_without_its_payload(
    cluster: ControlledCluster, unique_name: str, tmp_path: Path
) -> None:
    """A 2 MB record that is not EDI among 30 invoices, published by a producer that allows it, while the hub's dead
    letters keep librdkafka's 1 MB `message.max.bytes`: the record is parked once (one delivery, no outage logged,
    not read and rejected again for ever) and its dead letter is a stand-in with its reason, its size and where it
    is, an empty value, with one warning line; the rejected table's reason says the whole payload is in the topic
    read at the record's offset (not in the dead letters); each invoice is created once with one attempt, and the
    group's offset is committed past every record."""
    db = tmp_path / "hub.db"
    url = topics(cluster, unique_name)
    asyncio.run(init(HubConfig(db=f"sqlite:///{db}")))
    huge = not_edi() + bytes(2_000_000)
    traffic = invoices(30)
    traffic[10:10] = [("poison-huge", huge)]
    asyncio.run(publish(f"{url}&message.max.bytes=5000000", traffic))
    hub = HubProcess("--db", f"sqlite:///{db}", "--source", url, "--consumer", "hub", "--batch-size", "1")
    try:
        wait_for(lambda: len(outcomes(hub, "processed")) >= 30, timeout=60, what="every invoice settled")
        wait_for(lambda: bool(outcomes(hub, "rejected")), timeout=30, what="the poison record's parking")
        assert hub.stop() == 0
    finally:
        if hub.proc.poll() is None:
            hub.proc.kill()
    assert not hub.events("dependency-down"), "\n".join(hub.lines)
    assert len(outcomes(hub, "rejected")) == 1, "\n".join(hub.lines)
    assert rows(db, "SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices") == [(30, 30)]
    assert rows(db, "SELECT status, attempts, count(*) FROM inbox GROUP BY status, attempts") == [("processed", 1, 30)]
    [(delivery, deliveries, reason)] = rows(db, "SELECT delivery, deliveries, reason FROM edinbox_hub_rejected")
    assert (delivery, deliveries) == (f"{unique_name}/0/10", 1)
    said, _, kept = str(reason).partition(", the whole payload is in ")
    assert said.endswith(f"the first 65536 of its {len(huge)} bytes are kept here")
    assert kept.startswith(f"the topic {unique_name} of ")
    assert f" at {unique_name}/0/10 while its retention keeps it (its dead letter in {unique_name}.dead is a " in kept
    [settled] = outcomes(hub, "rejected")
    assert "while its retention keeps it" in settled
    [letter] = read_topic(cluster.bootstrap, f"{unique_name}.dead")
    headers = {name: value.decode() for name, value in letter.headers()}
    assert (letter.value() or b"") == b""
    assert headers["message_id"] == "poison-huge"
    assert headers["edinbox-reason"].startswith(f"{said}, ")  # the reason the hub gave before the stand-in
    assert headers["edinbox-from"] == f"{unique_name}/0/10"
    assert headers["edinbox-size"] == str(len(huge))
    assert f"the whole record is at {unique_name}/0/10" in headers["edinbox-payload"]
    warned = [line for line in hub.lines if "not the payload" in line]
    assert [" level=warning " in line for line in warned] == [True], "\n".join(hub.lines)
    assert committed(cluster.bootstrap, unique_name, unique_name, range(1)) == {0: 31}


def test_sigterm_while_a_reject_waits_for_the_dead_letter_topic_exits_0_at_once(
    cluster: ControlledCluster, unique_name: str, tmp_path: Path
) -> None:
    """SIGTERM to a hub whose reject waits for the dead-letter topic's broker (set down): the hub exits 0 within a
    few seconds, not after librdkafka's flushes, and every invoice it settled was created once."""
    db = tmp_path / "hub.db"
    url = topics(cluster, unique_name)
    asyncio.run(init(HubConfig(db=f"sqlite:///{db}")))
    traffic = invoices(30)
    traffic[5:5] = [("poison", not_edi())]
    asyncio.run(publish(url, traffic))
    cluster.down(2)
    hub = HubProcess("--db", f"sqlite:///{db}", "--source", url, "--consumer", "hub", "--batch-size", "1")
    try:
        wait_for(lambda: len(outcomes(hub, "processed")) >= 5, timeout=60, what="the invoices before the poison record")
        time.sleep(0.3)  # its reject waits for the dead-letter topic
        terminated(hub)
    finally:
        if hub.proc.poll() is None:
            hub.proc.kill()
        cluster.up(2)
    created_once(db)
