"""The RabbitMQ publisher (aio-pika): persistent messages with publisher confirms, a send waited for as long as the
broker confirms some of its messages (the URL's `confirm_wait`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from edinbox._errors import LimitError, SourceError
from edinbox.sources._base import Outgoing, Publisher, publish_once
from edinbox.sources._failures import failing, quietly, reason
from edinbox.sources._rabbitmq_connect import arguments, connect, declare_dead, settings

__all__ = ["PUBLISHER", "RabbitMQPublisher", "publish"]

_CHUNK = 500  # publishes in flight at once in a send


class RabbitMQPublisher(Publisher):
    """Persistent messages on one connection and channel with publisher confirms, `message_id` set to the producer
    id and the headers as AMQP headers. A payload over the broker's `max_message_size` is a LimitError: the broker
    closes the channel (PRECONDITION_FAILED), so the publisher must be opened again after it.

    A send publishes its messages 500 at a time and waits for their confirms for as long as the broker confirms
    some: once it has confirmed none for the URL's `confirm_wait` seconds (default 5), the send fails with
    SourceError (transient: the relay logs `relay-down`, backs off and sends the rows again), saying so, and whether
    the broker has blocked the connection (`connection.blocked`: a memory or disk alarm, under which RabbitMQ stops
    reading a publishing connection until the alarm clears). A send that returns had every message confirmed (the
    broker holds it durably); a send that failed may still have put any of its messages in the queue (a blocked
    connection's first publishes are enqueued, unconfirmed), so its caller's resend may be a copy under the same
    `message_id`, which the receiving inbox takes as a duplicate.
    """

    def __init__(self, url: str) -> None:
        """Publish to the queue an `amqp://...?queue=` URL names; nothing connects before `open()`."""
        self._settings = settings(url)
        self.url = self._settings.url
        self.confirm_wait = self._settings.confirm_wait
        self._connection: Any = None
        self._channel: Any = None

    async def open(self) -> None:
        """Connect once, open a confirming channel and declare the queue."""
        named = self._settings
        self._connection = await connect(
            named.server, named.url, heartbeat=named.heartbeat, robust=False, name="edinbox-publisher"
        )
        with failing(f"declaring {named.queue!r} on {named.url}"):
            self._channel = await self._connection.channel(publisher_confirms=True)
            await declare_dead(self._channel, queue_type=named.queue_type, dead=named.dead)
            queue_arguments = arguments(named.queue_type, dead=named.dead)
            await self._channel.declare_queue(named.queue, durable=True, arguments=queue_arguments)

    async def send(self, messages: Sequence[Outgoing]) -> None:
        """Publish in chunks of 500, waiting for every confirm while the broker confirms some (see the class)."""
        if self._channel is None:
            raise SourceError(f"publishing to {self._settings.queue!r} on {self.url} failed: the publisher is not open")
        for start in range(0, len(messages), _CHUNK):
            publishes = [asyncio.ensure_future(self._publish(m)) for m in messages[start : start + _CHUNK]]
            try:
                left = await _confirmed(publishes, wait=self.confirm_wait)
            finally:
                for publish in publishes:
                    publish.cancel()  # those still waiting for a confirm, when the wait expired or was cancelled
                done = await asyncio.gather(*publishes, return_exceptions=True)
            if left:
                raise await self._unconfirmed(left + len(messages) - start - len(publishes), len(messages))
            self._check([r for r in done if isinstance(r, BaseException)])

    async def _publish(self, message: Outgoing) -> Any:
        """Publish one persistent message and wait for its confirm."""
        import aio_pika

        body = aio_pika.Message(
            message.payload,
            message_id=message.message_id,
            headers=dict(message.headers or {}),
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        return await self._channel.default_exchange.publish(body, routing_key=self._settings.queue)

    async def _unconfirmed(self, left: int, total: int) -> SourceError:
        """The error of a send the broker stopped confirming, saying whether it blocked the connection."""
        blocked = await _blocked(self._channel)
        why = ": the broker blocks this connection (connection.blocked: a memory or disk alarm)" if blocked else ""
        return SourceError(
            f"publishing to {self._settings.queue!r} on {self.url} failed: {left} of {total} messages not confirmed, "
            f"no confirm from the broker for {self.confirm_wait:g} s{why}"
        )

    def _check(self, errors: list[BaseException]) -> None:
        """Raise for the failed publishes of a chunk: LimitError when the broker refused a payload as too big."""
        for exc in errors:
            if "larger than configured max size" in str(exc):
                raise LimitError(f"RabbitMQ refused a payload on {self.url}: {reason(exc)}")
        if errors:
            raise SourceError(f"cannot publish to {self._settings.queue!r} on {self.url}: {reason(errors[0])}")

    async def aclose(self) -> None:
        """Close the connection (its channel with it)."""
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            await quietly(f"closing {self.url}", connection.close)


PUBLISHER = RabbitMQPublisher


async def publish(url: str, messages: Sequence[tuple[str, bytes] | Outgoing]) -> None:
    """Publish persistent messages with publisher confirms, `message_id` set to the producer id."""
    await publish_once(RabbitMQPublisher(url), messages)


async def _confirmed(publishes: Sequence[asyncio.Future[Any]], *, wait: float) -> int:
    """Wait until every publish is done (confirmed or failed), or until none was done for `wait` seconds; how many
    are not done."""
    left = len(publishes)
    progress = asyncio.Event()

    def done(_: asyncio.Future[Any]) -> None:
        nonlocal left
        left -= 1
        progress.set()

    for publish in publishes:
        publish.add_done_callback(done)
    while left:
        progress.clear()
        try:
            await asyncio.wait_for(progress.wait(), wait)
        except TimeoutError:
            break
    return left


async def _blocked(channel: Any) -> bool:
    """Whether the broker has blocked the channel's connection (`connection.blocked`): it is connected, yet not ready
    (aiormq's `ready()` waits for the connection and for its `connection.unblocked`)."""
    try:
        connection = (await channel.get_underlay_channel()).connection
    except Exception:  # the channel closed: not a block
        return False
    if not connection.connected.is_set():
        return False
    try:
        await asyncio.wait_for(connection.ready(), 0.1)
    except TimeoutError:
        return True
    return False
