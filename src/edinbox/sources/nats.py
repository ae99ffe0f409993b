"""NATS JetStream (nats-py): a durable pull consumer, explicit acks confirmed by the server, naks with a delay.

URL: `nats://user:password@127.0.0.1:4222?stream=EDI&subject=edi.in&durable=hub` with the options

- `stream`, `subject` (required): the stream (created when missing, with the subject and the dead subject) and the
  subject consumed;
- `durable`: the durable consumer's name (default: the inbox consumer's name); processes sharing it share the work;
- `ack_wait`: seconds before an unacked delivery is redelivered (default 30);
- `max_deliver`: deliveries before the server gives up on a message (default unlimited);
- `max_ack_pending`: unacked deliveries in flight (default 1000);
- `dead`: the subject parked messages are published to (default `<subject>.dead`), kept in the same stream;
- `duplicate_window`: the publisher dedup window in seconds, for a stream created here (default 120, or `max_age`
  when that is shorter; never longer than `max_age`);
- `max_age`, `max_bytes`, `max_msgs`, `discard`: the limits of a stream created here (an existing stream keeps its
  own): messages older than `max_age` seconds are removed (default: the `horizon` given to `open_source`, else
  604800, 7 days);
  the stream holds at most `max_bytes` (default 1 GiB) and `max_msgs` (default -1, unlimited); when full,
  `discard=new` (default) refuses new publishes, so nothing unread is dropped silently, `discard=old` drops the
  oldest messages;
- `open_timeout`: seconds `open()` keeps trying to reach the server, with backoff, before it raises (default 10).

The key is the `Nats-Msg-Id` header, which `publish` sets, so JetStream's own dedup window drops quick publisher
retries too; the fallback key is the stream sequence, stable across redeliveries but not across publisher retries.

The user and password of the URL are decoded and handed to the client apart from the address, so a password may
hold any character (percent-encoded in the URL). nats-py reconnects by itself after an outage and resubscribes;
meanwhile `receive` waits up to its `timeout` for the connection, then raises SourceError, and settling calls raise
SourceError at once (the delivery stays unacked and comes back after `ack_wait`). A connection that nats-py gave
up on, or a stream or consumer that vanished, is built again on the next `receive`.

`delivery_count` and `redelivered` are what the server writes in the ack subject (`num_delivered`). nats-server
before 2.10.14 gets it wrong when a redelivery (ack wait run out, a nak's delay over) comes due just as the only
waiting pull request expires: the server steps its stream cursor back instead of queueing the redelivery again, so
the latest message it delivered goes out once more counted as a first delivery (`delivery_count` 1): the redelivery
itself when it is the latest, else a second copy of that one while the redelivery waits for the next ack-wait check
(nats-io/nats-server#5305). The keys keep the effects once; the counts are what is wrong.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Sequence
from datetime import timedelta
from typing import Any

from edinbox._errors import ConfigurationError, LimitError, SourceError
from edinbox._logs import log_event
from edinbox._urls import mask
from edinbox.sources._base import Delivery, Outgoing, Publisher, Source, publish_once
from edinbox.sources._failures import failing, quietly, reason, with_backoff
from edinbox.sources._nats_connect import connect, ensure_stream, last_error
from edinbox.sources._options import int_range, name_option, positive_float, positive_int, server_url, split_url

__all__ = ["PUBLISHER", "SOURCE", "NatsPublisher", "NatsSource", "publish"]

_log = logging.getLogger(__name__)
_SCHEMES = ("nats", "tls")
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,200}$")
_SUBJECT = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_MSG_ID = "Nats-Msg-Id"
_ACK_TIMEOUT = 5.0  # seconds to wait for the server's confirmation of an ack
_WEEK = 7 * 24 * 3600.0
_LONGEST_PULL = 60.0  # one pull request waits at most this long (the server takes no infinite or huge expiry)
_GIB = 1 << 30


def _token(name: str, value: Any) -> str:
    """A stream or consumer name: no dots, spaces or wildcards."""
    if not _TOKEN.match(str(value)):
        raise ValueError(f"{name} must be 1-200 letters, digits, '-' or '_'")
    return str(value)


def _subject(name: str, value: Any) -> str:
    """A literal subject: dot-separated tokens, no wildcards."""
    text = name_option(name, value)
    if not _SUBJECT.match(text):
        raise ValueError(f"{name} must be dot-separated tokens without wildcards")
    return text


def _unlimited_or_positive(name: str, value: Any) -> int:
    if str(value).strip() == "-1":
        return -1
    try:
        return positive_int(name, value)
    except ValueError:
        raise ValueError(f"{name} must be -1 (unlimited) or a whole number from 1 to 2**63-1") from None


def _discard(name: str, value: Any) -> str:
    if value not in ("new", "old"):
        raise ValueError(f"{name} must be new or old")
    return str(value)


class NatsSource(Source):
    """A JetStream durable pull consumer; parked messages go to a dead subject of the same stream."""

    def __init__(
        self,
        url: str,
        *,
        consumer: str,
        stream: str,
        subject: str,
        durable: str | None = None,
        ack_wait: float = 30.0,
        max_deliver: int = -1,
        max_ack_pending: int = 1000,
        dead: str | None = None,
        duplicate_window: float | None = None,
        max_age: float = _WEEK,
        max_bytes: int = _GIB,
        max_msgs: int = -1,
        discard: str = "new",
        open_timeout: float = 10.0,
    ) -> None:
        """Configure the source; nothing connects before `open()`."""
        self.url = mask(url)
        self.consumer = consumer
        self.stream = stream
        self.subject = subject
        self.durable = durable or _token("durable", consumer)
        self.ack_wait = ack_wait
        self.max_deliver = max_deliver
        self.max_ack_pending = max_ack_pending
        self.dead = dead or f"{subject}.dead"
        self.duplicate_window = duplicate_window if duplicate_window is not None else min(120.0, max_age)
        self.max_age = max_age
        self.max_bytes = max_bytes
        self.max_msgs = max_msgs
        self.discard = discard
        self.open_timeout = open_timeout
        self._server = url
        self._nc: Any = None
        self._js: Any = None
        self._sub: Any = None
        self._verify = False
        self._max_age: float = 0.0

    keeps_for_horizon = True
    """`open_source(..., horizon=)` sets `max_age` of a stream created here, unless the URL sets it."""

    @classmethod
    def from_url(cls, url: str, *, consumer: str, horizon: timedelta | None = None, **options: Any) -> NatsSource:
        """Build the source a `nats://` URL names; unknown or invalid options raise ConfigurationError.

        `horizon` (the inbox's) is the default `max_age` of a stream created here; a `max_age` option wins.
        """
        parts, opts = split_url(url, schemes=_SCHEMES, overrides=options)
        default_age = horizon.total_seconds() if horizon is not None and horizon.total_seconds() > 0 else _WEEK
        durable = opts.take("durable", _token, None) or _checked(opts, "durable", consumer)
        source = cls(
            server_url(parts),
            consumer=consumer,
            stream=opts.require("stream", _token),
            subject=opts.require("subject", _subject),
            durable=durable,
            ack_wait=opts.take("ack_wait", positive_float, 30.0),
            max_deliver=opts.take("max_deliver", _unlimited_or_positive, -1),
            max_ack_pending=opts.take("max_ack_pending", int_range(1, 2**31 - 1), 1000),
            dead=opts.take("dead", _subject, None),
            duplicate_window=opts.take("duplicate_window", positive_float, None),
            max_age=opts.take("max_age", positive_float, default_age),
            max_bytes=opts.take("max_bytes", _unlimited_or_positive, _GIB),
            max_msgs=opts.take("max_msgs", _unlimited_or_positive, -1),
            discard=opts.take("discard", _discard, "new"),
            open_timeout=opts.take("open_timeout", positive_float, 10.0),
        )
        opts.finish()
        if source.duplicate_window > source.max_age:
            window, age = source.duplicate_window, source.max_age
            raise opts.error(f"duplicate_window={window:g} s is longer than max_age={age:g} s")
        source.url = mask(url)
        return source

    async def open(self) -> None:
        """Connect (with backoff, for up to `open_timeout` s), make sure of the stream, bind the durable consumer."""
        await self._ready(within=self.open_timeout)

    async def _ready(self, *, within: float) -> None:
        """Connect when there is no live connection, then subscribe when there is no subscription."""
        if self._nc is not None and self._nc.is_closed:  # nats-py gave up: start over
            await self._drop()
        if self._nc is None:
            self._nc = await with_backoff(self._connect, within=within)
            self._js = self._nc.jetstream()
        if self._sub is not None and self._verify:  # back after an outage: is the consumer still there?
            await self._wait_connected(within)
            with failing(f"checking consumer {self.durable} of {self.stream} on {self.url}"):
                if not await self._consumer_exists():
                    fields = {"source": self.url, "stream": self.stream, "consumer": self.durable}
                    log_event(_log, logging.WARNING, "nats-consumer-lost", {**fields, "then": "creating them again"})
                    sub, self._sub = self._sub, None
                    await quietly("dropping the old subscription", sub.unsubscribe)
            self._verify = False
        if self._sub is None:
            await self._wait_connected(within)
            try:
                with failing(f"consuming {self.stream}/{self.subject} on {self.url}"):
                    self._max_age = await ensure_stream(self._js, self)
                    self._sub = await self._subscribe()
            except SourceError as exc:
                if _refused_request(exc.__cause__):  # waiting cannot fix a subject another stream holds, say
                    raise ConfigurationError(f"source URL {self.url!r}: {exc}") from None
                raise
            self._verify = False

    async def _consumer_exists(self) -> bool:
        from nats.js.errors import NotFoundError

        try:
            await self._js.consumer_info(self.stream, self.durable)
        except NotFoundError:
            return False
        return True

    async def _connect(self) -> Any:
        return await connect(self._server, self.url, on_reconnected=self._reconnected)

    def _reconnected(self) -> None:
        self._verify = True  # the server may have come back empty: check the consumer before trusting the fetch

    async def _subscribe(self) -> Any:
        from nats.js.api import AckPolicy, ConsumerConfig

        config = ConsumerConfig(
            durable_name=self.durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait,
            max_deliver=self.max_deliver,
            max_ack_pending=self.max_ack_pending,
            filter_subject=self.subject,
        )
        return await self._js.pull_subscribe(self.subject, durable=self.durable, stream=self.stream, config=config)

    async def _wait_connected(self, within: float) -> None:
        """Wait up to `within` seconds for nats-py to (re)connect; SourceError when it has not."""
        deadline = time.monotonic() + within
        while not self._nc.is_connected:
            if self._nc.is_closed or time.monotonic() >= deadline:
                raise SourceError(f"not connected to {self.url} (reconnecting): {last_error(self._nc)}")
            await asyncio.sleep(0.05)

    @property
    def horizon(self) -> timedelta | None:
        """The stream's `max_age` (known after `open()`): an unacked message can come back until then."""
        return timedelta(seconds=self._max_age) if self._max_age > 0 else None

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Fetch up to `max_messages`, waiting up to `timeout` seconds for the first (and for a reconnection)."""
        started = time.monotonic()
        await self._ready(within=timeout)
        await self._wait_connected(timeout - (time.monotonic() - started))
        try:
            while True:  # a long wait (an infinite one too) is a series of pulls of at most _LONGEST_PULL
                left = timeout - (time.monotonic() - started)
                try:
                    messages = await self._sub.fetch(batch=max_messages, timeout=max(min(left, _LONGEST_PULL), 0.01))
                except TimeoutError:  # nats.errors.TimeoutError, or asyncio's when the wait ran out between pulls
                    messages = []
                if messages or left <= _LONGEST_PULL:
                    break
        except Exception as exc:
            if self._nc.is_connected:  # not an outage: the stream or consumer may be gone, so bind again next time
                self._sub = None
            raise SourceError(f"fetch from {self.stream}/{self.durable} on {self.url} failed: {reason(exc)}") from exc
        return [self._delivery(message) for message in messages]

    def _delivery(self, message: Any) -> Delivery:
        headers = dict(message.headers or {})
        meta = message.metadata
        return Delivery(
            bytes(message.data),
            message_id=headers.get(_MSG_ID) or None,
            coordinates=f"{meta.stream}:{meta.sequence.stream}",
            source=f"nats:{self.stream}",
            headers=headers,
            delivery_count=meta.num_delivered,
            redelivered=meta.num_delivered > 1,
            handle=message,
        )

    async def ack(self, delivery: Delivery) -> None:
        """Ack and wait for the server to confirm it (`ack_sync`)."""
        await self._settle(delivery, "ack_sync", timeout=_ACK_TIMEOUT)

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Nak: the server redelivers it, after `delay` seconds when given."""
        await self._settle(delivery, "nak", delay=delay or None)

    async def in_progress(self, delivery: Delivery) -> None:
        """Reset the ack wait timer for a long handler (`+WPI`)."""
        await self._settle(delivery, "in_progress")

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Publish a copy to the dead subject (with the reason), then terminate the delivery (`+TERM`)."""
        self._check_connected(delivery, "park")
        headers = {k: v for k, v in delivery.headers.items() if k != _MSG_ID}
        headers.update(
            {
                _MSG_ID: f"dead:{delivery.coordinates}",  # a retried reject is deduplicated by the stream
                "Edinbox-Key": _header(delivery.key),
                "Edinbox-Reason": _header(reason),
                "Edinbox-Coordinates": delivery.coordinates,
            }
        )
        with failing(f"parking {delivery.key!r} on {self.dead} at {self.url}"):
            await self._while_connected(
                self._js.publish(self.dead, delivery.payload, headers=headers, stream=self.stream)
            )
        await self._settle(delivery, "term")

    def _check_connected(self, delivery: Delivery, verb: str) -> None:
        if self._nc is None or not self._nc.is_connected:
            raise SourceError(f"{verb} of {delivery.key!r} on {self.url} failed: not connected (it stays unacked)")

    async def _settle(self, delivery: Delivery, verb: str, **kwargs: Any) -> None:
        self._check_connected(delivery, verb)
        with failing(f"{verb} of {delivery.key!r} on {self.url}"):  # the server redelivers it after ack_wait
            await self._while_connected(getattr(delivery.handle, verb)(**kwargs))

    async def _while_connected(self, call: Awaitable[object]) -> None:
        """Await a call that waits for the server's answer, giving up as soon as the connection drops (rather than
        after the whole answer timeout): a hub settling a batch during an outage is not held 5 s per message."""
        task = asyncio.ensure_future(call)
        while not task.done():
            await asyncio.wait({task}, timeout=0.05)
            if not task.done() and (self._nc is None or not self._nc.is_connected):
                task.cancel()
                raise ConnectionError("the connection dropped before the server answered")
        task.result()

    async def aclose(self) -> None:
        """Close the connection (never raises); unacked deliveries come back after `ack_wait`."""
        await self._drop()

    async def _drop(self) -> None:
        nc, self._nc, self._js, self._sub = self._nc, None, None, None
        if nc is not None:
            await quietly(f"closing {self.url}", lambda: asyncio.wait_for(nc.close(), _ACK_TIMEOUT))


SOURCE = NatsSource


class NatsPublisher(Publisher):
    """Publishes to the URL's subject on one connection, `Nats-Msg-Id` set to the producer id (beside the message's
    own headers), awaiting each JetStream ack. A payload over the server's `max_payload` is a LimitError (permanent:
    no retry can send it), raised before it is sent; the payloads before it were sent."""

    def __init__(self, url: str) -> None:
        """Publish to the stream and subject a `nats://` URL names; nothing connects before `open()`."""
        self._source = NatsSource.from_url(url, consumer="publisher")
        self.url = self._source.url
        self._nc: Any = None
        self._js: Any = None

    async def open(self) -> None:
        """Connect once and make sure the stream exists."""
        source = self._source
        self._nc = await connect(source._server, source.url)
        self._js = self._nc.jetstream()
        with failing(f"preparing the stream {source.stream} on {source.url}"):
            await ensure_stream(self._js, source)

    async def send(self, messages: Sequence[Outgoing]) -> None:
        """Publish one by one, each acked by JetStream before the next."""
        source = self._source
        if self._js is None:
            raise SourceError(f"publishing to {source.subject} on {source.url} failed: the publisher is not open")
        with failing(f"publishing to {source.subject} on {source.url}"):
            for message_id, payload, headers in messages:
                if len(payload) > self._nc.max_payload:
                    raise LimitError(
                        f"{message_id}: the payload has {len(payload)} bytes, more than the NATS server's "
                        f"max_payload ({self._nc.max_payload} bytes)"
                    )
                sent = {**(headers or {}), _MSG_ID: message_id}
                await self._js.publish(source.subject, payload, headers=sent, stream=source.stream)

    async def aclose(self) -> None:
        """Close the connection."""
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None:
            await quietly(f"closing {self.url}", lambda: asyncio.wait_for(nc.close(), _ACK_TIMEOUT))


PUBLISHER = NatsPublisher


async def publish(url: str, messages: Sequence[tuple[str, bytes] | Outgoing]) -> None:
    """Publish to the subject with `Nats-Msg-Id` set to the producer id, awaiting each JetStream ack."""
    await publish_once(NatsPublisher(url), messages)


def _checked(opts: Any, name: str, value: str) -> str:
    try:
        return _token(name, value)
    except ValueError as exc:
        raise opts.error(f"the consumer name {value!r} cannot be a durable name ({exc}); set durable=") from None


def _refused_request(exc: BaseException | None) -> bool:
    """Whether JetStream refused the stream or consumer as asked (HTTP-like 400: overlapping subjects, a consumer
    of the same name with other settings), which no retry fixes."""
    from nats.js.errors import BadRequestError

    return isinstance(exc, BadRequestError)


def _header(text: str) -> str:
    """A header value: one line, bounded."""
    return " ".join(text.split())[:1000]
