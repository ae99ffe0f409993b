"""The proof on Kafka (librdkafka's mock cluster, hosted by the test process and reached by the hubs over TCP).

The same traffic and fault point as the other brokers' proof. Kafka keeps no delivery count, so the redelivery is
shown by Kafka's own bookkeeping instead: after the kill, the group's committed offset sits below the highest
offset the killed hub had received (recorded in the commit metadata), so those records are read again.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

from edinbox.sources.kafka import MockCluster
from hub.test_outage import wait_for
from services import POSTGRES_URL, require_service

from .test_proof import CLI, cli, hub_args, publish, stats, traffic

KAFKA = {"session.timeout.ms": "3000", "heartbeat.interval.ms": "300"}
"""Classic groups: a SIGKILLed hub's partitions go to the next member after 3 s."""
IDLE = ["--idle-timeout", "8"]
"""Joining the group and evicting a killed member take seconds on Kafka: stay up longer before calling it idle."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockCluster]:
    """The mock cluster for this module's hubs."""
    mock = MockCluster(brokers=1)
    yield mock
    mock.close()


def offsets(cluster: MockCluster, topic: str, group: str) -> list[tuple[int, int, int]]:
    """Per partition: (end offset, committed offset, highest offset delivered per the commit metadata)."""
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "log_level": 3})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        found = consumer.committed([ck.TopicPartition(topic, p) for p in parts], timeout=10)
        rows = []
        for tp in found:
            _, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, tp.partition), timeout=10)
            horizon = int((tp.metadata or "=-1").rpartition("=")[2])
            rows.append((high, max(tp.offset, 0), horizon))
        return rows
    finally:
        consumer.close()


def settled_everything(cluster: MockCluster, topic: str, group: str) -> bool:
    """Whether every partition's committed offset reached its end: nothing left for the group."""
    return all(committed == end for end, committed, _ in offsets(cluster, topic, group))


def journal_rows(schema: str) -> int:
    """How many rows the hubs' PostgreSQL journal in `schema` holds (0 before `init` made it)."""
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        query = psycopg.sql.SQL("SELECT count(*) FROM {}.inbox").format(psycopg.sql.Identifier(schema))
        try:
            row = conn.execute(query).fetchone()
        except psycopg.errors.UndefinedTable:
            return 0
    return int(row[0]) if row else 0


def check_counts(db: list[str], *, unique: int, published: int) -> None:
    """Invoices == unique interchanges; the producers' copies and at least one redelivery were suppressed."""
    counts = stats(db)
    assert counts["invoices"] == counts["processed"] == unique
    assert counts["duplicate"] >= published - unique + 1
    assert counts["conflict"] == counts["dead"] == counts["rejected"] == 0


def test_kafka_hub_killed_after_commit_then_restarted(cluster: MockCluster, unique_name: str, tmp_path: Path) -> None:
    """A hub SIGKILLed between commit and offset commit, restarted, leaves one invoice per unique interchange."""
    url = cluster.url(topic=unique_name, group=unique_name, **KAFKA)
    db = ["--db", f"sqlite:///{tmp_path / 'hub.db'}"]
    assert cli("init", *db).returncode == 0  # as an operator does before starting the hub
    files, unique = traffic(tmp_path, seed=5)
    publish(files, url)
    # batches of 20, so the traffic takes several commits and the kill at the second leaves records unsettled
    first = cli(*hub_args(url, db), *IDLE, "--batch-size", "20", fault="after_commit:2")
    assert first.returncode == -9, first.stderr
    # the killed hub had received records it never committed: Kafka will deliver them again
    assert any(committed <= horizon for _, committed, horizon in offsets(cluster, unique_name, unique_name))
    second = cli(*hub_args(url, db), *IDLE)
    assert second.returncode == 0, second.stderr
    check_counts(db, unique=unique, published=len(files))
    assert settled_everything(cluster, unique_name, unique_name)


def test_kafka_two_hubs_compete_and_one_is_killed(cluster: MockCluster, unique_name: str, tmp_path: Path) -> None:
    """Two hubs in one consumer group on PostgreSQL; one is killed after a commit; every invoice exists once."""
    require_service("postgres")
    import psycopg

    url = cluster.url(topic=unique_name, group=unique_name, **KAFKA)
    db = ["--db", POSTGRES_URL, "--table", f"{unique_name}.inbox"]
    files, unique = traffic(tmp_path, seed=7)
    publish(files, url)  # the topic exists before the group forms, so both hubs get partitions
    try:
        assert cli("init", *db, "--consumer", "hub").returncode == 0
        env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
        args = [*CLI, *hub_args(url, db), "--batch-size", "5", *IDLE]
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
        killed = subprocess.Popen(args, env={**env, "EDINBOX_FAULT": "after_commit:3"}, **pipes)  # type: ignore[call-overload]
        # the armed hub holds the partitions and has settled a first batch before the other joins, so the group's
        # assignment cannot leave it without work (it dies at its third commit, before or after the rebalance)
        wait_for(lambda: killed.poll() is not None or journal_rows(unique_name) > 0, timeout=60, what="a first batch")
        survivor = subprocess.Popen(args, env=env, **pipes)  # type: ignore[call-overload]
        _, killed_log = killed.communicate(timeout=120)
        _, survivor_log = survivor.communicate(timeout=120)
        assert killed.returncode == -9, killed_log
        assert survivor.returncode == 0, survivor_log
        if not settled_everything(cluster, unique_name, unique_name):
            sweep = cli(*hub_args(url, db), *IDLE)  # what the survivor had not taken over when it went idle
            assert sweep.returncode == 0, sweep.stderr
        check_counts(db, unique=unique, published=len(files))
        assert settled_everything(cluster, unique_name, unique_name)
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psycopg.sql.Identifier(unique_name))
            )
