"""The shape every source shares: receive deliveries, then ack, nack or reject each after the transaction settled.

A source is a broker (RabbitMQ, NATS JetStream, Redis Streams, Kafka) or the spool folder. Per-broker code only
opens the connection, extracts the producer's key from a delivery, and translates ack / nack / reject.

Failures, the same for every broker source:

- a bad URL or option is a ConfigurationError from `from_url`; a password the broker refuses is a
  ConfigurationError from `open` or from the call that reconnected; nothing else is;
- every broker or network failure of `open`, `receive`, `ack`, `nack`, `reject` and `in_progress` is a
  `SourceError` (a TransientError) with a one-line reason and the password masked, never a driver's exception;
- `open` tries to connect with backoff for `open_timeout` seconds, then raises SourceError; the source stays usable:
  the next `receive` connects again (with backoff, within its own `timeout`), so a hub can start before its broker;
- after an outage the source reconnects by itself on the next call; a delivery received before the outage may
  fail to settle (SourceError): it stays unsettled, the broker redelivers it and the inbox finds it settled;
- `aclose` never raises.

A `Publisher` sends to one destination with the producer id set and waits for the broker's confirmation; it stays
open across calls (the relay keeps one per destination) and is closed after any failure, which may have left its
connection unusable. Each source module's `publish(url, messages)` opens one, sends, and closes it.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import timedelta
from typing import Any

from edinbox._message import Outgoing

__all__ = ["STOP_CHECK", "Delivery", "Outgoing", "Publisher", "Source", "outgoing", "publish_once", "receive_until"]

STOP_CHECK = 1.0
"""The longest one receive of `receive_until` waits: how soon an idle consumer sees its stop, whatever its poll
timeout."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message as a source handed it over, with what the broker says about its past deliveries."""

    payload: bytes
    _: KW_ONLY
    message_id: str | None
    """The producer's id (AMQP message_id, Nats-Msg-Id, a Kafka header, a stream-entry field), if it set one."""
    coordinates: str
    """Where the broker keeps it (queue + delivery tag, stream sequence, topic-partition-offset, entry id, file name);
    a fallback key only: a producer retry is a new broker message with new coordinates."""
    source: str
    """The inbox `source` of messages keyed from this delivery when no EDI key wins (e.g. `amqp:edi.in`)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    delivery_count: int | None = None
    """How many times the broker says it delivered this message (1 = first), when it says so."""
    redelivered: bool = False
    """True when the broker flags this delivery as a redelivery."""
    handle: Any = field(default=None, repr=False, compare=False)
    """The driver's own message object, for ack / nack / reject."""
    reason: str = ""
    """Why the source refused this delivery (too big, not a regular file, an unusable name), empty when it did not:
    the consumer parks a refused delivery with this reason and never parses or processes its payload."""
    size: int | None = None
    """The payload's full size in bytes when `payload` holds only its first bytes (a refused payload too big to read
    whole stays where the source parked it, named by `coordinates`); None when `payload` is whole."""

    @property
    def truncated(self) -> bool:
        """True when `payload` is only the first bytes of a bigger payload that the source kept (see `size`)."""
        return self.size is not None and self.size > len(self.payload)

    @property
    def key(self) -> str:
        """The producer id when present, else the broker coordinates."""
        return self.message_id or self.coordinates


class Source(abc.ABC):
    """A place deliveries come from; acked only after their transaction committed."""

    url: str
    """The URL it was opened from, with any password masked."""

    ack_wait: float | None = None
    """Seconds after which a delivery held unsettled may be handed to someone else (None: never, while connected);
    a caller holding deliveries longer than a third of it calls `in_progress` on each."""

    receives_ahead: bool = False
    """True when a consumer may receive its next batch while the current one is not settled yet at no cost to
    anyone: no prefetch window to fill, and unsettled deliveries that `aclose` gives back (the spool folder). The hub
    then claims and plans the next batch while the database works on the current one's transaction, and beats
    `in_progress` on those claims too while the current batch is slow (the spool's claims expire: `ack_wait`)."""

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect, and declare what the source needs (queue, stream, consumer group, folders)."""

    @abc.abstractmethod
    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Return up to `max_messages` deliveries, waiting at most `timeout` seconds for the first."""

    @abc.abstractmethod
    async def ack(self, delivery: Delivery) -> None:
        """Settle the delivery: the broker will not deliver it again."""

    @abc.abstractmethod
    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Give the delivery back unsettled, to be delivered again (after `delay` seconds where supported)."""

    @abc.abstractmethod
    async def reject(self, delivery: Delivery, *, reason: str) -> str | None:
        """Park the delivery where operators see it (dead-letter exchange, rejected folder) and never redeliver it.

        None once it is parked there whole; when it had to be parked without its payload (a dead letter too large
        for its topic), where the whole payload is instead, for the rejected table's reason (after "is in ")."""

    async def in_progress(self, delivery: Delivery) -> None:  # noqa: B027 - optional hook, no-op by default
        """Tell the broker a long handler is still working on the delivery (a no-op where nothing expires)."""

    @property
    def horizon(self) -> timedelta | None:
        """The longest time after which this source can still bring a message back, when it can be known."""
        return None

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close the connection; unacked deliveries go back to the broker. Never raises, even on a dead connection."""

    async def __aenter__(self) -> Source:
        """Open the source."""
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the source."""
        await self.aclose()


class Publisher(abc.ABC):
    """An open connection that sends messages to one destination, kept across calls until `aclose`."""

    url: str
    """The destination URL, with any password masked."""

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect and declare what the destination needs (queue, stream, folders)."""

    @abc.abstractmethod
    async def send(self, messages: Sequence[Outgoing]) -> None:
        """Send in order, each with its producer id and headers, returning once the broker confirmed every one.

        LimitError for a payload the broker can never take (permanent); SourceError for a broker or network failure,
        after which the publisher must be closed and opened again; ConfigurationError for a header it cannot carry.
        """

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close the connection; never raises, even on a dead connection."""


def outgoing(messages: Iterable[tuple[str, bytes] | Outgoing]) -> list[Outgoing]:
    """Messages as `Outgoing` values: `(message_id, payload)` pairs get no headers."""
    return [Outgoing(*message) for message in messages]


async def publish_once(publisher: Publisher, messages: Iterable[tuple[str, bytes] | Outgoing]) -> None:
    """Open `publisher`, send `messages` (pairs or `Outgoing`), close it (also when opening failed part way)."""
    try:
        await publisher.open()
        await publisher.send(outgoing(messages))
    finally:
        await publisher.aclose()


async def receive_until(
    source: Source, *, stop: asyncio.Event, max_messages: int, timeout: float
) -> Sequence[Delivery]:
    """Receive as `source.receive` does, waiting up to `timeout` seconds (any, infinite too) for the first delivery,
    but return nothing soon after `stop` is set: the wait is cut into receives of at most `STOP_CHECK` seconds with
    `stop` checked between them. No receive is cancelled, so nothing a broker handed over is left in a driver."""
    deadline = time.monotonic() + max(0.0, timeout)
    while True:
        left = deadline - time.monotonic()
        received = await source.receive(max_messages=max_messages, timeout=max(0.0, min(left, STOP_CHECK)))
        if received or stop.is_set() or left <= STOP_CHECK:
            return received
