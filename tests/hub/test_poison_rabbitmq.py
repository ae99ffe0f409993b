"""Poison never spreads through RabbitMQ either: the real server on 127.0.0.1:5672, a fresh queue per test."""

from __future__ import annotations

import aio_pika

from edinbox.hub import HubConfig, open_hub
from edinbox.hub.deliveries._items import HEAD
from edinbox.sources.rabbitmq import publish
from hub_ops import list_rows, stats
from sources.test_rabbitmq import BROKER

from .poison import BAD
from .test_poison import MAX_PAYLOAD, stored_payload, traffic


async def _count(queue: str) -> int:
    """Messages waiting in a queue (without consuming them)."""
    connection = await aio_pika.connect(BROKER)
    async with connection:
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, passive=True)
        return declared.declaration_result.message_count or 0


async def test_every_bad_input_is_parked_alone_through_rabbitmq(hub_config: HubConfig, queue: str) -> None:
    """Through RabbitMQ: good invoices created once in one run, each bad delivery dead-lettered with its reason kept
    in the rejected table, the queue drained, and the counts adding up to the items delivered."""
    url = f"{BROKER}?queue={queue}&queue_type=quorum"
    config = hub_config.with_overrides(source=url, batch_size=8, max_payload=MAX_PAYLOAD, idle_timeout=1.0)
    payloads, invoices = traffic()
    await publish(url, payloads)
    async with open_hub(config) as hub:
        totals = dict(await hub.run(once=True))
    counts = await stats(config)
    assert (counts["invoices"], counts["processed"], counts["dead"]) == (invoices, invoices, 0)
    parked = await list_rows(config, status="rejected", limit=50)
    # the bad inputs, the oversized one, half of the pair
    assert len(parked) == counts["rejected_payloads"] == len(BAD) + 2
    assert counts["received"] == sum(totals.values()) == invoices + len(BAD) + 2
    [oversized] = [row for row in parked if "max_payload" in row["reason"]]
    assert f"{queue}.dead" in oversized["reason"]  # where the whole payload is
    whole = dict(payloads)["oversized"]
    assert await stored_payload(config, oversized["key"]) == whole[:HEAD]  # the dead letter has the rest
    assert await _count(queue) == 0
    assert await _count(f"{queue}.dead") == len(BAD) + 1  # every wholly bad delivery; the pair was acked
