"""An in-memory source (a broker in a list) and an in-memory sink (a remote system that counts its effects)."""

from __future__ import annotations

import itertools
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence

from edinbox._message import Message
from edinbox.sources import Delivery, Source

__all__ = ["MemorySink", "MemorySource"]


class MemorySource(Source):
    """A broker held in memory, with the shape of every edinbox source: deliveries are taken, then acked, nacked
    (given back, after a delay when asked) or rejected (parked in `rejected`). Each delivery of a message counts in
    its `delivery_count`; `publish` twice is a producer's retry: a new broker message with the same key."""

    def __init__(self, name: str = "memory", *, clock: Callable[[], float] = time.monotonic) -> None:
        """An empty source named `name` (its deliveries' inbox `source` is `memory:<name>`)."""
        self.url = f"memory://{name}"
        self.name = name
        self._clock = clock
        self._ready: deque[Delivery] = deque()
        self._held: list[tuple[float, Delivery]] = []
        self._out: set[int] = set()
        self._numbers = itertools.count(1)
        self.acked: list[Delivery] = []
        self.rejected: list[tuple[Delivery, str]] = []

    def publish(self, message: Message | tuple[str, bytes], *, headers: Mapping[str, str] | None = None) -> Delivery:
        """Add a broker message carrying `message`'s id and payload (a `Message` or `(message_id, payload)`)."""
        message_id, payload = (message.message_id, message.payload) if isinstance(message, Message) else message
        number = next(self._numbers)
        delivery = Delivery(
            bytes(payload),
            message_id=message_id,
            coordinates=f"{self.name}/{number}",
            source=f"memory:{self.name}",
            headers=dict(headers or (message.headers if isinstance(message, Message) else None) or {}),
            delivery_count=0,
            handle=number,
        )
        self._ready.append(delivery)
        return delivery

    @property
    def pending(self) -> int:
        """Messages not settled yet: waiting, held back after a nack, or taken and not yet acked."""
        return len(self._ready) + len(self._held) + len(self._out)

    def next_due(self) -> float | None:
        """Seconds until the first message held back by a nack may be taken again (None: none is held)."""
        if not self._held:
            return None
        return max(0.0, min(due for due, _ in self._held) - self._clock())

    def take(self, max_messages: int = 1) -> list[Delivery]:
        """Hand out up to `max_messages` deliveries now (no wait), each with its delivery count raised by one."""
        now = self._clock()
        due = [held for held in self._held if held[0] <= now]
        for held in due:
            self._held.remove(held)
            self._ready.append(held[1])
        taken: list[Delivery] = []
        while self._ready and len(taken) < max_messages:
            delivery = self._ready.popleft()
            count = (delivery.delivery_count or 0) + 1
            taken.append(_again(delivery, count))
            self._out.add(delivery.handle)
        return taken

    def give_back(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Put a taken delivery back, to be taken again after `delay` seconds (at once when None)."""
        self._out.discard(delivery.handle)
        self._held.append((self._clock() + (delay or 0.0), delivery))

    def settle(self, delivery: Delivery) -> None:
        """Ack a taken delivery: it never comes back."""
        self._out.discard(delivery.handle)
        self.acked.append(delivery)

    async def open(self) -> None:
        """Nothing to connect."""

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Up to `max_messages` deliveries, without waiting (an empty list when none is ready)."""
        return self.take(max_messages)

    async def ack(self, delivery: Delivery) -> None:
        """Settle the delivery."""
        self.settle(delivery)

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Give the delivery back, to come again after `delay` seconds."""
        self.give_back(delivery, delay=delay)

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Park the delivery in `rejected` with its reason; it never comes back."""
        self._out.discard(delivery.handle)
        self.rejected.append((delivery, reason))

    async def aclose(self) -> None:
        """Give every taken delivery back, as a broker does when its consumer goes."""
        self._out.clear()


def _again(delivery: Delivery, count: int) -> Delivery:
    """`delivery` handed out for the `count`-th time."""
    return Delivery(
        delivery.payload,
        message_id=delivery.message_id,
        coordinates=delivery.coordinates,
        source=delivery.source,
        headers=delivery.headers,
        delivery_count=count,
        redelivered=count > 1,
        handle=delivery.handle,
    )


class MemorySink:
    """A remote system a handler calls outside the inbox transaction (an HTTP API, a mailer, a payment service).

    It keeps every call in `calls`; `effects` counts what it did per key. Given an `idempotency_key`, it acts once
    per key as such an API does (a repeated call is answered, not applied): pass `tx.idempotency_key` in lease mode.
    """

    def __init__(self) -> None:
        """No call yet."""
        self.calls: list[tuple[str, bytes, str | None]] = []
        self.effects: Counter[str] = Counter()
        self._applied: set[str] = set()

    def send(self, key: str, payload: bytes = b"", *, idempotency_key: str | None = None) -> bool:
        """Act on `payload` for `key`; False when `idempotency_key` was seen before and nothing happened."""
        self.calls.append((key, payload, idempotency_key))
        if idempotency_key is not None:
            if idempotency_key in self._applied:
                return False
            self._applied.add(idempotency_key)
        self.effects[key] += 1
        return True
