"""The hub: the library's consumer loop (`edinbox.loop.drive`) around a step that plans each delivery into EDI items.

The loop (waiting out outages, stopping, the relay and the purge beside it, progress beats, handing deliveries back)
is `edinbox.loop`'s, the same that runs `edinbox.consume`; what the hub plugs in is its step (a `Stepper`).

Per batch: plan each delivery (parse, key, route); settle the inbox items with `process_batch`, in one transaction:
the handler creates the invoices through the accounting sink, and the bookkeeping (parked payloads,
every outcome counter) runs before the same commit (see `_batch`); only then ack, reject or nack each delivery.
A crash anywhere before the ack redelivers the batch, and the journal turns every copy into a duplicate.
A TransientError (database, source, accounting API) leaves the batch unsettled, nacked, charged nothing, and is
waited out (`edinbox.loop.Outage`); only a configuration error, or `give_up_after`, ends `run`.

On a source that `receives_ahead` (the spool), the next batch is claimed and planned while the database works on the
current batch's transaction (a task that gives way to it after every few claims and every `_TURN` of planning); the
next step starts from it. It is only claimed: nothing of it is settled before its own step, and a step that fails, a
stop and the hub's end hand it back unsettled. `progress` refreshes its claims with the batch in hand's, so a batch
slower than the spool's `claim_timeout` leaves neither to another hub.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import DataError, InboxError, NotSettledError, RetryLater, TransientError
from edinbox._message import Message, Outcome
from edinbox.hub import partners
from edinbox.hub.config import LOGGER, FaultPoint, HubConfig, Route, log_event, settled
from edinbox.hub.database import Parked, Purger, park_reasons, purges
from edinbox.hub.deliveries._batch import Batch, Work, hand_back_of
from edinbox.hub.deliveries._items import Item, cut, kept_at, kept_instead, plan
from edinbox.hub.deliveries._spans import Spans
from edinbox.hub.partners import Acknowledger
from edinbox.hub.relay import RelayProcess, apart
from edinbox.hub.relay import beside as relay_beside
from edinbox.hub.sinks import Accounting
from edinbox.loop import (
    NACK_DELAY,
    DeliveryOutcome,
    Gauges,
    Indexer,
    Move,
    Outage,
    Relay,
    Verdict,
    beside,
    drive,
    hand_back_each,
    move_all,
    nack_each,
    not_the_message,
    progress,
    reached,
    wait_beside,
)
from edinbox.sources import Delivery, Source, receive_until

if TYPE_CHECKING:
    from edinbox.metrics import Metrics

__all__ = ["Hub"]

_T = TypeVar("_T")

_PLAN_HERE = 16 * 1024
"""Payload bytes a batch may hold to be planned on the event loop's thread (about 10 ms of parsing at most): handing a
small batch to a worker thread and back costs more than the loop's pause. A bigger batch is planned in a worker
thread, so the source's connection and `progress` keep beating meanwhile."""
_REFRESH = 5.0
"""Seconds between two refreshes of the journal gauges (rows by status, oldest ages) while running."""
_AHEAD_CLAIMS = 10
"""Deliveries the next batch claims at a time while the current one settles, before giving way to it."""
_TURN = 0.0005
"""Seconds the next batch's planning runs before giving way to the current batch's transaction: a few deliveries
(each turn of the event loop costs a few microseconds, about 2 % of a small delivery's planning)."""


class Hub:
    """Moves deliveries from a source through the inbox into accounting, acking only after the commit."""

    def __init__(
        self,
        config: HubConfig,
        *,
        inbox: AsyncInbox,
        source: Source,
        accounting: Accounting,
        fault: FaultPoint | None = None,
        outage: Outage | None = None,
        stop: asyncio.Event | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """Assemble a hub from open parts (see `open_hub` for the usual way); setting `stop` stops `run`;
        `metrics` (edinbox.metrics) counts what settles and keeps the journal gauges."""
        self.config = config
        self.inbox = inbox
        self.source = source
        self.accounting = accounting
        self.fault = fault
        self.totals: Counter[str] = Counter()
        self.stop = stop or asyncio.Event()
        self.logger = logging.getLogger(LOGGER)
        self.outage = outage or Outage(self.logger, give_up_after=config.give_up_after)
        self.acknowledger = Acknowledger(config) if config.acknowledges else None
        self._relay_beside: Relay | RelayProcess | None = None
        """The relay running beside the hub (`config.relay`), woken after each batch that may have published."""
        self.metrics = metrics
        self.gauges = Gauges(metrics, inbox, logger=self.logger)
        """The journal gauges of `metrics`, refreshed every `_REFRESH` seconds while running."""
        self.ledger = partners.Gauges(metrics, inbox, config)
        self.indexer = Indexer(inbox, outage=self.outage, enabled=config.keep_payloads)
        """Indexes the kept payloads for search between batches (`keep_payloads`)."""
        self._ahead: asyncio.Future[tuple[list[Delivery], list[list[Item]]]] | None = None
        """The next batch, claimed and planned while the current one settles (`receives_ahead` sources only)."""
        self._claimed: list[Delivery] = []
        """The deliveries the next batch claimed so far, until a step takes them: `progress` beats them too."""

    async def run(self, *, once: bool = False) -> Counter[str]:
        """Settle deliveries until `stop` is set (SIGTERM) or, with `once`, until the source stays idle.

        Outages of the database or the source are waited out (see `Outage`); the last TransientError propagates
        only after `give_up_after`. On `stop`, the batch in hand is finished; a wait for a dependency is not.
        With `config.relay` (the default) the outbox relay runs beside it (totals `relayed`, `outbox_parked`), in a
        process of its own when the hub acknowledges (an agreement has an outbound destination) and the database is
        not in memory (`RelayProcess`), else in this one (only rows other writers left: an idle relay costs a
        claim now and then, a process costs its start); with `once` the hub drains the outbox itself last. With
        `config.purge_every` the journal is purged beside it too (`Purger`: at start, then once per period, on a
        connection of its own).
        """
        alongside = asyncio.Event()
        tasks: list[asyncio.Future[None]] = []
        if self.config.relay:
            tasks.append(beside(self._relay(alongside), stop=self.stop))
        if purges(self.config):
            tasks.append(beside(self._purger(alongside), stop=self.stop))
        try:
            await drive(
                self,
                outage=self.outage,
                stop=self.stop,
                once=once,
                idle_timeout=self.config.idle_timeout,
                proves=reached,
                after=self._after,
            )
            await self.refresh()
            if once and not self.stop.is_set():
                await self.indexer.finish(self.stop)
        finally:
            alongside.set()
            await wait_beside(tasks)  # the error that stopped the relay or the purge (and with it the hub) is raised
        if self.config.relay and once and not self.stop.is_set():
            await self._relay(self.stop, once=True)  # drain what the last batches published
        return self.totals

    async def _purger(self, stop: asyncio.Event) -> None:
        """The periodic purge (`purge_every`) beside the batch loop, with a journal of its own, until `stop`."""
        await Purger(self.config, stop=stop, metrics=self.metrics).run()

    async def _relay(self, stop: asyncio.Event, *, once: bool = False) -> None:
        """Relay the outbox beside the hub (acknowledgments to partners) until `stop`, or with `once` here until it
        is drained; add its totals."""
        relay: Relay | RelayProcess
        if not once and self.acknowledger is not None and apart(self.config):
            relay = RelayProcess(self.config, stop=stop, fault=self.fault, metrics=self.metrics)
        else:
            patience = self.outage.give_up_after
            relay = relay_beside(self.inbox, self.config, patience, stop=stop, fault=self.fault)
        self._relay_beside = relay
        try:
            totals = await (relay.run(once=once) if isinstance(relay, Relay) else relay.run())
        finally:
            self._relay_beside = None
        named = (
            ("relayed", totals["sent"]),
            ("outbox_parked", totals["parked"]),
            ("relay_restarts", totals["restarts"]),
        )
        for name, total in named:
            if total:
                self.totals[name] += total

    async def _after(self, handled: int) -> None:
        """After each step: wake the relay when the batch's acknowledgments are committed, refresh the gauges, index
        the kept payloads when idle (`Indexer`)."""
        if handled and self._relay_beside is not None and self.acknowledger is not None:
            self._relay_beside.wake()  # the batch's acknowledgments are committed: send them now
        await self.refresh(every=_REFRESH)
        await self.indexer.step(handled)

    async def refresh(self, *, every: float = 0.0) -> None:
        """Set the journal gauges from the database, when `every` seconds have passed since the last time (see
        `edinbox.loop.Gauges`: an outage leaves them as they were, in one `gauges-stale` line), and the ledger's
        gauges once a minute (every time when `every` is 0)."""
        await self.gauges.refresh(every=every)
        await self.ledger.refresh(force=not every)

    async def step(self) -> int:
        """Receive one batch (or take the one received ahead) and settle it; return how many deliveries it had."""
        deliveries: list[Delivery] = []
        planned: list[list[Item]] = []
        async with progress(self.source, lambda: [*deliveries, *self._claimed], logger=self.logger):
            if self._ahead is not None:
                ahead, self._ahead = self._ahead, None
                deliveries, planned = await ahead  # beaten meanwhile as `_claimed`
                self._claimed = []
            if not deliveries:
                received = await receive_until(
                    self.source, stop=self.stop, max_messages=self.config.batch_size, timeout=self.config.poll_timeout
                )
                deliveries = list(received)
            if not deliveries:
                return 0
            started = time.monotonic()
            spans = Spans(deliveries, consumer=self.config.consumer)
            rest = deliveries[len(planned) :]
            if sum(len(d.payload) for d in rest) <= _PLAN_HERE:
                plans = planned + [self._plan(d) for d in rest]
            else:
                plans = planned + await asyncio.to_thread(lambda: [self._plan(d) for d in rest])
            work = [Work(d, items) for d, items in zip(deliveries, plans, strict=True)]
            if self.source.receives_ahead:
                self._claimed = []
                self._ahead = asyncio.ensure_future(self._receive_ahead(self._claimed))
            try:
                await self._settle(work, spans)
                move_all((w.lifecycle for w in work), Move.SETTLE)
            except NotSettledError:  # a live lease elsewhere: not an outage; the deliveries come back later
                await self._release(work)
                return len(work)
            except TransientError:  # a dependency failed: nothing is settled or charged, everything comes back
                await self._release(work)
                await self.give_back()
                raise
            except BaseException:
                await self.give_back()
                raise
        if self.fault is not None:
            self.fault.committed(partial(self._killed, work))
        elapsed = (time.monotonic() - started) * 1000
        if self.metrics is not None:
            self.metrics.batch(consumer=self.config.consumer, size=len(work), seconds=elapsed / 1000)
        for index, w in enumerate(work):
            spans.finish(index, w.delivery, w.items, w.outcomes)
        verdicts = [hand_back_of(w) for w in work]
        for w, verdict in zip(work, verdicts, strict=True):  # before the source is told anything
            w.lifecycle.check(Move.of(verdict.hand_back))
        lost = await hand_back_each(
            self.source,
            [(w.delivery, verdict) for w, verdict in zip(work, verdicts, strict=True)],
            done=lambda index, handed: self._done(work[index], verdicts[index], handed, elapsed),
            kept=lambda index, instead: self._kept_instead(work[index], instead),
        )
        if lost is not None:  # the batch is committed and logged; the source is down: the outage loop waits for it
            await self.give_back()
            raise lost
        return len(work)

    async def _receive_ahead(self, deliveries: list[Delivery]) -> tuple[list[Delivery], list[list[Item]]]:
        """Claim the next batch into `deliveries` a few at a time (`progress` beats them from there), then plan it,
        giving way to the current batch's transaction after each `_TURN` of planning; a delivery too big to plan on
        the loop (`_PLAN_HERE`) and those after it are left for the step to plan. A source failure after some claims
        returns those (the step raises it)."""
        while len(deliveries) < self.config.batch_size:
            wanted = min(_AHEAD_CLAIMS, self.config.batch_size - len(deliveries))
            try:
                got = await self.source.receive(max_messages=wanted, timeout=0.0)
            except TransientError:
                if not deliveries:
                    raise
                break
            if not got:
                break
            deliveries += got
            await asyncio.sleep(0)
        plans: list[list[Item]] = []
        turn = time.monotonic() + _TURN
        for delivery in deliveries:
            if len(delivery.payload) > _PLAN_HERE:
                break
            plans.append(self._plan(delivery))
            if time.monotonic() >= turn:
                await asyncio.sleep(0)
                turn = time.monotonic() + _TURN
        return deliveries, plans

    async def give_back(self) -> None:
        """Hand the batch received ahead back to the source unsettled (at a stop, the hub's end, a failed step)."""
        if self._ahead is None:
            return
        ahead, self._ahead = self._ahead, None
        try:
            deliveries, _ = await ahead
        except TransientError:
            return  # nothing was claimed
        finally:
            self._claimed = []
        await self._nack(deliveries)

    def _killed(self, work: Sequence[Work]) -> None:
        """The fault point's last words: one `killed` line per delivery the commit settled, with how many of its
        items it settled; no `settled` line follows, and the redelivery's delivery count also counts the nacks."""
        for w in work:
            if w.outcomes:
                fields = {"delivery": w.delivery.coordinates, "settled": len(w.outcomes)}
                log_event(self.logger, logging.WARNING, "killed", fields)

    async def _release(self, work: Sequence[Work]) -> None:
        """Give unsettled deliveries back to the source, each not before `NACK_DELAY`."""
        move_all((w.lifecycle for w in work), Move.GIVE_BACK)
        await self._nack([w.delivery for w in work], delay=NACK_DELAY)

    async def _nack(self, deliveries: Sequence[Delivery], *, delay: float | None = None) -> None:
        """Nack each delivery (`edinbox.loop.nack_each`: a failing nack is one `nack-failed` line, never an error)."""
        await nack_each(self.source, deliveries, delay=delay, logger=self.logger)

    def _plan(self, delivery: Delivery) -> list[Item]:
        """Plan a delivery; a parser failure parks it instead of crashing the hub on every redelivery."""
        kept = kept_at(self.source)
        try:
            return plan(delivery, self.config, kept=kept, lines=self.accounting.needs_lines)
        except Exception as exc:
            reason = f"the EDI parser failed on this payload: {type(exc).__name__}: {str(exc)[:500]}"
            item = Item(Route.REJECT, delivery.coordinates, reason=reason, payload=delivery.payload)
            return [cut(item, size=delivery.size or len(delivery.payload), kept=kept)]

    async def _settle(self, work: Sequence[Work], spans: Spans) -> None:
        """Settle the batch: its journal rows, invoices, parked payloads and counters in one transaction.

        Copies of one key in one batch: the inbox settles the first, the others are duplicates. A handler failure
        rolls the batch back; the inbox then settles it message by message, so the failure is charged to its
        message alone (see `_process`). Lease mode settles each message alone from the start, its acknowledgments
        written in the transaction that commits its completion (`on_complete`).
        """
        batch = Batch(
            work, accounting=self.accounting, consumer=self.config.consumer, acknowledger=self.acknowledger, spans=spans
        )
        if not self.accounting.lease:
            await self._process(batch)
            if batch.recorded_at:
                spans.committed(batch.recorded_at)
            return
        lease = self.config.lease
        outcomes: list[Outcome | None] = []
        for m in batch.messages:
            if self.stop.is_set():  # a stop: the effect under way is finished, those not begun go back unsettled
                outcomes.append(None)
                continue
            done = await self._process_one(
                m, batch.create_one, lease=lease, on_complete=partial(batch.complete, m), batch=batch
            )
            outcomes.append(done)
        await _recorded(batch, lambda: self.inbox.transaction(lambda tx: batch.record(tx, outcomes)))

    async def _process(self, batch: Batch) -> None:
        """Settle the batch in one transaction, or, after a handler failure, each message alone.

        Per message: an Outcome settles it (DEAD: a permanent data error the inbox parked, counted as dead); the
        handler's own exception or NotSettledError leaves only its delivery unsettled (nacked); a DataError (a value
        of it the journal cannot hold: a conflicting copy too big to keep) parks it with the rejected payloads; any
        other TransientError (a StoreError stops the isolation) makes the whole step transient: it is raised, every
        delivery of the batch is nacked, and the outage loop waits. A ConfigurationError or SchemaError is raised
        too: the operator's to fix, never a message's.
        """
        results = await _recorded(
            batch,
            lambda: self.inbox.process_batch(
                batch.messages, batch.create, isolate=True, before_commit=batch.record, spans=batch.message_spans()
            ),
        )
        if batch.recorded_at:
            return  # settled together: `record` ran in the batch's transaction
        outcomes: list[Outcome | None] = []
        for message, result in zip(batch.messages, results, strict=True):
            if isinstance(result, Exception) and not_the_message(result):
                raise result
            if isinstance(result, DataError):  # a value of it the journal cannot hold: parked instead
                batch.unjournaled(message, result, kept=kept_at(self.source))
                outcomes.append(None)
            elif isinstance(result, Exception):
                self._not_settled(message, result, batch=batch)
                outcomes.append(None)
            else:
                outcomes.append(result)
        await _recorded(batch, lambda: self.inbox.transaction(lambda tx: batch.record(tx, outcomes)))

    async def _process_one(
        self,
        message: Message,
        handler: Any,
        *,
        lease: timedelta | None = None,
        on_complete: Any = None,
        batch: Batch | None = None,
    ) -> Outcome | None:
        """Settle one message on its own; None when it stays unsettled: its handler failed (the attempt is
        recorded) or a live lease holds it elsewhere. Only a TransientError or a configuration error is raised.
        `on_complete(tx)` runs in the transaction that commits its completion (its acknowledgments)."""
        try:
            if lease is None:
                return await self.inbox.process(message, handler, on_complete=on_complete)
            return await self.inbox.process(message, handler, lease=lease, on_complete=on_complete)
        except NotSettledError as exc:
            self._not_settled(message, exc, batch=batch)
            return None
        except InboxError:
            raise
        except Exception as exc:
            self._not_settled(message, exc)
            return None

    def _not_settled(self, message: Message, error: Exception, *, batch: Batch | None = None) -> None:
        key = f"{message.source}/{message.message_id}"
        if isinstance(error, RetryLater):  # it failed before: its delivery comes back at its retry time
            if batch is not None:
                batch.wait(message, error.delay.total_seconds())
            fields = {"key": key, "retry_at": error.retry_at.isoformat()}
            log_event(self.logger, logging.INFO, "waiting", fields)
            return
        log_event(self.logger, logging.WARNING, "attempt-failed", {"key": key, "error": error})

    async def _kept_instead(self, w: Work, instead: str) -> None:
        """The source kept the rejected delivery's whole payload in `instead`, not where its rows' reasons say (a
        dead letter too large for its topic, produced without the payload): the reason of each row cut to its first
        bytes says so, in the rejected table and in the `settled` line. A database failure here leaves the rows as
        they were, in one warning line (the delivery is settled: nothing comes back)."""
        kept = kept_at(self.source)
        items = [kept_instead(item, kept=kept, instead=instead) for item in w.items]
        parked = [
            Parked(new.fingerprint, w.delivery.coordinates, new.reason, new.payload)
            for old, new in zip(w.items, items, strict=True)
            if new is not old
        ]
        if not parked:
            return
        w.items[:] = items
        try:
            await self.inbox.transaction(lambda tx: park_reasons(tx, consumer=self.config.consumer, parked=parked))
        except TransientError as exc:
            fields = {"delivery": w.delivery.coordinates, "kept": instead, "error": exc}
            log_event(self.logger, logging.WARNING, "reason-not-updated", fields)

    def _done(self, w: Work, verdict: Verdict, handed: bool, elapsed: float) -> None:
        """The delivery's hand-back is over (`handed`: it was handed back): move its lifecycle, count and log it."""
        w.lifecycle.handed_back(verdict.hand_back, handed=handed)
        self._count(w, elapsed)

    def _count(self, w: Work, elapsed: float) -> None:
        """Log and count the delivery's committed outcomes (after its hand-back, or its skip after a failed one)."""
        delivery = w.delivery
        logging_settled = self.logger.isEnabledFor(logging.INFO)
        for i, item in enumerate(w.items):
            outcome = w.outcomes.get(i, DeliveryOutcome.NOT_SETTLED)
            self.totals[outcome] += 1
            if self.metrics is not None and i in w.outcomes:
                self.metrics.settled(
                    outcome,
                    consumer=self.config.consumer,
                    # as agreements name it ("ZZ:ACME CO"), not as the source quotes it: only those are labels
                    partner=item.partner if item.message is not None else "",
                    message_type=item.types[0] if item.types else "",
                )
            if not logging_settled:  # the line would be dropped: do not build it
                continue
            fields: dict[str, Any] = {"key": item.label, "outcome": outcome, "ms": round(elapsed, 1)}
            fields["delivery"] = delivery.coordinates
            if delivery.delivery_count and delivery.delivery_count > 1:
                fields["delivery_count"] = delivery.delivery_count
            if item.types:
                fields["types"] = ",".join(item.types)
            if item.reason:
                fields["reason"] = item.reason
            settled(self.logger, fields)


async def _recorded(batch: Batch, settle: Callable[[], Awaitable[_T]]) -> _T:
    """Run `settle` (a transaction that ends with `batch.record`) again while the database refuses to park one of the
    batch's payloads whole as too big (a DataError: MariaDB's max_allowed_packet), each time with the biggest cut to
    its first bytes (`Batch.shrink`): that parked item alone pays, with the part of its payload not kept; the
    transaction rolled back, so its batch-mates are settled as if it had never been."""
    while True:
        try:
            return await settle()
        except DataError as exc:
            if not batch.shrink(exc):
                raise
