"""The RabbitMQ publisher (aio-pika): persistent messages with publisher confirms, a send waited for as long as the
broker confirms some of its messages (the URL's `confirm_wait`).

A publisher whose send failed with bytes still unsent in its socket's buffer aborts the socket when closed: the
broker reads nothing from a connection blocked by a memory or disk alarm, and a graceful AMQP close would wait for
those bytes to go first (up to three heartbeat intervals), then for the socket to flush them (without end). Any
other close that takes more than 5 s aborts the socket too. The publisher keeps its socket through aiormq's
`transport_factory` hook (`_Sockets`).
"""

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
_CLOSE_WAIT = 5.0  # seconds a close may wait for the broker before the socket is aborted


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
        self._sockets = _Sockets(tls=self._settings.server.startswith("amqps:"))
        self._failed = False  # a send failed since `open`

    async def open(self) -> None:
        """Connect once, open a confirming channel and declare the queue."""
        named = self._settings
        self._failed = False
        self._connection = await connect(
            named.server,
            named.url,
            heartbeat=named.heartbeat,
            robust=False,
            name="edinbox-publisher",
            connection_class=_keeping(self._sockets),
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
        try:
            await self._send(messages)
        except BaseException:
            self._failed = True
            raise

    async def _send(self, messages: Sequence[Outgoing]) -> None:
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
        """Close the connection (its channel with it); after a failed send that left bytes unsent, or when the close
        takes more than 5 s, abort its socket instead of waiting for a broker that reads nothing (see the module)."""
        connection, self._connection, self._channel = self._connection, None, None
        if connection is None:
            return
        transport, self._sockets.transport = self._sockets.transport, None
        if self._failed and transport is not None and transport.get_write_buffer_size():
            # closing, not lost yet (the unsent bytes hold it open): aiormq's close then sends no Connection.Close and
            # stops its reader before it could read the end of the socket and log that as a failure; aborted below
            transport.close()
        closing = asyncio.ensure_future(quietly(f"closing {self.url}", connection.close))
        await asyncio.wait({closing}, timeout=_CLOSE_WAIT)
        if transport is not None:
            transport.abort()  # drops what is still unsent; nothing when the close ended the connection already
        await closing


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


class _Sockets:
    """aiormq's TCP or TLS transport factory (the `aiormq.TransportFactory` interface, its `transport_factory`
    hook) keeping the transport of the connection it made, so a failed publisher can abort it."""

    def __init__(self, *, tls: bool) -> None:
        """Make TLS connections (`amqps://`) or plain TCP ones, as aiormq would for the URL."""
        self._tls = tls
        self.transport: asyncio.WriteTransport | None = None

    async def create(self, url: Any, **kwargs: Any) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Open the connection as aiormq's own factory does, and keep its transport."""
        from aiormq.connection import TCPTransportFactory, TLSTransportFactory

        made = TLSTransportFactory() if self._tls else TCPTransportFactory()
        reader, writer = await made.create(url, **kwargs)
        self.transport = writer.transport
        return reader, writer


def _keeping(sockets: _Sockets) -> Any:
    """An aio-pika connection class (its `connection_class`) whose aiormq connection is made by `sockets`."""
    import aio_pika

    class Connection(aio_pika.Connection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # aio-pika hands `self.kwargs` to aiormq's Connection; `transport_factory` cannot be given to connect():
            # it would also go into the URL's query, and aio-pika keeps only the keyword options it knows
            self.kwargs["transport_factory"] = sockets

    return Connection
