"""The inbox side of one batch: the handler that creates invoices, and the bookkeeping that records outcomes.

A batch settles in one transaction (journal rows, invoices, parked payloads, counters) unless its handler fails;
the inbox then settles each message alone (`process_batch(..., isolate=True)`), so a failure is charged only to the
message that caused it. Those lone transactions count their own `processed` / `resent` outcome, so an effect and
its counter commit together on either path; everything else is recorded after, in one transaction.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from edinbox import AsyncTransaction
from edinbox._errors import DataError
from edinbox._message import Message, Outcome
from edinbox._plan import Key
from edinbox.hub import partners
from edinbox.hub.config import Route
from edinbox.hub.database import SHARDS, Parked, count, park, record_findings
from edinbox.hub.deliveries._items import HEAD, Item, cut, refused
from edinbox.hub.deliveries._spans import Spans
from edinbox.hub.partners import COUNTER, REJECTION, Acknowledger, Arrival, Pending, Refusal, delivery_id, noticed
from edinbox.hub.sinks import Accounting, Created, keep_remote
from edinbox.loop import ACK, HANDLED, NACK_DELAY, DeliveryOutcome, HandBack, Lifecycle, Stage, Verdict
from edinbox.sources import Delivery

__all__ = ["Batch", "Work", "hand_back_of"]


@dataclass(slots=True)
class Work:
    """One delivery of the batch and what became of its items."""

    delivery: Delivery
    items: list[Item]
    outcomes: dict[int, DeliveryOutcome] = field(default_factory=dict)
    unsettled: bool = False
    delay: float | None = None
    """Seconds before the delivery may come back: the longest wait of its messages for their retry time."""
    lifecycle: Lifecycle = field(default_factory=lambda: Lifecycle(Stage.PLANNED))
    """Where the delivery is: planned when its work is made, then settled and handed back (`edinbox.loop.Stage`)."""


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
        self.entries = [(w, i, item) for w in work for i, item in enumerate(w.items) if item.route == Route.INBOX]
        self.by_key: dict[Key, Item] = {}
        self.delivery: dict[Key, Delivery] = {}
        """The delivery whose item of a key the inbox settles (the first in the batch)."""
        for w, _, item in self.entries:
            if item.message is not None and item.message.key not in self.by_key:
                self.by_key[item.message.key] = item
                self.delivery[item.message.key] = w.delivery
        self.messages = [item.message for _, _, item in self.entries if item.message is not None]
        self.effects: dict[Key, DeliveryOutcome] = {}
        self.remote: dict[Key, Created] = {}
        """What a remote sink did with each message settled alone (lease mode), kept by `keep` once it completes."""
        self.counted: set[Key] = set()
        self.isolated = False
        """True once the batch's one handler call failed: every later call settles one message alone."""
        self.refused = False
        """The database refused to park a payload of the batch as too big (see `shrink`)."""
        self.shard = secrets.randbelow(SHARDS)
        """The counters' shard this batch adds to (`_tables.SHARDS`): other hubs' batches rarely share its rows."""

    def message_spans(self) -> list[Any] | None:
        """By position in `messages`, the span of each message's delivery (None: nothing traced)."""
        if self.spans is None or not self.spans.spans:
            return None
        position = {id(w): n for n, w in enumerate(self.work)}
        return [self.spans.spans[position[id(w)]] for w, _, item in self.entries if item.message is not None]

    async def create(self, tx: AsyncTransaction, messages: Sequence[Message]) -> None:
        """The inbox handler: create the new interchanges' invoices (read while planning) in one call of the sink, and
        write their acknowledgments."""
        # one message: maybe settled alone (isolated after a failure), its count committed with its effect
        alone = self.isolated or len(messages) == 1
        started = time.time_ns()
        try:
            created = await self.accounting.create_many(tx, [(m, self.by_key[m.key].invoices) for m in messages])
            for message, done in zip(messages, created, strict=True):
                self.effects[message.key] = _effect(done)
            await self.answer(tx, messages)
        except Exception:
            self.isolated = True
            raise
        finally:
            if self.spans is not None:
                self.spans.handled(started, time.time_ns())
        if alone and tx.unit is not None:
            for message in messages:
                await self._count_effect(tx, message)

    async def create_one(self, tx: AsyncTransaction, message: Message) -> None:
        """The handler for one message settled alone (lease mode): create, and count it when in a transaction; its
        acknowledgments are written by `answer` in the transaction that completes it."""
        created = await self.accounting.create(tx, message, self.by_key[message.key].invoices)
        self.effects[message.key] = _effect(created)
        self.remote[message.key] = created
        if tx.unit is not None:
            await self._count_effect(tx, message)

    async def complete(self, message: Message, tx: AsyncTransaction) -> None:
        """Lease mode, in the transaction that commits `message`'s completion: the invoices the remote sink holds for
        it, with their ids (`_accounting.keep_remote`), and its acknowledgments."""
        created = self.remote.pop(message.key, None)
        if created is not None and created.remote:
            invoices = self.by_key[message.key].invoices
            await keep_remote(tx, message, invoices, created, consumer=self.consumer)
        await self.answer(tx, [message])

    async def answer(self, tx: AsyncTransaction, messages: Sequence[Message]) -> None:
        """Write the acknowledgments of processed `messages` in `tx`, and remember their deliveries when a re-send
        would be notified (so the broker's redelivery of one is not taken for a re-send)."""
        if self.acknowledger is None:
            return
        pending: list[Pending] = []
        remembered: list[tuple[Key, str]] = []
        for message in messages:
            received = self.by_key[message.key].received
            if received is None:
                continue
            answers, notifies = self.acknowledger.processed(received, key=message.key)
            pending += answers
            if notifies:
                remembered.append((message.key, delivery_id(self.delivery[message.key])))
        await self.acknowledger.remember(tx, remembered)
        await self.acknowledger.write(tx, pending)

    async def _count_effect(self, tx: AsyncTransaction, message: Message) -> None:
        await count(tx, consumer=self.consumer, counts={self.effects[message.key]: 1}, shard=self.shard)
        self.counted.add(message.key)

    async def _notices(self, tx: AsyncTransaction, w: Work, item: Item, outcome: Outcome) -> list[Pending]:
        """The notice that a delivery the partner sent is a duplicate: once per delivery, never for the broker's
        redelivery of one that was processed or notified; a delivery the broker says is its first always gets it
        (RabbitMQ cannot tell two publishes of one payload apart otherwise)."""
        if outcome not in (Outcome.DUPLICATE, Outcome.CONFLICT):
            return []
        if self.acknowledger is None or item.received is None or item.message is None:
            return []
        if not self.acknowledger.notifies(item.received):
            return []
        key = item.message.key
        first = await self.acknowledger.once(tx, key, delivery=delivery_id(w.delivery), answer="notice")
        if not first and w.delivery.delivery_count != 1:
            return []
        return self.acknowledger.pending(item.received, key=key, duplicate=True)

    async def _rejection(self, tx: AsyncTransaction, item: Item) -> list[Pending]:
        """The rejection of a parked interchange whose header identifies it: once per interchange key."""
        if self.acknowledger is None or item.received is None or item.subject is None:
            return []
        pending = self.acknowledger.pending(item.received, key=item.subject)
        if not pending or not await self.acknowledger.once(tx, item.subject, delivery=REJECTION, answer=REJECTION):
            return []
        return pending

    async def record(self, tx: AsyncTransaction, outcomes: Sequence[Outcome | None]) -> None:
        """Note each item's outcome (None: unsettled), park rejected payloads, add the counters, and write the duplicate
        notices and the rejections of parked interchanges, in `tx`."""
        notices: list[Pending] = []
        for (w, i, item), outcome in zip(self.entries, outcomes, strict=True):
            if w.items[i].route == Route.REJECT:  # its values cannot be journaled: parked below (`unjournaled`)
                continue
            if outcome is None:
                w.unsettled = True
            elif outcome is Outcome.PROCESSED and item.message is not None:
                w.outcomes[i] = self.effects.get(item.message.key, DeliveryOutcome.PROCESSED)
            else:
                w.outcomes[i] = DeliveryOutcome.of(outcome)
                notices += await self._notices(tx, w, item, outcome)
        counts: Counter[str] = Counter()
        parked: list[Parked] = []
        parked_items: list[Item] = []
        refusals: list[Refusal] = []
        already = set(self.counted)  # one processed (or resent) item per key was counted with its effect
        for w in self.work:
            for i, item in enumerate(w.items):
                if item.route == Route.BYPASS:
                    w.outcomes[i] = DeliveryOutcome.BYPASSED
                elif item.route == Route.REJECT:
                    w.outcomes[i] = DeliveryOutcome.REJECTED
                    parked.append(Parked(item.fingerprint, w.delivery.coordinates, item.reason, item.payload))
                    parked_items.append(item)
                    notices += await self._rejection(tx, item)
                    if item.refusal is not None:
                        counts[COUNTER] += 1
                        refusals.append(item.refusal)
                settled = w.outcomes.get(i)
                key = item.message.key if item.message is not None else None
                if settled in HANDLED and key in already:
                    already.discard(key)
                elif settled is not None:
                    counts[settled] += 1
        try:
            await park(tx, consumer=self.consumer, parked=parked)
        except DataError:
            self.refused = True
            raise
        await count(tx, consumer=self.consumer, counts=counts, shard=self.shard)
        parked_numbers = _parked_numbers(parked_items)
        await partners.record(tx, consumer=self.consumer, accepted=self._arrivals(), parked=parked_numbers)
        await record_findings(tx, consumer=self.consumer, found=self._validated())
        if self.acknowledger is not None:
            await self.acknowledger.write(tx, notices)
        for one in refusals:
            noticed(self.consumer, one)
        self.recorded_at = time.time_ns()

    def _validated(self) -> list[tuple[Key, tuple[int, str]]]:
        """What validation found in the batch's settled or parked interchanges, by key (the first of a key kept), in
        key order (hubs inserting the same keys lock them in one order)."""
        found: dict[Key, tuple[int, str]] = {}
        for w in self.work:
            for i, item in enumerate(w.items):
                if item.validation is not None and item.message is not None and w.outcomes.get(i) is not None:
                    found.setdefault(item.message.key, item.validation)
        return sorted(found.items())

    def _arrivals(self) -> list[Arrival]:
        """The control numbers of the batch's accepted interchanges, in the order they came: those journaled (any
        outcome) or routed around the inbox, but not the broker's redelivery of one settled before (a duplicate on a
        redelivery: the partner did not send it again)."""
        found: list[Arrival] = []
        for w in self.work:
            again = w.delivery.redelivered or (w.delivery.delivery_count or 1) > 1
            for i, item in enumerate(w.items):
                outcome = w.outcomes.get(i)
                if item.route == Route.REJECT or outcome is None or item.message is None:
                    continue
                if again and outcome not in HANDLED:
                    continue
                found += [Arrival(item.partner, level, number) for level, number in item.controls]
        return found

    def wait(self, message: Message, seconds: float) -> None:
        """Note that `message` waits `seconds` for its retry time: its delivery is handed back to come again then."""
        for w, _, item in self.entries:
            if item.message is message:
                w.delay = max(w.delay or 0.0, seconds)

    def unjournaled(self, message: Message, error: DataError, *, kept: str) -> None:
        """Park `message` with the rejected payloads: the journal cannot hold a value of it (`error`: a payload too
        big to keep as a conflicting copy). When its delivery is then parked whole, each of its items keeps its first
        HEAD bytes and says the whole payload is in `kept` (the source keeps it), as when planned so."""
        for w, i, item in self.entries:
            if item.message is not message:
                continue
            reason = f"it cannot be journaled: {error}"
            w.items[i] = Item(Route.REJECT, item.label, reason=reason, payload=bytes(message.payload))
            if all(other.route == Route.REJECT for other in w.items):
                alone = len(w.items) == 1  # it stands for the whole delivery
                sizes = [w.delivery.size or len(w.delivery.payload)] if alone else [len(one.payload) for one in w.items]
                w.items[:] = [cut(one, size=size, kept=kept) for one, size in zip(w.items, sizes, strict=True)]

    def shrink(self, error: DataError) -> bool:
        """After the database refused to park a payload of the batch (`error`, raised by `record`): cut the biggest
        parked payload kept whole to its first HEAD bytes, its reason saying the rest is not kept, so the batch can
        be recorded again; False (nothing cut) when `record` did not fail so, or nothing is left to cut."""
        if not self.refused:
            return False
        self.refused = False
        whole = [(len(item.payload), w, i) for w in self.work for i, item in enumerate(w.items) if _whole(item)]
        if not whole:
            return False
        _, w, i = max(whole, key=lambda found: found[0])
        w.items[i] = refused(w.items[i], error=str(error))
        return True


def _parked_numbers(items: Sequence[Item]) -> list[tuple[Arrival, str]]:
    """The control numbers of parked interchanges whose header names their sender, with the parked payload's
    fingerprint: the ledger links the gaps they leave to them. One the partner registry kept out is not a partner's."""
    found: list[tuple[Arrival, str]] = []
    for item in items:
        if item.message is not None and item.controls and item.refusal is None:
            found += [(Arrival(item.partner, level, number), item.fingerprint) for level, number in item.controls]
    return found


def _whole(item: Item) -> bool:
    """Whether `item` is parked with more than its first HEAD bytes."""
    return item.route == Route.REJECT and len(item.payload) > HEAD


def _effect(created: Created) -> DeliveryOutcome:
    """The counted outcome of a handled interchange: `resent` when every invoice of it already existed."""
    return DeliveryOutcome.RESENT if created.existing and not created.created else DeliveryOutcome.PROCESSED


def hand_back_of(w: Work) -> Verdict:
    """The delivery's hand-back: a nack when some item is unsettled, a reject when every item is parked (their
    reasons), else an ack."""
    if w.unsettled:  # back not before its messages' retry time (`Batch.wait`), and never at once
        return Verdict(HandBack.NACK, delay=max(w.delay or 0.0, NACK_DELAY))
    if _rejected(w):
        return Verdict(HandBack.REJECT, reason="; ".join(item.reason for item in w.items))
    return ACK


def _rejected(w: Work) -> bool:
    """Whether the delivery is handed back as a reject: settled, and every item of it parked."""
    return not w.unsettled and bool(w.items) and all(item.route == Route.REJECT for item in w.items)
