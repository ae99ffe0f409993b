"""The relay's Kafka publisher while the brokers are down (librdkafka's mock cluster, its broker set down and up): a
send fails as a transient SourceError once the brokers have not answered for the destination's `commit_wait`, not
after a fixed 30 s, its row stays unsent (not parked), and the relay sends it once the brokers are back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from edinbox import AsyncInbox, SourceError
from outbox.test_relay_brokers import fill, relay_for
from sources.test_kafka import read_topic

from .kafka_mock import ControlledCluster


@pytest.fixture
def cluster() -> Iterator[ControlledCluster]:
    """A mock cluster of one broker for this test alone."""
    with ControlledCluster() as mock:
        yield mock


async def test_a_send_to_brokers_that_are_down_fails_within_commit_wait_and_goes_once_they_are_back(
    cluster: ControlledCluster, unique_name: str, tmp_path: Path
) -> None:
    """One outbox row for a Kafka destination with `commit_wait=1` while its broker is down: a relay pass fails
    with SourceError (transient) within a second or two, the row unsent and not parked; once the broker is back the
    relay, backing off, sends it, and the topic holds it once under its key."""
    url = cluster.url(topic=unique_name, commit_wait="1")
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    fill(db, url, ["ack/1"])
    cluster.down()
    async with AsyncInbox(db, consumer="hub") as inbox:
        relay = relay_for(inbox)
        started = time.monotonic()
        with pytest.raises(SourceError, match="no answer from the brokers for 1 s"):
            await asyncio.wait_for(relay.step(), timeout=15)
        assert time.monotonic() - started < 3
        stats = await inbox.outbox_stats()
        assert (stats.backlog, stats.parked, stats.sent) == (1, 0, 0)
        cluster.up()
        totals = await asyncio.wait_for(relay.run(once=True), timeout=60)
        stats = await inbox.outbox_stats()
    assert totals["sent"] == 1
    assert (stats.backlog, stats.parked, stats.sent) == (0, 0, 1)
    [record] = read_topic(cluster.bootstrap, unique_name)
    assert dict(record.headers())["message_id"] == b"ack/1"
