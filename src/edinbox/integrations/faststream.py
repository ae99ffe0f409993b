"""FastStream: an inbox middleware for any FastStream broker, keyed by the producer's id, never by FastStream's own.

```python
from faststream import Context
from faststream.rabbit import RabbitBroker
from faststream.middlewares import AckPolicy
from edinbox import AsyncInbox
from edinbox.integrations.faststream import inbox_middleware

inbox = AsyncInbox("postgresql://app@db/hub", consumer="accounting")
broker = RabbitBroker("amqp://guest:guest@127.0.0.1/", middlewares=[inbox_middleware(inbox)])

@broker.subscriber("edi.in", ack_policy=AckPolicy.NACK_ON_ERROR)
async def create_invoice(body: bytes, tx=Context("inbox_tx")) -> None:
    await tx.connection.execute(...)   # inside the inbox transaction
```

The middleware's `consume_scope` runs the handler inside `AsyncInbox.process`: the journal row and the handler's
writes (through `Context("inbox_tx")`) commit together, before FastStream acks. A duplicate, a conflict or a dead
message skips the handler and is acked; a handler error or a live lease raises, and the ack policy decides (use
NACK_ON_ERROR, or ACK / MANUAL for Kafka: its default ACK_FIRST commits before the handler runs).

A handler's return value: with `inbox_middleware(inbox, outbox="amqp://...?queue=replies")` (any edinbox
destination URL) it is stored in the outbox inside the inbox transaction, keyed `<source>/<message id>` of the
message it answers, and the relay (`edinbox relay`, or `AsyncInbox.relay`) sends it after the commit, at least once
under that key: a crash anywhere loses nothing and sends nothing for a rolled-back handler. The middleware then
returns None, so attach no FastStream `@publisher` for it. Without `outbox`, FastStream publishes the return value
itself after the commit and before the ack, and a crash in between loses it.

Retries wait (see `edinbox.Retry`): a handler's failure gives the message a retry time in the journal, and FastStream
nacks it (NACK_ON_ERROR). A delivery that comes back before that time runs nothing and costs no attempt; the
middleware hands it back to wait: on NATS JetStream with `nak(delay=...)` (the server redelivers it then); on
RabbitMQ, Kafka and Redis, which have no delayed nack, it holds the delivery unacked in the consumer until its time
(an asyncio sleep: other deliveries go on) and then runs it there, without a broker round trip. A delivery is held
at most `hold` (15 minutes: under RabbitMQ's 30-minute `consumer_timeout`); a longer wait is cut into holds, each
ending in a nack that brings it straight back to wait again. On RabbitMQ a held delivery keeps one slot of the
channel's prefetch.

FastStream's `StreamMessage.message_id` is random per delivery on several brokers, so the key comes from where the
producer put it: the AMQP `message_id` property, the `Nats-Msg-Id` header, a Kafka record header, a Redis stream
entry field (or FastStream's own `message_id` header when a FastStream publisher set it explicitly).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from faststream import BaseMiddleware
from faststream._internal.context.repository import ContextRepo
from faststream.message import StreamMessage

from edinbox import _trace
from edinbox._async_inbox import AsyncInbox
from edinbox._errors import ConfigurationError, RetryLater, SourceError
from edinbox._message import Message, Outcome
from edinbox._records import Tx

__all__ = ["CONTEXT_KEY", "InboxMiddleware", "inbox_middleware", "producer_key"]

CONTEXT_KEY = "inbox_tx"
"""The FastStream context name under which the handler finds the inbox `Tx`: `tx=Context("inbox_tx")`."""

_log = logging.getLogger(__name__)


def _text(value: Any) -> str | None:
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", errors="replace")
    return str(value) if value not in (None, "", b"") else None


def _module(raw: Any) -> str:
    return type(raw).__module__.split(".")[0]


def _amqp(msg: StreamMessage[Any], raw: Any, header: str) -> tuple[str, str | None, str | None]:
    return f"amqp:{raw.routing_key}", _text(raw.message_id), None  # a delivery tag is no stable coordinate


def _nats(msg: StreamMessage[Any], raw: Any, header: str) -> tuple[str, str | None, str | None]:
    from nats.errors import NotJSMessageError

    produced = _text((raw.headers or {}).get("Nats-Msg-Id"))
    try:
        meta = raw.metadata  # JetStream: the stream sequence is the fallback coordinate
    except NotJSMessageError:  # core NATS: no stream, no stable coordinate
        return f"nats:{raw.subject}", produced, None
    return f"nats:{meta.stream}", produced, f"{meta.stream}/{meta.sequence.stream}"


def _kafka(msg: StreamMessage[Any], raw: Any, header: str) -> tuple[str, str | None, str | None]:
    topic, partition, offset = (
        (raw.topic(), raw.partition(), raw.offset()) if callable(raw.topic) else (raw.topic, raw.partition, raw.offset)
    )
    return f"kafka:{topic}", _text(msg.headers.get(header)), f"{topic}/{partition}/{offset}"


def _redis(msg: StreamMessage[Any], raw: Any, header: str) -> tuple[str, str | None, str | None]:
    kind, channel = raw.get("type"), raw.get("channel")
    if kind in ("bstream", "blist"):
        raise ConfigurationError("the inbox middleware handles one message at a time, not batch subscribers")
    produced = _text(msg.headers.get(header))
    if kind == "stream":
        produced = produced or _text(raw["data"].get(header.encode()))  # a foreign XADD's field
        return f"redis:{channel}", produced, _text(raw["message_ids"][0])
    return f"redis:{channel}", produced, None


_EXTRACTORS: dict[str, Callable[[StreamMessage[Any], Any, str], tuple[str, str | None, str | None]]] = {
    "aio_pika": _amqp,
    "aiormq": _amqp,
    "nats": _nats,
    "aiokafka": _kafka,
    "cimpl": _kafka,
    "confluent_kafka": _kafka,
}


def producer_key(msg: StreamMessage[Any], *, header: str = "message_id") -> tuple[str, str | None, str | None]:
    """Return (source, producer id or None, stable broker coordinates or None) of a FastStream message."""
    raw = msg.raw_message
    if isinstance(raw, list | tuple):
        raise ConfigurationError("the inbox middleware handles one message at a time, not batch subscribers")
    if isinstance(raw, dict):
        return _redis(msg, raw, header)
    extractor = _EXTRACTORS.get(_module(raw))
    if extractor is None:
        raise ConfigurationError(f"no key extractor for {type(raw).__qualname__} messages; pass key= instead")
    return extractor(msg, raw, header)


KeyFunction = Callable[[StreamMessage[Any]], tuple[str, str] | None]
OutcomeHook = Callable[[StreamMessage[Any], Message, Outcome], object]


@dataclass(frozen=True, slots=True)
class _Config:
    inbox: AsyncInbox
    header: str
    key: KeyFunction | None
    coordinates: bool
    lease: timedelta | None
    on_outcome: OutcomeHook | None
    outbox: str | None
    hold: timedelta


class InboxMiddleware(BaseMiddleware):
    """Runs the handler once per producer key, inside the inbox transaction; built by `inbox_middleware`."""

    def __init__(self, msg: Any, /, *, context: ContextRepo, config: _Config) -> None:
        """One instance per incoming message, as FastStream creates middlewares."""
        super().__init__(msg, context=context)
        self._config = config

    def _message(self, msg: StreamMessage[Any]) -> Message:
        config = self._config
        found = config.key(msg) if config.key is not None else None
        if found is None:
            source, produced, coordinates = producer_key(msg, header=config.header)
            message_id = produced or (coordinates if config.coordinates else None)
            if message_id is None:
                raise SourceError(f"message from {source} has no producer id ({config.header}); it cannot be keyed")
            found = (source, message_id)
        body = msg.body if isinstance(msg.body, bytes | bytearray) else str(msg.body).encode()
        headers = {str(k): str(v) for k, v in msg.headers.items()}
        return Message(found[1], found[0], bytes(body), headers=headers)

    async def consume_scope(self, call_next: Callable[[Any], Awaitable[Any]], msg: StreamMessage[Any]) -> Any:
        """Process the message through the inbox; the handler runs only for a new key (or a retry)."""
        message = self._message(msg)
        result: Any = None

        outbox = self._config.outbox

        async def handler(tx: Tx, _message: Message) -> None:
            nonlocal result
            with self.context.scope(CONTEXT_KEY, tx):
                result = await call_next(msg)
            if outbox is not None and result is not None:
                await tx.publish(outbox, _payload(result), key=f"{message.source}/{message.message_id}")
                result = None

        # the producer's trace (W3C traceparent in the headers) is the parent of the inbox's `edinbox settle` span
        with _trace.attached(_trace.extract(message.headers)):
            while True:
                try:
                    outcome = await self._config.inbox.process(message, handler, lease=self._config.lease)
                    break
                except RetryLater as waiting:  # it failed before and its retry time has not come
                    if not await self._wait(msg, waiting):
                        return None  # handed back with a delay: the broker brings it again then
        _log.debug("%s %s/%s", outcome.value, message.source, message.message_id)
        if self._config.on_outcome is not None:
            self._config.on_outcome(msg, message, outcome)
        return result

    async def _wait(self, msg: StreamMessage[Any], waiting: RetryLater) -> bool:
        """Wait out a delivery's retry time: True to run it again now; False once handed back to the broker with the
        delay (NATS JetStream); raises RetryLater (FastStream nacks it, and it comes back to wait again) when the
        time is further than `hold`."""
        seconds = waiting.delay.total_seconds()
        if _module(msg.raw_message) == "nats" and _jetstream(msg.raw_message):
            await msg.nack(delay=max(seconds, 0.001))  # type: ignore[call-arg]
            return False
        hold = self._config.hold.total_seconds()
        _log.debug("holding %s for %.3f s until its retry time", waiting, min(seconds, hold))
        await asyncio.sleep(min(seconds, hold))
        if seconds > hold:
            raise waiting
        return True


def _jetstream(raw: Any) -> bool:
    """Whether a NATS message came from JetStream (it can be nak'ed with a delay)."""
    from nats.errors import NotJSMessageError

    try:
        raw.metadata  # noqa: B018 - raises for a core NATS message
    except NotJSMessageError:
        return False
    return True


def _payload(value: Any) -> bytes:
    """A handler's return value as the bytes the outbox stores: bytes as they are, text in UTF-8, else JSON."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, default=str).encode()


def inbox_middleware(
    inbox: AsyncInbox,
    *,
    header: str = "message_id",
    key: KeyFunction | None = None,
    coordinates: bool = True,
    lease: timedelta | None = None,
    on_outcome: OutcomeHook | None = None,
    outbox: str | None = None,
    hold: timedelta = timedelta(minutes=15),
) -> Callable[..., InboxMiddleware]:
    """The middleware factory to pass in `Broker(middlewares=[...])`, deduplicating through `inbox`.

    `header` names the Kafka header / Redis field / FastStream header holding the producer id; `key(msg)` overrides
    extraction with your own `(source, message_id)`. Without a producer id, a broker's stable coordinates (Kafka
    offset, JetStream sequence, Redis entry id) are the key when `coordinates` is true (they catch redeliveries, not
    producer retries); otherwise the message raises SourceError. With `lease`, the handler runs in lease mode (no
    transaction, `tx.idempotency_key` to pass on). `on_outcome(msg, message, outcome)` observes every settlement.
    `outbox` (a destination URL) publishes a handler's return value through the outbox, in the inbox transaction.
    `hold` is the longest a delivery that waits for its retry time is held unacked in the consumer (brokers with
    no delayed nack); NATS JetStream naks it with the delay instead.
    """
    if outbox is not None and lease is not None:
        raise ConfigurationError("outbox= needs the inbox transaction: lease mode has none")
    if not isinstance(hold, timedelta) or hold <= timedelta(0):
        raise ConfigurationError(f"hold must be a positive timedelta, got {hold!r}")
    config = _Config(inbox, header, key, coordinates, lease, on_outcome, outbox, hold)

    def build(msg: Any, /, *, context: ContextRepo) -> InboxMiddleware:
        return InboxMiddleware(msg, context=context, config=config)

    return build
