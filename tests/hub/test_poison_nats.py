"""A slow batch through NATS JetStream (the real server on 127.0.0.1:4222): progress keeps its deliveries."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import nats
import pytest

from edinbox.hub import HubConfig, open_hub
from edinbox.sources import Source
from edinbox.sources.nats import NatsSource, publish
from hub_ops import stats
from services import require_service

from .poison import SlowAccounting, good

SERVER = "nats://127.0.0.1:4222"


@pytest.fixture
async def url() -> AsyncIterator[str]:
    """A fresh stream whose consumer redelivers what is unacked after 2 s; deleted afterwards."""
    require_service("nats")
    name = "slow" + uuid.uuid4().hex[:12]
    yield f"{SERVER}?stream={name}&subject={name}.in&ack_wait=2"
    connection = await nats.connect(SERVER)
    try:
        await connection.jetstream().delete_stream(name)
    finally:
        await connection.close()


async def held(source: Source, *, count: int, within: float = 60) -> None:
    """Wait until the source's JetStream consumer has handed out `count` deliveries that are not acked yet."""
    assert isinstance(source, NatsSource)
    connection = await nats.connect(SERVER)
    try:
        deadline = asyncio.get_running_loop().time() + within
        while (await connection.jetstream().consumer_info(source.stream, source.durable)).num_ack_pending < count:
            assert asyncio.get_running_loop().time() < deadline, "the slow hub never received the batch"
            await asyncio.sleep(0.05)
    finally:
        await connection.close()


async def test_a_batch_slower_than_ack_wait_is_not_handed_to_another_hub(hub_config: HubConfig, url: str) -> None:
    """A batch that takes 1.5 times the 2 s ack wait: its hub's in_progress beats keep the deliveries its own, so a
    second hub on the same consumer gets nothing (no duplicate is counted) and each invoice is created once."""
    # the second hub stays up past the slow batch and an ack wait: a delivery the beats failed to keep comes to it
    config = hub_config.with_overrides(source=url, batch_size=2, idle_timeout=5.0)
    await publish(url, [("n1", good(900)), ("n2", good(901))])
    async with open_hub(config) as slow, open_hub(config) as other:
        slow.accounting = SlowAccounting(slow.accounting, seconds=1.5)
        first = asyncio.create_task(slow.run(once=True))
        await held(slow.source, count=2)  # the slow hub holds both deliveries now
        second = dict(await other.run(once=True))
        totals = dict(await first)
    assert totals == {"processed": 2}
    assert second == {}
    counts = await stats(config)
    assert (counts["invoices"], counts["duplicate"]) == (2, 0)
