"""RabbitMQ (AMQP 0-9-1, aio-pika): manual ack after the commit, requeue when not settled, dead-letter when parked.

URL: `amqp://guest:guest@127.0.0.1/?queue=edi.in` with the options

- `queue` (required): the queue to consume, declared durable;
- `queue_type`: `quorum` (default; it counts deliveries in `x-delivery-count`) or `classic` (a `redelivered` flag
  only);
- `prefetch`: unacked deliveries the broker hands over at once (default 100, or twice the hub's `batch_size` when
  that is more: the broker keeps sending the next batch while the hub settles one);
- `dead`: the dead-letter exchange and queue for parked messages (default `<queue>.dead`), both declared;
- `heartbeat`: seconds between AMQP heartbeats (the broker's default when absent);
- `open_timeout`: seconds `open()` keeps trying to reach the broker, with backoff, before it raises (default 10);
- `reconnect_interval`: seconds between aio-pika's attempts to reconnect after an outage (default 1);
- `idle_check`: seconds between two looks at the queue while the consumer receives nothing (default 30; see below);
- `confirm_wait`: seconds a publisher's send may wait without the broker confirming any of its messages (default 5;
  see `RabbitMQPublisher`); the source publishes nothing, and takes it so that one URL names a queue either way.

The key is an `x-message-id` header when the producer set one, else the AMQP `message_id` property (aio-pika's
aiormq fills a random `message_id` into every publish that lacks one, so a producer that cannot set the property
must send the header). AMQP has no stable broker coordinates (a delivery tag is per channel and per delivery), so
the fallback key is the queue and a SHA-256 of the body.

The connection is aio-pika's robust one: after an outage it reconnects by itself and declares the dead-letter exchange
and queue again. Meanwhile `receive` waits up to its `timeout` for it, then raises SourceError. A delivery received
on a channel that has since closed cannot be settled any more (the broker requeued it when the channel closed):
acking it raises SourceError at once, and the redelivery is found settled by the inbox. A password the broker
refuses is a ConfigurationError.

The consumed queue is declared and consumed again by the source itself, on its next `receive` after its channel
reopened: first passively, on a channel of its own, so that a queue the broker no longer has (RabbitMQ may forget a
queue declared just before it crashed; a policy may have expired it, an operator deleted it) is told from an empty
one. A queue found gone, or deleted under the consumer (the broker cancels the consumer), is one ERROR line naming it,
saying the messages it held may be lost, and a call of `on_lost` (the hub counts it in
`edinbox_source_queues_lost_total`); the queue is then declared again and consumed. RabbitMQ 3.10 does not cancel
the consumer of a quorum queue that another client deleted and declared again at once (a publisher declaring it): the
new queue hands its messages to the old consumer, up to `prefetch` of them, and they never arrive. So while receives
come back empty, every `idle_check` seconds the source looks at the queue (a passive declare on a channel of its
own): messages ready in it at two looks in a row, with nothing delivered between them while the consumer has room
for more, mean the queue was replaced under it. That is the same ERROR line and `on_lost` call; the source then
closes its connection (the broker requeues what it handed to the old consumer) and the next `receive` opens a new
one.

The acks of a batch leave together once the caller next waits, as one `multiple` ack where no delivery still held
lies between their tags (`_amqp_acks`): one frame and one settle in the broker per batch instead of per delivery.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from edinbox._errors import ConfigurationError, SourceError
from edinbox._logs import log_event
from edinbox._urls import mask
from edinbox.sources._amqp_acks import Acks
from edinbox.sources._base import Delivery, Source
from edinbox.sources._failures import failing, quietly, reason, with_backoff
from edinbox.sources._rabbitmq_connect import (
    CONFIRM_WAIT,
    IDLE_CHECK,
    PREFETCH,
    arguments,
    connect,
    declare_dead,
    prefetch_for,
    refused,
    settings,
)
from edinbox.sources._rabbitmq_publisher import PUBLISHER, RabbitMQPublisher, publish

__all__ = ["CONFIRM_WAIT", "PUBLISHER", "SOURCE", "RabbitMQPublisher", "RabbitMQSource", "prefetch_for", "publish"]

_log = logging.getLogger(__name__)
_PROBE_TIMEOUT = 5.0  # seconds each step of the passive declare of the consumed queue may take
_WAKE = object()
"""Put in the buffer when the consumer must be set up again (its channel reopened, or the broker cancelled it): a
`receive` waiting for deliveries does so at once."""


class RabbitMQSource(Source):
    """A durable RabbitMQ queue consumed with manual acks, its parked messages dead-lettered to `<queue>.dead`."""

    def __init__(
        self,
        url: str,
        *,
        consumer: str,
        queue: str,
        queue_type: str = "quorum",
        prefetch: int = PREFETCH,
        dead: str | None = None,
        heartbeat: float | None = None,
        open_timeout: float = 10.0,
        reconnect_interval: float = 1.0,
        idle_check: float = IDLE_CHECK,
        confirm_wait: float = CONFIRM_WAIT,
        on_lost: Callable[[str], None] | None = None,
    ) -> None:
        """Configure the source; nothing connects before `open()`. `on_lost` is called with the queue's name each time
        the queue was found gone or deleted under the consumer (the messages it held may be lost); `confirm_wait`
        is for a publisher of the same URL (`RabbitMQPublisher`): the source publishes nothing."""
        self.url = mask(url)
        self.consumer = consumer
        self.queue = queue
        self.queue_type = queue_type
        self.prefetch = prefetch
        self.dead = dead or f"{queue}.dead"
        self.open_timeout = open_timeout
        self.reconnect_interval = reconnect_interval
        self.idle_check = idle_check
        self.confirm_wait = confirm_wait
        self.on_lost = on_lost
        self._server = url
        self._heartbeat = heartbeat
        self._connection: Any = None
        self._channel: Any = None
        self._buffer: asyncio.Queue[Any] = asyncio.Queue()
        self._later: set[asyncio.Task[None]] = set()
        self._acks = Acks()
        self._check = False  # a consumer was set up: the next one checks first that the broker still has the queue
        self._again: str | None = None  # "check" or "consume": the consumer must be set up again, checked first or not
        self._delivered = 0  # deliveries pushed by the broker so far
        self._next_look = 0.0  # when an idle receive next looks at the queue (`_look`)
        self._ready_seen: int | None = None  # `_delivered` when the last look found messages ready, else None

    prefetches = True
    """`open_source(..., batch=)` sets the default `prefetch` (`prefetch_for`), unless the URL sets it."""
    reports_lost = True
    """`open_source(..., on_lost=)` is told of each queue found gone or deleted under the consumer."""

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        consumer: str,
        batch: int | None = None,
        on_lost: Callable[[str], None] | None = None,
        **options: Any,
    ) -> RabbitMQSource:
        """Build the source an `amqp://` URL names; unknown or invalid options raise ConfigurationError.

        `batch` (the hub's `batch_size`) sets the default `prefetch` (`prefetch_for`); a `prefetch` option wins.
        `on_lost` is called with the queue's name when the queue was lost (see the class).
        """
        named = settings(url, batch=batch, **options)
        source = cls(
            named.server,
            consumer=consumer,
            queue=named.queue,
            queue_type=named.queue_type,
            prefetch=named.prefetch,
            dead=named.dead,
            heartbeat=named.heartbeat,
            open_timeout=named.open_timeout,
            reconnect_interval=named.reconnect_interval,
            idle_check=named.idle_check,
            confirm_wait=named.confirm_wait,
            on_lost=on_lost,
        )
        source.url = named.url
        return source

    async def open(self) -> None:
        """Connect (with backoff, for up to `open_timeout` s), declare the queues, and start consuming."""
        await self._ready(within=self.open_timeout)

    async def _ready(self, *, within: float) -> None:
        if self._connection is not None and self._connection.is_closed:
            await self._drop()
        if self._connection is None:
            await with_backoff(self._open_once, within=within)

    async def _open_once(self) -> None:
        self._buffer = asyncio.Queue()
        connection = await connect(
            self._server,
            self.url,
            heartbeat=self._heartbeat,
            reconnect_interval=self.reconnect_interval,
            name=f"edinbox {self.consumer} {self.queue}",
        )
        try:
            with failing(f"consuming {self.queue!r} on {self.url}", refused=refused):
                channel = await connection.channel()
                await channel.set_qos(prefetch_count=self.prefetch)
                await declare_dead(channel, queue_type=self.queue_type, dead=self.dead)
                await self._consume(channel, check=self._check)
                channel.reopen_callbacks.add(self._reopened)
        except Exception as exc:
            await quietly(f"closing {self.url}", connection.close)
            cause = exc.__cause__
            if cause is not None and _inequivalent(cause):  # waiting cannot fix a queue declared with other settings
                raise ConfigurationError(f"source URL {self.url!r}: {reason(cause)}") from None
            raise
        self._connection, self._channel = connection, channel

    async def _consume(self, channel: Any, *, check: bool) -> None:
        """Declare the queue and consume it on `channel`; with `check`, first tell whether the broker still had it.

        The queue is declared and consumed by the source, not by aio-pika's restore (`robust=False`), which would
        declare it again on each reconnect before anything could tell a queue lost from an empty one.
        """
        self._again = "check" if check else "consume"
        if check and not await _exists(channel, self.queue):
            self._lost("does not exist any more (the broker lost or deleted it)")
        self._again = "consume"
        queue = await channel.declare_queue(
            self.queue, durable=True, arguments=arguments(self.queue_type, dead=self.dead), robust=False
        )
        underlay = await channel.get_underlay_channel()
        underlay.on_consumer_cancel_callbacks.add(self._cancelled)
        await queue.consume(partial(self._arrived, self._buffer), no_ack=False, robust=False)
        self._again, self._check = None, True

    def _reopened(self, channel: Any) -> None:
        """aio-pika reopened the channel (a reconnect, or a channel the broker closed): its consumer is gone."""
        self._again = self._again or "check"
        self._buffer.put_nowait(_WAKE)

    def _cancelled(self, frame: Any) -> None:
        """The broker cancelled the consumer: the queue was deleted (by an operator, say) or became unavailable."""
        self._lost("was deleted under its consumer (the broker cancelled it)")
        self._again = "consume"
        self._buffer.put_nowait(_WAKE)

    def _lost(self, how: str) -> None:
        """Say the queue is gone with what it held, and count it (`on_lost`)."""
        then = "the messages it held may be lost; declaring it again"
        log_event(
            _log, logging.ERROR, "queue-lost", {"queue": self.queue, "source": self.url, "how": how, "then": then}
        )
        if self.on_lost is not None:
            self.on_lost(self.queue)

    async def _resume(self) -> None:
        """Set the consumer up again when its channel reopened or the broker cancelled it (SourceError on failure:
        the next `receive` tries again)."""
        if self._again is None or self._channel is None:
            return
        with failing(f"consuming {self.queue!r} on {self.url}"):
            await self._consume(self._channel, check=self._again == "check")

    async def _look(self) -> None:
        """After an empty receive, every `idle_check` s: close the connection when messages stayed ready in the queue
        since the last look while nothing was delivered and the consumer had room (the queue was replaced under it)."""
        now = time.monotonic()
        if now < self._next_look or self._channel is None or self._again is not None:
            return
        self._next_look = now + self.idle_check
        if self._acks.holding(self._channel) >= self.prefetch:  # no room: the broker rightly keeps the rest
            self._ready_seen = None
            return
        with failing(f"looking at {self.queue!r} on {self.url}"):
            ready = await _ready(self._channel, self.queue)
        if ready is not None and (not ready or self._ready_seen != self._delivered):
            self._ready_seen = self._delivered if ready else None
            return
        if ready is None:  # gone, and no cancel came
            self._lost("does not exist any more (the broker lost or deleted it)")
        else:
            self._lost(f"hands none of its {ready} ready messages to this consumer (it was deleted and declared again)")
        self._ready_seen, self._check = None, False  # said: the next consumer declares the queue without a check
        await self._drop()  # the broker requeues what it handed to the old consumer; the next receive reconnects

    async def _arrived(self, buffer: asyncio.Queue[Any], message: Any) -> None:
        self._delivered += 1
        self._acks.arrived(message)
        await buffer.put(message)

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Return the deliveries the broker pushed, waiting up to `timeout` seconds for the first."""
        started = time.monotonic()
        await self._ready(within=timeout)
        left = max(timeout - (time.monotonic() - started), 0.0)
        if not self._connection.connected.is_set():  # aio-pika is reconnecting: wait for it, within the budget
            try:
                await asyncio.wait_for(self._connection.connected.wait(), left)
            except TimeoutError:
                raise SourceError(
                    f"the connection to {self.url} is lost (reconnecting); unacked deliveries went back to the queue"
                ) from None
        await self._resume()
        messages: list[Any] = []
        deadline = started + timeout
        while not messages:
            try:
                first = await asyncio.wait_for(self._buffer.get(), max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                await self._look()
                return []
            if first is _WAKE:
                await self._resume()
                continue
            messages = [m for m in [first] if _live(m)]  # those of a closed channel were requeued by the broker
        while len(messages) < max_messages and not self._buffer.empty():
            message = self._buffer.get_nowait()
            if message is not _WAKE and _live(message):  # a consumer to set up again waits for the next receive
                messages.append(message)
        return [self._delivery(message) for message in messages]

    def _delivery(self, message: Any) -> Delivery:
        headers = {str(k): _text(v) for k, v in (message.headers or {}).items()}
        count = headers.get("x-delivery-count")
        if count is not None:
            delivery_count: int | None = int(count) + 1
        elif not message.redelivered:
            delivery_count = 1  # the broker guarantees a delivery without the flag was never seen before
        else:
            delivery_count = None
        return Delivery(
            bytes(message.body),
            message_id=headers.get("x-message-id") or message.message_id or None,
            coordinates=f"{self.queue}#sha256:{hashlib.sha256(message.body).hexdigest()}",
            source=f"amqp:{self.queue}",
            headers=headers,
            delivery_count=delivery_count,
            redelivered=bool(message.redelivered),
            handle=message,
        )

    async def ack(self, delivery: Delivery) -> None:
        """Ack the delivery on the channel it came on (SourceError when that channel has closed since); the acks of a
        batch go out together once the caller waits for something, in one frame where their tags allow (`Acks`)."""
        if not _live(delivery.handle):
            raise _closed(delivery, self.url, "ack")
        self._acks.ack(delivery.handle)

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Requeue the delivery, after holding it unacked for `delay` seconds when given."""
        if not delay:
            await self._settle(delivery, "nack", requeue=True)
            return
        task = asyncio.create_task(self._nack_later(delivery, delay))
        self._later.add(task)
        task.add_done_callback(self._later.discard)

    async def _nack_later(self, delivery: Delivery, delay: float) -> None:
        await asyncio.sleep(delay)
        try:
            await self._settle(delivery, "nack", requeue=True)
        except SourceError as exc:  # the channel closed meanwhile: the broker requeued it already
            fields = {"key": delivery.key, "error": str(exc), "then": "the broker requeued it already"}
            log_event(_log, logging.WARNING, "nack-not-sent", fields)

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Reject without requeue: the broker dead-letters it to the `dead` queue (with an `x-death` header)."""
        log_event(_log, logging.WARNING, "parking", {"key": delivery.key, "dead_letter": self.dead, "reason": reason})
        await self._settle(delivery, "reject", requeue=False)

    async def _settle(self, delivery: Delivery, verb: str, **kwargs: Any) -> None:
        """Nack or reject on the channel the delivery came on; its tag is no longer open (`Acks`)."""
        if not _live(delivery.handle):  # the broker requeued it when its channel closed; the inbox absorbs it again
            raise _closed(delivery, self.url, verb)
        with failing(f"{verb} of {delivery.key!r} on {self.url}"):
            await getattr(delivery.handle, verb)(**kwargs)
        self._acks.settled(delivery.handle)

    async def aclose(self) -> None:
        """Close the connection (never raises); the broker requeues every unacked delivery."""
        for task in list(self._later):
            task.cancel()
        await self._acks.aclose()
        await self._drop()

    async def _drop(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            await quietly(f"closing {self.url}", lambda: asyncio.wait_for(connection.close(), 5))


SOURCE = RabbitMQSource


async def _exists(channel: Any, queue: str) -> bool:
    """Whether the broker has `queue` (`_ready`)."""
    return await _ready(channel, queue) is not None


async def _ready(channel: Any, queue: str) -> int | None:
    """The messages ready in `queue`, None when the broker has no such queue: a passive declare on a throwaway
    channel (the broker closes a channel whose passive declare names a queue it does not have). Every step is bounded:
    while aio-pika reconnects, its channel waits for the connection without end (TimeoutError, a failure)."""
    from aiormq.exceptions import ChannelNotFoundEntity

    underlay = await asyncio.wait_for(channel.get_underlay_channel(), _PROBE_TIMEOUT)
    probe = await underlay.connection.channel(publisher_confirms=False, timeout=_PROBE_TIMEOUT)
    try:
        declared = await probe.queue_declare(queue, passive=True, timeout=_PROBE_TIMEOUT)
    except ChannelNotFoundEntity:
        return None
    finally:
        if not probe.is_closed:
            await probe.close()
    return int(declared.message_count or 0)


def _closed(delivery: Delivery, masked: str, verb: str) -> SourceError:
    """The error of settling a delivery whose channel closed since it was delivered (the broker requeued it)."""
    return SourceError(
        f"{verb} of {delivery.key!r} on {masked} failed: its channel closed since it was delivered (it is requeued)"
    )


def _live(message: Any) -> bool:
    """Whether the channel a message came on is still open (its delivery tag means something only there)."""
    from aiormq.exceptions import ChannelInvalidStateError

    try:
        return not message.channel.is_closed
    except ChannelInvalidStateError:
        return False


def _inequivalent(exc: BaseException) -> bool:
    """Whether the broker refused a declaration (PRECONDITION_FAILED or ACCESS_REFUSED): the queue exists with other
    arguments (say another `queue_type`), or the user may not use it."""
    from aiormq.exceptions import ChannelAccessRefused, ChannelPreconditionFailed

    return isinstance(exc, ChannelPreconditionFailed | ChannelAccessRefused)


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
