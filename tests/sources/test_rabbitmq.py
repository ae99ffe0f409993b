"""The source contract and RabbitMQ specifics, against the real RabbitMQ on 127.0.0.1:5672."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aio_pika
import pytest

from edinbox import ConfigurationError
from edinbox.sources.rabbitmq import RabbitMQSource
from services import require_service

from .contract import SourceContract, collect

BROKER = "amqp://guest:guest@127.0.0.1/"


async def _drop(queue: str) -> None:
    connection = await aio_pika.connect(BROKER)
    async with connection:
        channel = await connection.channel()
        for name in (queue, f"{queue}.dead"):
            await channel.queue_delete(name)
        await channel.exchange_delete(f"{queue}.dead")


async def _get_all(queue: str) -> list[Any]:
    connection = await aio_pika.connect(BROKER)
    got = []
    async with connection:
        channel = await connection.channel()
        amqp_queue = await channel.get_queue(queue, ensure=False)
        while (message := await amqp_queue.get(fail=False)) is not None:
            got.append(message)
            await message.ack()
    return got


class RabbitContract(SourceContract):
    """RabbitMQ: requeue on close and nack, `x-delivery-count` on quorum queues, DLX for rejects."""

    queue_type = "quorum"
    redelivery_wait = 5.0
    quiet = 0.5

    @pytest.fixture
    async def url(self, unique_name: str) -> AsyncIterator[str]:
        """A fresh queue (and its dead-letter exchange and queue), deleted afterwards."""
        require_service("rabbitmq")
        yield f"{BROKER}?queue={unique_name}&queue_type={self.queue_type}"
        await _drop(unique_name)

    async def dead_letters(self, url: str) -> list[tuple[str | None, bytes]]:
        """The messages the dead-letter exchange routed to `<queue>.dead`."""
        queue = RabbitMQSource.from_url(url, consumer="x").dead
        return [(m.message_id, m.body) for m in await _get_all(queue)]


class TestRabbitMQQuorum(RabbitContract):
    """The contract on a quorum queue, which counts deliveries."""

    async def test_dead_letter_carries_x_death(self, url: str) -> None:
        """A rejected message reaches the dead-letter queue with the broker's `x-death` record of why."""
        await self.publish(url, [("poison", b"bad")])
        async with self.source(url) as source:
            [delivery] = await collect(source, 1, within=10)
            await source.reject(delivery, reason="bad")
        [parked] = await _get_all(RabbitMQSource.from_url(url, consumer="x").dead)
        assert parked.headers["x-death"][0]["reason"] == "rejected"
        assert parked.message_id == "poison"


class TestRabbitMQClassic(RabbitContract):
    """The contract on a classic queue: a `redelivered` flag but no delivery count."""

    queue_type = "classic"
    counts_deliveries = False

    async def test_redelivery_count_unknown(self, url: str) -> None:
        """On a classic queue a redelivery is flagged but its count is unknown (None), never a made-up number."""
        await self.publish(url, [("a", b"x")])
        async with self.source(url) as source:
            [first] = await collect(source, 1, within=10)
            assert first.delivery_count == 1
            await source.nack(first)
            [again] = await collect(source, 1, within=5)
            assert again.redelivered
            assert again.delivery_count is None
            await source.ack(again)


async def test_header_id_wins_over_a_generated_message_id(unique_name: str) -> None:
    """An `x-message-id` header is the key even though aio-pika stamped a random `message_id` on the publish."""
    require_service("rabbitmq")
    url = f"{BROKER}?queue={unique_name}"
    try:
        async with RabbitMQSource.from_url(url, consumer="hub") as source:
            connection = await aio_pika.connect(BROKER)
            async with connection:
                channel = await connection.channel()
                for _ in range(2):  # a producer retry: aiormq gives each copy another random message_id
                    message = aio_pika.Message(b"h", headers={"x-message-id": "hdr"})
                    await channel.default_exchange.publish(message, routing_key=unique_name)
            got = await collect(source, 2, within=10)
            assert [d.key for d in got] == ["hdr", "hdr"]
            assert got[0].handle.message_id != got[1].handle.message_id
            for delivery in got:
                await source.ack(delivery)
    finally:
        await _drop(unique_name)


@pytest.mark.parametrize(
    "query",
    ["", "?queue=a&prefetch=0", "?queue=a&queue_type=stream", "?queue=a b", "?queue=a&queue=b", "?queue=a&bogus=1"],
)
def test_bad_url_is_a_configuration_error_with_password_masked(query: str) -> None:
    """A missing, invalid, repeated or unknown option raises ConfigurationError and never shows the password."""
    with pytest.raises(ConfigurationError) as caught:
        RabbitMQSource.from_url(f"amqp://guest:s3cret@127.0.0.1/{query}", consumer="hub")
    assert "s3cret" not in str(caught.value)
    assert "***" in str(caught.value)


def test_url_options_are_read() -> None:
    """Every documented option of an amqp:// URL lands in the source."""
    source = RabbitMQSource.from_url(
        "amqp://u:p@host:5673/vh?queue=edi.in&queue_type=classic&prefetch=7&dead=parked&heartbeat=5", consumer="hub"
    )
    assert (source.queue, source.queue_type, source.prefetch, source.dead) == ("edi.in", "classic", 7, "parked")
    assert source.url == "amqp://u:***@host:5673/vh?queue=edi.in&queue_type=classic&prefetch=7&dead=parked&heartbeat=5"


async def test_hubs_opening_a_new_quorum_queue_together_all_consume(unique_name: str) -> None:
    """Sources opened at the same moment on a queue none has declared yet all start consuming (RabbitMQ may refuse
    a consume with INTERNAL_ERROR while the quorum queue another one declared is still electing its leader)."""
    require_service("rabbitmq")
    import asyncio

    url = f"{BROKER}?queue={unique_name}"
    sources = [RabbitMQSource.from_url(url, consumer="hub") for _ in range(6)]
    try:
        results = await asyncio.gather(*(source.open() for source in sources), return_exceptions=True)
        assert [r for r in results if isinstance(r, BaseException)] == []
    finally:
        for source in sources:
            await source.aclose()
        await _drop(unique_name)
