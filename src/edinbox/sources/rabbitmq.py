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

from edinbox._errors import ConfigurationError, LimitError, SourceError
from edinbox._urls import mask
from edinbox.sources._amqp_acks import Acks
from edinbox.sources._base import Delivery, Outgoing, Publisher, Source, publish_once
from edinbox.sources._failures import failing, quietly, reason, with_backoff
from edinbox.sources._options import name_option, positive_float, positive_int, server_url, split_url

__all__ = ["CONFIRM_WAIT", "PUBLISHER", "SOURCE", "RabbitMQPublisher", "RabbitMQSource", "prefetch_for", "publish"]

_log = logging.getLogger(__name__)
_SCHEMES = ("amqp", "amqps")
_QUEUE_TYPES = ("quorum", "classic")
_CONNECT_TIMEOUT = 5.0
_PREFETCH = 100
_CHUNK = 500  # publishes in flight at once in a send
CONFIRM_WAIT = 5.0
"""Seconds a send may wait without any confirm from the broker by default (the `confirm_wait` option)."""
_PROBE_TIMEOUT = 5.0  # seconds the passive declare of the consumed queue may take
_IDLE_CHECK = 30.0
_WAKE = object()
"""Put in the buffer when the consumer must be set up again (its channel reopened, or the broker cancelled it): a
`receive` waiting for deliveries does so at once."""


def _queue_type(name: str, value: Any) -> str:
    if value not in _QUEUE_TYPES:
        raise ValueError(f"{name} must be one of {', '.join(_QUEUE_TYPES)}")
    return str(value)


class RabbitMQSource(Source):
    """A durable RabbitMQ queue consumed with manual acks, its parked messages dead-lettered to `<queue>.dead`."""

    def __init__(
        self,
        url: str,
        *,
        consumer: str,
        queue: str,
        queue_type: str = "quorum",
        prefetch: int = _PREFETCH,
        dead: str | None = None,
        heartbeat: float | None = None,
        open_timeout: float = 10.0,
        reconnect_interval: float = 1.0,
        idle_check: float = _IDLE_CHECK,
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
        parts, opts = split_url(url, schemes=_SCHEMES, overrides=options)
        source = cls(
            server_url(parts),
            consumer=consumer,
            queue=opts.require("queue", name_option),
            queue_type=opts.take("queue_type", _queue_type, "quorum"),
            prefetch=opts.take("prefetch", positive_int, prefetch_for(batch)),
            dead=opts.take("dead", name_option, None),
            heartbeat=opts.take("heartbeat", positive_float, None),
            open_timeout=opts.take("open_timeout", positive_float, 10.0),
            reconnect_interval=opts.take("reconnect_interval", positive_float, 1.0),
            idle_check=opts.take("idle_check", positive_float, _IDLE_CHECK),
            confirm_wait=opts.take("confirm_wait", positive_float, CONFIRM_WAIT),
            on_lost=on_lost,
        )
        opts.finish()
        source.url = mask(url)
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
        connection = await _connect(
            self._server,
            self.url,
            heartbeat=self._heartbeat,
            reconnect_interval=self.reconnect_interval,
            name=f"edinbox {self.consumer} {self.queue}",
        )
        try:
            with failing(f"consuming {self.queue!r} on {self.url}", refused=_refused):
                channel = await connection.channel()
                await channel.set_qos(prefetch_count=self.prefetch)
                await _declare_dead(channel, queue_type=self.queue_type, dead=self.dead)
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
            self.queue, durable=True, arguments=_arguments(self.queue_type, dead=self.dead), robust=False
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
        _log.error("queue %r on %s %s: the messages it held may be lost; declaring it again", self.queue, self.url, how)
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
            _log.warning("delayed nack of %s not sent: %s", delivery.key, exc)

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Reject without requeue: the broker dead-letters it to the `dead` queue (with an `x-death` header)."""
        _log.warning("parking %s in %s: %s", delivery.key, self.dead, reason)
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


def prefetch_for(batch: int | None) -> int:
    """The default prefetch for receives of `batch` deliveries: 100, or twice the batch when that is more, so the
    broker has the next batch on its way while the caller settles one (a prefetch no bigger than the batch leaves the
    channel empty until the batch's acks reach the broker)."""
    return max(_PREFETCH, 2 * batch) if batch else _PREFETCH


SOURCE = RabbitMQSource


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
        self._source = RabbitMQSource.from_url(url, consumer="publisher")
        self.url = self._source.url
        self.confirm_wait = self._source.confirm_wait
        self._connection: Any = None
        self._channel: Any = None

    async def open(self) -> None:
        """Connect once, open a confirming channel and declare the queue."""
        source = self._source
        self._connection = await _connect(
            source._server, source.url, heartbeat=source._heartbeat, robust=False, name="edinbox-publisher"
        )
        with failing(f"declaring {source.queue!r} on {source.url}"):
            self._channel = await self._connection.channel(publisher_confirms=True)
            await _declare_dead(self._channel, queue_type=source.queue_type, dead=source.dead)
            arguments = _arguments(source.queue_type, dead=source.dead)
            await self._channel.declare_queue(source.queue, durable=True, arguments=arguments)

    async def send(self, messages: Sequence[Outgoing]) -> None:
        """Publish in chunks of 500, waiting for every confirm while the broker confirms some (see the class)."""
        if self._channel is None:
            raise SourceError(f"publishing to {self._source.queue!r} on {self.url} failed: the publisher is not open")
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
        return await self._channel.default_exchange.publish(body, routing_key=self._source.queue)

    async def _unconfirmed(self, left: int, total: int) -> SourceError:
        """The error of a send the broker stopped confirming, saying whether it blocked the connection."""
        blocked = await _blocked(self._channel)
        why = ": the broker blocks this connection (connection.blocked: a memory or disk alarm)" if blocked else ""
        return SourceError(
            f"publishing to {self._source.queue!r} on {self.url} failed: {left} of {total} messages not confirmed, "
            f"no confirm from the broker for {self.confirm_wait:g} s{why}"
        )

    def _check(self, errors: list[BaseException]) -> None:
        """Raise for the failed publishes of a chunk: LimitError when the broker refused a payload as too big."""
        for exc in errors:
            if "larger than configured max size" in str(exc):
                raise LimitError(f"RabbitMQ refused a payload on {self.url}: {reason(exc)}")
        if errors:
            raise SourceError(f"cannot publish to {self._source.queue!r} on {self.url}: {reason(errors[0])}")

    async def aclose(self) -> None:
        """Close the connection (its channel with it)."""
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            await quietly(f"closing {self.url}", connection.close)


PUBLISHER = RabbitMQPublisher


async def publish(url: str, messages: Sequence[tuple[str, bytes] | Outgoing]) -> None:
    """Publish persistent messages with publisher confirms, `message_id` set to the producer id."""
    await publish_once(RabbitMQPublisher(url), messages)


async def _connect(
    server: str,
    masked: str,
    *,
    heartbeat: float | None,
    reconnect_interval: float = 1.0,
    robust: bool = True,
    name: str = "edinbox",
) -> Any:
    """One connection attempt; a robust connection then reconnects by itself after any outage."""
    try:
        import aio_pika
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ConfigurationError("amqp:// sources need the rabbitmq extra: pip install 'edinbox[rabbitmq]'") from exc
    kwargs: dict[str, Any] = {} if heartbeat is None else {"heartbeat": heartbeat}
    kwargs["timeout"] = _CONNECT_TIMEOUT  # an address that never answers must not hold open() or receive() forever
    kwargs["client_properties"] = {"connection_name": name}  # what `rabbitmqctl list_connections` shows
    with failing(f"connecting to {masked}", refused=_refused):
        if robust:
            return await aio_pika.connect_robust(server, reconnect_interval=reconnect_interval, **kwargs)
        return await aio_pika.connect(server, **kwargs)


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


async def _declare_dead(channel: Any, *, queue_type: str, dead: str) -> None:
    """Declare the dead-letter exchange and queue (a robust channel declares them again after each reconnect)."""
    import aio_pika

    exchange = await channel.declare_exchange(dead, aio_pika.ExchangeType.FANOUT, durable=True)
    parked = await channel.declare_queue(dead, durable=True, arguments={"x-queue-type": queue_type})
    await parked.bind(exchange)


def _arguments(queue_type: str, *, dead: str) -> dict[str, Any]:
    """The arguments of the consumed queue: its type, and the dead-letter exchange its rejects go to."""
    return {"x-queue-type": queue_type, "x-dead-letter-exchange": dead}


async def _exists(channel: Any, queue: str) -> bool:
    """Whether the broker has `queue` (`_ready`)."""
    return await _ready(channel, queue) is not None


async def _ready(channel: Any, queue: str) -> int | None:
    """The messages ready in `queue`, None when the broker has no such queue: a passive declare on a throwaway
    channel (the broker closes a channel whose passive declare names a queue it does not have)."""
    from aiormq.exceptions import ChannelNotFoundEntity

    underlay = await channel.get_underlay_channel()
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


def _refused(exc: BaseException) -> bool:
    from aiormq.exceptions import ProbableAuthenticationError

    return isinstance(exc, ProbableAuthenticationError) or "ACCESS_REFUSED" in str(exc)


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
