"""The hub over Kafka while its brokers go away mid-run (librdkafka's mock cluster, its brokers set down and up):
the hub stays up, the outage costs no attempt, nothing is lost or doubled, and poison mixed into the traffic is
parked once with its reason; the outage shows as one dependency-down and one dependency-back line, and SIGTERM
during it stops the hub at once. A publisher's send cancelled during an outage does not hold the process either."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

from edinbox.hub.config._model import HubConfig
from edinbox.sources import Outgoing
from edinbox.sources.kafka import KafkaPublisher, publish
from hub.poison import bad_date, not_edi
from hub.test_outage import HubProcess, invoices, wait_for
from hub_ops import init

from .kafka_hub import created_once, one_outage, rows, terminated
from .kafka_mock import ControlledCluster

KAFKA = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "commit_wait": "1"}


@pytest.fixture
def cluster() -> Iterator[ControlledCluster]:
    """A mock cluster of one broker for this test alone."""
    with ControlledCluster() as mock:
        yield mock


def hub_on(
    cluster: ControlledCluster,
    name: str,
    tmp_path: Path,
    traffic: list[tuple[str, bytes]],
    *,
    batch_size: int,
    **options: str,
) -> tuple[Path, HubProcess]:
    """A hub process on a new SQLite journal, consuming topic and group `name` (KAFKA's options and `options`) once
    `traffic` is published there; its journal's path and the process."""
    db = tmp_path / "hub.db"
    url = cluster.url(topic=name, group=name, **{**KAFKA, **options})
    asyncio.run(init(HubConfig(db=f"sqlite:///{db}")))
    asyncio.run(publish(url, traffic))
    hub = HubProcess("--db", f"sqlite:///{db}", "--source", url, "--consumer", "hub", "--batch-size", str(batch_size))
    return db, hub


def test_the_hub_waits_out_its_kafka_brokers_going_down_mid_run(
    cluster: ControlledCluster, unique_name: str, tmp_path: Path
) -> None:
    """The broker set down for 4 s while the hub works through 200 invoices and 2 poison records one at a time:
    the hub stays up and logs the outage of its source once when it starts and once when it ends, each invoice is
    created once, every journal row took one attempt, and each poison record is parked once with its reason and
    produced to the dead-letter topic."""
    traffic = invoices(200)
    traffic[12:12] = [("poison-date", bad_date())]
    traffic[150:150] = [("poison-png", not_edi())]
    # a dead letter right after the brokers' return waits for librdkafka's re-bootstrap (about 1 s on the mock)
    db, hub = hub_on(cluster, unique_name, tmp_path, traffic, batch_size=1, commit_wait="2")
    try:
        wait_for(lambda: len(hub.events("settled")) >= 8, timeout=60, what="the first settled batches")
        cluster.down()
        wait_for(lambda: bool(hub.events("dependency-down")), timeout=10, what="the dependency-down line")
        time.sleep(3)  # an ack's offset commit found no coordinator within commit_wait; the hub backs off
        assert not hub.events("dependency-back")
        cluster.up()
        wait_for(lambda: len(hub.events("settled")) >= 202, timeout=90, what="every record settled")
        assert hub.proc.poll() is None
        assert hub.stop() == 0
    finally:
        if hub.proc.poll() is None:
            hub.proc.kill()
    one_outage(hub)
    driver = [line for line in hub.lines if " logger=edinbox.sources.kafka " in line]
    assert len(driver) <= 3, "\n".join(driver)  # the outage in a line or two, not twenty a second
    assert rows(db, "SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices") == [(200, 200)]
    journal = rows(db, "SELECT status, attempts, count(*) FROM inbox GROUP BY status, attempts ORDER BY status")
    assert journal == [("processed", 1, 200)]
    assert rows(db, "SELECT deliveries, count(*) FROM edinbox_hub_rejected GROUP BY deliveries") == [(1, 2)]


def test_a_batch_whose_acks_meet_the_outage_is_committed_whole_once_the_brokers_return(
    cluster: ControlledCluster, unique_name: str, tmp_path: Path
) -> None:
    """The brokers set down while the hub settles batches of 20 out of librdkafka's prefetched records: the first
    ack of a batch finds no coordinator within commit_wait, yet every record of that batch counts as settled, so once
    the brokers are back and the hub stopped, the group's committed offsets reach the end of every partition (none
    is held at a record that was settled but never handed back), and each invoice exists once."""
    db, hub = hub_on(cluster, unique_name, tmp_path, invoices(200), batch_size=20)
    try:
        wait_for(lambda: len(hub.events("settled")) >= 20, timeout=60, what="the first settled batch")
        cluster.down()
        wait_for(lambda: bool(hub.events("dependency-down")), timeout=10, what="the dependency-down line")
        cluster.up()
        wait_for(lambda: len(hub.events("settled")) >= 200, timeout=90, what="every record settled")
        wait_for(lambda: bool(hub.events("dependency-back")), timeout=30, what="the dependency-back line")
        assert hub.stop() == 0
    finally:
        if hub.proc.poll() is None:
            hub.proc.kill()
    assert rows(db, "SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices") == [(200, 200)]
    assert committed_total(cluster.bootstrap, unique_name) == 200, "\n".join(hub.lines)


def committed_total(bootstrap: str, topic: str) -> int:
    """The sum of the group's committed offsets over the topic's partitions (the group is named as the topic)."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "log_level": 3})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        found = consumer.committed([ck.TopicPartition(topic, p) for p in partitions], timeout=10)
        return sum(max(p.offset, 0) for p in found)
    finally:
        consumer.close()


def test_sigterm_while_the_kafka_brokers_are_down_exits_0_at_once(
    cluster: ControlledCluster, unique_name: str, tmp_path: Path
) -> None:
    """SIGTERM to a hub whose broker went down mid-run (its ack's offset commit waiting for the coordinator):
    the hub logs the outage, then exits 0 within a few seconds, and every invoice it settled was created once."""
    db, hub = hub_on(cluster, unique_name, tmp_path, invoices(100), batch_size=1)
    try:
        wait_for(lambda: len(hub.events("settled")) >= 8, timeout=60, what="the first settled batches")
        cluster.down()
        time.sleep(2)  # an ack's offset commit waits for the coordinator
        terminated(hub)
    finally:
        if hub.proc.poll() is None:
            hub.proc.kill()
        cluster.up()
    assert len(hub.events("dependency-down")) == 1, "\n".join(hub.lines)
    created_once(db)


async def test_a_broker_that_refuses_connections_is_logged_once_not_twenty_times_a_second(
    unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A source whose broker refuses every connection (librdkafka retries about twenty times a second, each failure
    an error line) logs the failure once, as a warning, over the two seconds its open waits for a broker to answer;
    then the open fails as an outage (SourceError), never as a source that opened on an idle topic."""
    from edinbox import SourceError
    from edinbox.sources.kafka import KafkaSource
    from servers import free_port

    caplog.set_level(logging.INFO, logger="edinbox.sources.kafka")
    source = KafkaSource(f"127.0.0.1:{free_port()}", topic=unique_name, group=unique_name, commit_wait=2.0)
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"no Kafka broker answered .* within 2 s"):
        await source.open()
    assert 2 <= time.monotonic() - started < 10
    failures = [r for r in caplog.records if "Connection refused" in r.getMessage()]
    assert len(failures) == 1, [r.getMessage() for r in failures]
    assert failures[0].levelno == logging.WARNING


def test_a_send_cancelled_while_the_kafka_brokers_are_down_does_not_hold_the_exit(
    cluster: ControlledCluster, unique_name: str
) -> None:
    """A publisher's send that waits for brokers set down, cancelled after a second (a relay stopping) and the
    publisher closed: the event loop ends within a few seconds, not after librdkafka's 30 s flush (a worker thread
    the loop's shutdown joins) and a 10 s flush at close."""
    url = cluster.url(topic=unique_name)

    async def cancelled_send() -> None:
        publisher = KafkaPublisher(url)
        await publisher.open()
        await publisher.send([Outgoing("first", b"sent while the broker is up")])
        cluster.down()
        sending = asyncio.ensure_future(publisher.send([Outgoing("second", b"waits for the broker")]))
        await asyncio.sleep(1)
        sending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sending
        await publisher.aclose()

    started = time.monotonic()
    try:
        asyncio.run(cancelled_send())
    finally:
        cluster.up()
    assert time.monotonic() - started < 5
