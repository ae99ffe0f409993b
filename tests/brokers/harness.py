"""The brokers the proof runs against, one entry each: how to name a fresh queue, what is left on it, and cleanup.

To add a broker, append a `Broker` to `BROKERS` (for example Kafka on librdkafka's mock cluster): the proof tests
are parametrized over this list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["BROKERS", "Broker"]


@dataclass(frozen=True, slots=True)
class Broker:
    """One broker under proof."""

    name: str
    service: str | None
    """The server `require_service` checks (None: nothing to check, e.g. a mock cluster)."""
    url: Callable[[str], str]
    """A source URL on fresh names derived from the given unique name (short redelivery timers for tests)."""
    left: Callable[[str], Awaitable[int]]
    """How many messages the broker still holds for the consumer (waiting or unacked) once the hubs exited."""
    cleanup: Callable[[str], Awaitable[None]]
    """Remove everything the URL created on the broker."""
    drops_publisher_copies: bool = False
    """The broker itself drops a second publish of one producer id (NATS, within its duplicate window)."""


# RabbitMQ -------------------------------------------------------------------------------------------------------

_AMQP = "amqp://guest:guest@127.0.0.1/"


async def _rabbit_left(name: str) -> int:
    import aio_pika

    connection = await aio_pika.connect(_AMQP)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(name, passive=True)
        return int(queue.declaration_result.message_count or 0)


async def _rabbit_cleanup(name: str) -> None:
    import aio_pika

    connection = await aio_pika.connect(_AMQP)
    async with connection:
        channel = await connection.channel()
        await channel.queue_delete(name)
        await channel.queue_delete(f"{name}.dead")
        await channel.exchange_delete(f"{name}.dead")


# NATS JetStream -------------------------------------------------------------------------------------------------

_NATS = "nats://127.0.0.1:4222"


async def _nats_left(name: str) -> int:
    import nats

    nc = await nats.connect(_NATS)
    try:
        info = await nc.jetstream().consumer_info(name, "hub")
        return int(info.num_pending) + int(info.num_ack_pending)
    finally:
        await nc.close()


async def _nats_cleanup(name: str) -> None:
    import nats
    import nats.js.errors

    nc = await nats.connect(_NATS)
    try:
        await nc.jetstream().delete_stream(name)
    except nats.js.errors.NotFoundError:
        pass
    finally:
        await nc.close()


# Redis Streams --------------------------------------------------------------------------------------------------

_REDIS = "redis://127.0.0.1:6379/0"
_REDIS_DEADLINES = {"socket_connect_timeout": 5, "socket_timeout": 10}
"""The checks' own clients give up instead of waiting for ever on a server that stopped answering."""


async def _redis_left(name: str) -> int:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(_REDIS, **_REDIS_DEADLINES)
    try:
        [group] = await client.xinfo_groups(name)
        return int(group["pending"]) + int(group["lag"] or 0)
    finally:
        await client.aclose()


async def _redis_cleanup(name: str) -> None:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(_REDIS, **_REDIS_DEADLINES)
    try:
        await client.delete(name, f"{name}.dead")
    finally:
        await client.aclose()


BROKERS = [
    Broker("rabbitmq", "rabbitmq", lambda n: f"{_AMQP}?queue={n}", _rabbit_left, _rabbit_cleanup),
    Broker(
        "nats",
        "nats",
        lambda n: f"{_NATS}?stream={n}&subject={n}.in&ack_wait=1",
        _nats_left,
        _nats_cleanup,
        drops_publisher_copies=True,
    ),
    Broker("redis", "redis", lambda n: f"{_REDIS}?stream={n}&claim_idle=0.5", _redis_left, _redis_cleanup),
]
