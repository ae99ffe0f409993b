"""One batch on the inbox side: the handler that creates the invoices, and the bookkeeping before its commit.

`Batch.create` is the inbox handler (new interchanges only); `Batch.record` runs last in the same transaction with
every outcome (`process_batch(before_commit=...)`): it notes what became of each item, parks rejected payloads and
adds every counter, so the journal rows, the invoices and the counts commit together or not at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from edinbox._message import Message, Outcome
from edinbox._plan import Key
from edinbox._records import Tx
from edinbox.hub._accounting import Accounting
from edinbox.hub._config import BYPASS, INBOX
from edinbox.hub._plan import REJECT, Item
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
    """The inbox side of one batch: the handler that creates invoices, and the bookkeeping that records outcomes."""

    def __init__(self, work: Sequence[Work], *, accounting: Accounting, consumer: str) -> None:
        """The inbox items of `work`, for `accounting` and the counters of `consumer`."""
        self.work = work
        self.accounting = accounting
        self.consumer = consumer
        self.entries = [(w, i, item) for w in work for i, item in enumerate(w.items) if item.route == INBOX]
        self.by_key: dict[Key, Item] = {}
        for _, _, item in self.entries:
            if item.message is not None:
                self.by_key.setdefault(item.message.key, item)
        self.messages = [item.message for _, _, item in self.entries if item.message is not None]
        self.effects: dict[Key, str] = {}
        self.counted: set[Key] = set()

    async def create(self, tx: Tx, messages: Sequence[Message]) -> None:
        """The inbox handler: create each new interchange's invoices through the accounting sink."""
        for message in messages:
            item = self.by_key[message.key]
            invoices = item.interchange.invoices() if item.interchange is not None else []
            created = await self.accounting.create(tx, message, invoices)
            self.effects[message.key] = "resent" if created.existing and not created.created else "processed"

    async def create_one(self, tx: Tx, message: Message) -> None:
        """The handler for one message settled alone: create, and count it in its own transaction when there is one."""
        await self.create(tx, [message])
        if tx.unit is not None:
            await count(tx, consumer=self.consumer, counts={self.effects[message.key]: 1})
            self.counted.add(message.key)

    async def record(self, tx: Tx, outcomes: Sequence[Outcome | None]) -> None:
        """Before the commit: note each item's outcome, park rejected payloads, add the counters."""
        for (w, i, item), outcome in zip(self.entries, outcomes, strict=True):
            if outcome is None:
                w.unsettled = True
            elif outcome is Outcome.PROCESSED and item.message is not None:
                w.outcomes[i] = self.effects.get(item.message.key, "processed")
            else:
                w.outcomes[i] = outcome.value
        counts: Counter[str] = Counter()
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
                if settled is not None and not (item.message is not None and item.message.key in self.counted):
                    counts[settled] += 1
        await count(tx, consumer=self.consumer, counts=counts)
