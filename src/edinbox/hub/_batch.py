"""The inbox side of one batch: the handler that creates invoices, and the bookkeeping that records outcomes.

A batch settles in one transaction (journal rows, invoices, parked payloads, counters) unless its handler fails;
the inbox then settles each message alone (`process_batch(..., isolate=True)`), so a failure is charged only to the
message that caused it. Those lone transactions count their own `processed` / `resent` outcome, so an effect and
its counter commit together on either path; everything else is recorded after, in one transaction.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from edinbox._message import Message, Outcome
from edinbox._plan import Key
from edinbox._records import Tx
from edinbox.hub._accounting import Accounting, Created
from edinbox.hub._acks import Acknowledger, Pending
from edinbox.hub._config import BYPASS, INBOX
from edinbox.hub._plan import REJECT, Item
from edinbox.hub._spans import Spans
from edinbox.hub._tables import count, park
from edinbox.sources import Delivery

__all__ = ["Batch", "Work"]


@dataclass(slots=True)
class Work:
    """One delivery of the batch and what became of its items."""

    delivery: Delivery
    items: list[Item]
    outcomes: dict[int, str] = field(default_factory=dict)
    unsettled: bool = False


class Batch:
    """The messages of a batch's deliveries, the handler that creates their invoices, and the bookkeeping."""

    def __init__(
        self,
        work: Sequence[Work],
        *,
        accounting: Accounting,
        consumer: str,
        acknowledger: Acknowledger | None = None,
        spans: Spans | None = None,
    ) -> None:
        """Collect the items routed through the inbox; `consumer` names the counters; `acknowledger` answers
        partners (in the same transaction as the journal rows and invoices); `spans` (the batch's trace) is told
        when the handler ran and when the bookkeeping ended (the commit follows it)."""
        self.work = work
        self.spans = spans
        self.recorded_at = 0
        """When `record` ended (nanoseconds since the epoch): the batch's commit starts then."""
        self.accounting = accounting
        self.consumer = consumer
        self.acknowledger = acknowledger
        self.entries = [(w, i, item) for w in work for i, item in enumerate(w.items) if item.route == INBOX]
        self.by_key: dict[Key, Item] = {}
        for _, _, item in self.entries:
            if item.message is not None:
                self.by_key.setdefault(item.message.key, item)
        self.messages = [item.message for _, _, item in self.entries if item.message is not None]
        self.effects: dict[Key, str] = {}
        self.counted: set[Key] = set()
        self.isolated = False
        """True once the batch's one handler call failed: every later call settles one message alone."""

    async def create(self, tx: Tx, messages: Sequence[Message]) -> None:
        """The inbox handler: create the new interchanges' invoices (read while planning) in one call of the sink."""
        alone = self.isolated
        started = time.time_ns()
        try:
            items = [self.by_key[message.key] for message in messages]
            created = await self.accounting.create_many(tx, [(m, self.by_key[m.key].invoices) for m in messages])
            pending: list[Pending] = []
            for message, item, done in zip(messages, items, created, strict=True):
                self.effects[message.key] = _effect(done)
                if self.acknowledger is not None and item.received is not None:
                    pending += self.acknowledger.pending(item.received, message=message)
            if self.acknowledger is not None:
                await self.acknowledger.write(tx, pending)
        except Exception:
            self.isolated = True
            raise
        finally:
            if self.spans is not None:
                self.spans.handled(started, time.time_ns())
        if alone and tx.unit is not None:
            for message in messages:
                await self._count_effect(tx, message)

    async def create_one(self, tx: Tx, message: Message) -> None:
        """The handler for one message settled alone (lease mode): create, and count it when in a transaction."""
        created = await self.accounting.create(tx, message, self.by_key[message.key].invoices)
        self.effects[message.key] = _effect(created)
        if tx.unit is not None:
            await self._count_effect(tx, message)

    async def _count_effect(self, tx: Tx, message: Message) -> None:
        await count(tx, consumer=self.consumer, counts={self.effects[message.key]: 1})
        self.counted.add(message.key)

    def _notices(self, w: Work, item: Item, outcome: Outcome) -> list[Pending]:
        """The notice that a delivery the partner sent is a duplicate (not the broker's own redelivery of one)."""
        if outcome not in (Outcome.DUPLICATE, Outcome.CONFLICT) or w.delivery.redelivered:
            return []
        if self.acknowledger is None or item.received is None or item.message is None:
            return []
        return self.acknowledger.pending(item.received, message=item.message, duplicate=True)

    async def record(self, tx: Tx, outcomes: Sequence[Outcome | None]) -> None:
        """Note each item's outcome (None: unsettled), park rejected payloads, add the counters, and write the duplicate
        notices, in `tx`."""
        notices: list[Pending] = []
        for (w, i, item), outcome in zip(self.entries, outcomes, strict=True):
            if outcome is None:
                w.unsettled = True
            elif outcome is Outcome.PROCESSED and item.message is not None:
                w.outcomes[i] = self.effects.get(item.message.key, "processed")
            else:
                w.outcomes[i] = outcome.value
                notices += self._notices(w, item, outcome)
        counts: Counter[str] = Counter()
        already = set(self.counted)  # one processed (or resent) item per key was counted with its effect
        for w in self.work:
            for i, item in enumerate(w.items):
                if item.route == BYPASS:
                    w.outcomes[i] = "bypassed"
                elif item.route == REJECT:
                    w.outcomes[i] = "rejected"
                    await park(
                        tx,
                        consumer=self.consumer,
                        fingerprint=item.fingerprint,
                        delivery=w.delivery.coordinates,
                        reason=item.reason,
                        payload=item.payload,
                    )
                settled = w.outcomes.get(i)
                key = item.message.key if item.message is not None else None
                if settled in ("processed", "resent") and key in already:
                    already.discard(key)
                elif settled is not None:
                    counts[settled] += 1
        await count(tx, consumer=self.consumer, counts=counts)
        if self.acknowledger is not None:
            await self.acknowledger.write(tx, notices)
        self.recorded_at = time.time_ns()


def _effect(created: Created) -> str:
    """The counted outcome of a handled interchange: `resent` when every invoice of it already existed."""
    return "resent" if created.existing and not created.created else "processed"
