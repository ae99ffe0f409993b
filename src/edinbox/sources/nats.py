"""NATS JetStream (nats-py): a durable pull consumer, explicit acks confirmed by the server, naks with a delay.

URL: `nats://127.0.0.1:4222?stream=EDI&subject=edi.in&durable=hub` with the options

- `stream`, `subject` (required): the stream (created when missing, with the subject and the dead subject) and the
  subject consumed;
- `durable`: the durable consumer's name (default: the inbox consumer's name); processes sharing it share the work;
- `ack_wait`: seconds before an unacked delivery is redelivered (default 30);
- `max_deliver`: deliveries before the server gives up on a message (default unlimited);
- `max_ack_pending`: unacked deliveries in flight (default 1000);
- `dead`: the subject parked messages are published to (default `<subject>.dead`), kept in the same stream;
- `duplicate_window`: the publisher dedup window in seconds, for a stream created here (default 120).

The key is the `Nats-Msg-Id` header, which `publish` sets, so JetStream's own dedup window drops quick publisher
retries too; the fallback key is the stream sequence, stable across redeliveries but not across publisher retries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from edinbox._errors import ConfigurationError, SourceError
from edinbox._urls import mask
from edinbox.sources._base import Delivery, Source
from edinbox.sources._options import name_option, positive_float, positive_int, server_url, split_url

__all__ = ["SOURCE", "NatsSource", "publish"]

_SCHEMES = ("nats", "tls")
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,200}$")
_SUBJECT = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_MSG_ID = "Nats-Msg-Id"
_ACK_TIMEOUT = 5.0  # seconds to wait for the server's confirmation of an ack


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


def _max_deliver(name: str, value: Any) -> int:
    number = int(value)
    if number == -1 or number >= 1:
        return number
    raise ValueError(f"{name} must be -1 (unlimited) or at least 1")


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
        duplicate_window: float = 120.0,
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
        self.duplicate_window = duplicate_window
        self._server = url
        self._nc: Any = None
        self._js: Any = None
        self._sub: Any = None
        self._max_age: float = 0.0

    @classmethod
    def from_url(cls, url: str, *, consumer: str, **options: Any) -> NatsSource:
        """Build the source a `nats://` URL names; unknown or invalid options raise ConfigurationError."""
        parts, opts = split_url(url, schemes=_SCHEMES, overrides=options)
        durable = opts.take("durable", _token, None) or _checked(opts, "durable", consumer)
        source = cls(
            server_url(parts),
            consumer=consumer,
            stream=opts.require("stream", _token),
            subject=opts.require("subject", _subject),
            durable=durable,
            ack_wait=opts.take("ack_wait", positive_float, 30.0),
            max_deliver=opts.take("max_deliver", _max_deliver, -1),
            max_ack_pending=opts.take("max_ack_pending", positive_int, 1000),
            dead=opts.take("dead", _subject, None),
            duplicate_window=opts.take("duplicate_window", positive_float, 120.0),
        )
        opts.finish()
        source.url = mask(url)
        return source

    async def open(self) -> None:
        """Connect, make sure the stream holds the subject and the dead subject, and bind the durable consumer."""
        from nats.js.api import AckPolicy, ConsumerConfig

        self._nc, self._js = await _connect(self._server, self.url)
        try:
            self._max_age = await _ensure_stream(self._js, self)
            config = ConsumerConfig(
                durable_name=self.durable,
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=self.ack_wait,
                max_deliver=self.max_deliver,
                max_ack_pending=self.max_ack_pending,
                filter_subject=self.subject,
            )
            self._sub = await self._js.pull_subscribe(
                self.subject, durable=self.durable, stream=self.stream, config=config
            )
        except Exception as exc:
            await self.aclose()
            raise SourceError(f"cannot consume {self.stream}/{self.subject} on {self.url}: {exc}") from exc

    @property
    def horizon(self) -> timedelta | None:
        """The stream's `max_age` (known after `open()`): an unacked message can come back until then."""
        return timedelta(seconds=self._max_age) if self._max_age > 0 else None

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Fetch up to `max_messages`, waiting up to `timeout` seconds for the first."""
        if self._sub is None:
            raise SourceError(f"the source {self.url} is not open")
        try:
            messages = await self._sub.fetch(batch=max_messages, timeout=max(timeout, 0.01))
        except TimeoutError:  # nats.errors.TimeoutError, or asyncio's when the wait ran out between pulls
            return []
        except Exception as exc:
            raise SourceError(f"fetch from {self.stream}/{self.durable} on {self.url} failed: {exc!r}") from exc
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
        await _settle(delivery, self.url, "ack_sync", timeout=_ACK_TIMEOUT)

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Nak: the server redelivers it, after `delay` seconds when given."""
        await _settle(delivery, self.url, "nak", delay=delay or None)

    async def in_progress(self, delivery: Delivery) -> None:
        """Reset the ack wait timer for a long handler (`+WPI`)."""
        await _settle(delivery, self.url, "in_progress")

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Publish a copy to the dead subject (with the reason), then terminate the delivery (`+TERM`)."""
        headers = {k: v for k, v in delivery.headers.items() if k != _MSG_ID}
        headers.update(
            {
                _MSG_ID: f"dead:{delivery.coordinates}",  # a retried reject is deduplicated by the stream
                "Edinbox-Key": _header(delivery.key),
                "Edinbox-Reason": _header(reason),
                "Edinbox-Coordinates": delivery.coordinates,
            }
        )
        try:
            await self._js.publish(self.dead, delivery.payload, headers=headers, stream=self.stream)
        except Exception as exc:
            raise SourceError(f"cannot park {delivery.key!r} on {self.dead} at {self.url}: {exc}") from exc
        await _settle(delivery, self.url, "term")

    async def aclose(self) -> None:
        """Close the connection; unacked deliveries come back after `ack_wait`."""
        nc, self._nc, self._js, self._sub = self._nc, None, None, None
        if nc is not None:
            await nc.close()


SOURCE = NatsSource


async def publish(url: str, messages: Sequence[tuple[str, bytes]]) -> None:
    """Publish to the subject with `Nats-Msg-Id` set to the producer id, awaiting each JetStream ack."""
    source = NatsSource.from_url(url, consumer="publisher")
    nc, js = await _connect(source._server, source.url)
    try:
        await _ensure_stream(js, source)
        for message_id, payload in messages:
            await js.publish(source.subject, payload, headers={_MSG_ID: message_id}, stream=source.stream)
    except Exception as exc:
        raise SourceError(f"cannot publish to {source.subject} on {source.url}: {exc}") from exc
    finally:
        await nc.close()


def _checked(opts: Any, name: str, value: str) -> str:
    try:
        return _token(name, value)
    except ValueError as exc:
        raise opts.error(f"the consumer name {value!r} cannot be a durable name ({exc}); set durable=") from None


async def _connect(server: str, masked: str) -> tuple[Any, Any]:
    try:
        import nats
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ConfigurationError("nats:// sources need the nats extra: pip install 'edinbox[nats]'") from exc
    try:
        nc = await nats.connect(servers=[server], connect_timeout=5, max_reconnect_attempts=3)
    except Exception as exc:
        raise SourceError(f"cannot connect to {masked}: {mask(str(exc))}") from exc
    return nc, nc.jetstream()


async def _ensure_stream(js: Any, source: NatsSource) -> float:
    """Create the stream, or add the subject and dead subject to it; return its max_age in seconds (0: none)."""
    from nats.js.api import StreamConfig
    from nats.js.errors import NotFoundError

    wanted = [source.subject, source.dead]
    try:
        info = await js.stream_info(source.stream)
    except NotFoundError:
        config = StreamConfig(name=source.stream, subjects=wanted, duplicate_window=source.duplicate_window)
        info = await js.add_stream(config)
        return float(info.config.max_age or 0)
    missing = [s for s in wanted if s not in (info.config.subjects or [])]
    if missing:
        info.config.subjects = [*(info.config.subjects or []), *missing]
        info = await js.update_stream(info.config)
    return float(info.config.max_age or 0)


async def _settle(delivery: Delivery, masked: str, verb: str, **kwargs: Any) -> None:
    try:
        await getattr(delivery.handle, verb)(**kwargs)
    except Exception as exc:  # the server redelivers after ack_wait; the inbox absorbs the redelivery
        raise SourceError(f"{verb} of {delivery.key!r} on {masked} failed: {exc}") from exc


def _header(text: str) -> str:
    """A header value: one line, bounded."""
    return " ".join(text.split())[:1000]
