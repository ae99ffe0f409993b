"""`AsyncConsumer`: a handler run through the inbox for every message a source delivers, with the hub's qualities.

Per batch: receive up to `batch_size` deliveries; key each from the delivery (the producer's id: AMQP `message_id`,
`Nats-Msg-Id`, a Kafka header, a stream-entry field, a spool file's name; `key=` picks another), never from broker
coordinates alone; settle the batch with `process_batch(..., isolate=True)`: one transaction, the handler called for
each new message; after a handler failure each message alone, so only the failing one pays; then ack, nack or
reject each delivery (`_hand_back`). A delivery that can never be keyed (no producer id, a key over the limits, a
payload the source refused) is rejected at once with its reason: to the broker's dead letters or the spool's
rejected folder. An outage of the database or the broker leaves the batch unsettled, nacked, charged nothing, and is
waited out with backoff (`Outage`); a slow batch beats `in_progress` (`progress`); the outbox relay can run beside
it (`relay=True`); SIGTERM or SIGINT stops it after the batch in hand (at once while it waits for a dependency).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from edinbox._errors import DataError, NotSettledError, TransientError
from edinbox._logs import LOGGER, log_event, settled
from edinbox._message import Message
from edinbox._retry import Retry
from edinbox.loop._drive import beside, drive, wait_beside
from edinbox.loop._gauges import Gauges
from edinbox.loop._hand_back import (
    ACK,
    NACK_DELAY,
    HandBack,
    Verdict,
    hand_back_each,
    nack_each,
    not_the_message,
    verdict,
)
from edinbox.loop._index import Indexer
from edinbox.loop._journal import Handler, Journal, open_journal
from edinbox.loop._lifecycle import Lifecycle, Move, move_all
from edinbox.loop._outage import Outage, Stopped
from edinbox.loop._outcome import DeliveryOutcome
from edinbox.loop._progress import progress
from edinbox.loop._relay import Relay
from edinbox.sources import Delivery, Source, open_source, receive_until

if TYPE_CHECKING:
    from edinbox.metrics import Metrics

__all__ = ["AsyncConsumer"]

_REFRESH = 5.0
"""Seconds between two refreshes of the journal gauges (with `metrics`)."""


@dataclass(slots=True)
class _Work:
    """One delivery of the batch, its message (None: it cannot be keyed) and what becomes of it."""

    delivery: Delivery
    message: Message | None
    verdict: Verdict = ACK
    outcome: DeliveryOutcome = DeliveryOutcome.NOT_SETTLED
    lifecycle: Lifecycle = field(default_factory=Lifecycle)


class AsyncConsumer:
    """Runs `handler(tx, message)` once per new message a source delivers, until stopped."""

    def __init__(
        self,
        source_url: str,
        handler: Handler,
        *,
        db: Any,
        consumer: str,
        table: str = "inbox",
        max_attempts: int = 5,
        retry: Retry | None = None,
        dead_letters: str | None = None,
        horizon: timedelta | None = None,
        batch_size: int = 100,
        poll_timeout: float = 1.0,
        key: Callable[[Delivery], str | None] | None = None,
        relay: bool = False,
        metrics: Metrics | None = None,
        give_up_after: timedelta | None = None,
        keep_payloads: bool = False,
        payload_cap: int | None = None,
    ) -> None:
        """Consume `source_url` (`dir://`, `amqp://`, `nats://`, `redis://`, `kafka://`, as `edinbox run --source`)
        into the journal `db` (a URL, a pool or an engine, as `AsyncInbox`) of `consumer` in `table`.

        `handler(tx, message)` is a coroutine function (run on an `AsyncInbox`) or a plain function (run on an
        `Inbox` in a worker thread: `tx.connection` is then the sync driver's). `max_attempts`: handler failures of
        one message before it is parked dead, each waited for as `retry` says (the journal's `Retry`; None: its
        defaults). `dead_letters`: a broker destination URL that also gets each message parked dead, with why
        (the journal's; sent by the relay, with `relay` or `edinbox relay`). `horizon`: the journal's
        (`AsyncInbox`). `batch_size` deliveries per transaction, waiting at most `poll_timeout` seconds for the
        first. `key(delivery)` returns the message id (default: `delivery.message_id`, the producer's id).
        `relay`: run the outbox relay beside the loop (an outbox row to the source's broker gets its password from
        `source_url`).
        `metrics` (edinbox.metrics): count what settles, observe batches and keep the journal gauges.
        `give_up_after`: end `run` with the last TransientError after an outage this long (None: wait for ever).
        `keep_payloads`, `payload_cap`: keep each processed message's payload (the message store, as `AsyncInbox`);
        the loop then indexes them for search when the source is idle (`Indexer`).
        """
        self.source_url = source_url
        self.handler = handler
        self.db = db
        self.consumer = consumer
        self.table = table
        self.max_attempts = max_attempts
        self.retry = retry
        self.dead_letters = dead_letters
        self.horizon = horizon
        self.batch_size = batch_size
        self.poll_timeout = poll_timeout
        self.key = key or _producer_id
        self.keep_payloads = keep_payloads
        self.payload_cap = payload_cap
        self.relay = relay
        self.metrics = metrics
        self.give_up_after = give_up_after
        self.logger = logging.getLogger(LOGGER)
        self.totals: Counter[str] = Counter()
        """Deliveries by outcome (processed, duplicate, conflict, dead, rejected, not-settled), and `relayed`."""
        self.source: Source | None = None
        self._journal: Journal | None = None
        self._relay: Relay | None = None
        self._gauges: Gauges | None = None
        self._indexer: Indexer | None = None
        self._stop = asyncio.Event()  # the run's stop: an idle receive ends soon after it is set

    async def run(
        self, *, stop: asyncio.Event | None = None, once: bool = False, idle_timeout: float = 1.0
    ) -> Counter[str]:
        """Consume until `stop` is set (by default SIGTERM or SIGINT sets it, in the main thread) or, with `once`,
        until the source stayed idle `idle_timeout` seconds; return the totals.

        Nothing here runs DDL: the journal must exist (`Inbox.create_schema()`, `edinbox init` or a migration).
        While the database or the broker is down, at start too, it waits (see `Outage`); only a configuration
        error (or `give_up_after`) ends it with an exception.
        """
        with _signals(stop) as stopping:
            self._stop = stopping
            journal = open_journal(
                self.db,
                self.handler,
                consumer=self.consumer,
                table=self.table,
                max_attempts=self.max_attempts,
                retry=self.retry,
                dead_letters=self.dead_letters,
                horizon=self.horizon,
                keep_payloads=self.keep_payloads,
                payload_cap=self.payload_cap,
            )
            self._journal = journal
            self._gauges = Gauges(self.metrics, journal.inbox, logger=self.logger)
            outage = Outage(self.logger, give_up_after=self.give_up_after, on_back=self._back)
            self._indexer = Indexer(journal.inbox, outage=outage, enabled=self.keep_payloads)
            try:
                await outage.call(journal.verify, stop=stopping)
                async with contextlib.AsyncExitStack() as stack:
                    opened = open_source(
                        self.source_url, consumer=self.consumer, batch=self.batch_size, on_lost=self._lost
                    )
                    self.source = await outage.call(lambda: stack.enter_async_context(opened), stop=stopping)
                    await self._loop(outage, stop=stopping, once=once, idle_timeout=idle_timeout)
            except Stopped:
                pass  # stopped while a dependency was down at start: nothing was in hand
            finally:
                await journal.aclose()
        return self.totals

    async def _loop(self, outage: Outage, *, stop: asyncio.Event, once: bool, idle_timeout: float) -> None:
        """`drive` the steps, with the relay beside them when asked (drained last with `once`)."""
        alongside = asyncio.Event()
        tasks = [beside(self._relaying(alongside), stop=stop)] if self.relay else []
        try:
            await drive(self, outage=outage, stop=stop, once=once, idle_timeout=idle_timeout, after=self._after)
        finally:
            alongside.set()
            await wait_beside(tasks)
        if self.relay and once and not stop.is_set():
            await self._relaying(stop, once=True)
        if self._indexer is not None and once and not stop.is_set():
            await self._indexer.finish(stop)  # what is left; a stop leaves it to the next run, or a search
        if self._gauges is not None:
            await self._gauges.refresh()

    async def _relaying(self, stop: asyncio.Event, *, once: bool = False) -> None:
        """The outbox relay on the loop's journal until `stop` (with `once`, until drained); its totals added."""
        journal = self._running()
        outage = Outage(self.logger, give_up_after=self.give_up_after, name="relay")
        relay = Relay(
            journal.inbox,
            outage=outage,
            stop=stop,
            idle=self.poll_timeout * 4,
            logger=self.logger,
            # the outbox keeps no password: replies to this broker get the source's, dead letters their URL's
            destinations=(self.source_url, *([self.dead_letters] if self.dead_letters else [])),
        )
        self._relay = relay
        try:
            totals = await relay.run(once=once)
        finally:
            self._relay = None
        self.totals["relayed"] += totals["sent"]
        self.totals["outbox_parked"] += totals["parked"]

    async def _after(self, handled: int) -> None:
        """After a step: wake the relay (the batch's publishes are committed), refresh the gauges now and then, index
        the kept payloads when idle (`Indexer`)."""
        if handled and self._relay is not None:
            self._relay.wake()
        if self._gauges is not None:
            await self._gauges.refresh(every=_REFRESH)
        if self._indexer is not None:
            await self._indexer.step(handled)

    async def step(self) -> int:
        """Receive one batch, settle it, hand each delivery back; return how many deliveries it had."""
        self._running()
        source = self.source
        if source is None:
            raise RuntimeError("the consumer's source is not open: call run()")
        deliveries: list[Delivery] = []
        async with progress(source, lambda: deliveries, logger=self.logger):
            deliveries[:] = await receive_until(
                source, stop=self._stop, max_messages=self.batch_size, timeout=self.poll_timeout
            )
            if not deliveries:
                return 0
            started = time.monotonic()
            work = [self._plan(d) for d in deliveries]
            move_all((w.lifecycle for w in work), Move.PLAN)
            try:
                await self._settle(work)
            except NotSettledError:  # a live lease elsewhere: not an outage; the deliveries come back later
                move_all((w.lifecycle for w in work), Move.GIVE_BACK)
                await nack_each(source, deliveries, delay=NACK_DELAY, logger=self.logger)
                return len(work)
            except TransientError:  # a dependency failed: nothing is settled or charged, everything comes back
                move_all((w.lifecycle for w in work), Move.GIVE_BACK)
                await nack_each(source, deliveries, delay=NACK_DELAY, logger=self.logger)
                raise
            move_all((w.lifecycle for w in work), Move.SETTLE)
        seconds = time.monotonic() - started
        if self.metrics is not None:
            self.metrics.batch(consumer=self.consumer, size=len(work), seconds=seconds)
        for w in work:  # before the source is told anything: no ack leaves a delivery whose batch did not commit
            w.lifecycle.check(Move.of(w.verdict.hand_back))
        batch = [(w.delivery, w.verdict) for w in work]
        lost = await hand_back_each(source, batch, done=lambda index, handed: self._done(work[index], handed, seconds))
        if lost is not None:  # the batch is committed and logged; the source is down: the outage loop waits for it
            raise lost
        return len(work)

    async def give_back(self) -> None:
        """Nothing is received ahead: nothing to give back."""

    def _plan(self, delivery: Delivery) -> _Work:
        """The delivery's message, or its reject when it can never be keyed (a permanent failure: parked at once)."""
        if delivery.reason:
            return _Work(delivery, None, Verdict(HandBack.REJECT, reason=delivery.reason), DeliveryOutcome.REJECTED)
        message_id = self.key(delivery)
        if not message_id:
            reason = "the delivery has no message id: the producer must set one (the key is never broker coordinates)"
            return _Work(delivery, None, Verdict(HandBack.REJECT, reason=reason), DeliveryOutcome.REJECTED)
        try:
            message = Message(message_id, delivery.source, delivery.payload, headers=dict(delivery.headers))
        except ValueError as exc:  # LimitError: a key over the limits
            return _Work(delivery, None, Verdict(HandBack.REJECT, reason=str(exc)), DeliveryOutcome.REJECTED)
        return _Work(delivery, message)

    async def _settle(self, work: list[_Work]) -> None:
        """Settle the batch's messages and set each delivery's verdict (`verdict`)."""
        journal = self._running()
        keyed = [w for w in work if w.message is not None]
        if not keyed:
            return
        results = await journal.settle([w.message for w in keyed if w.message is not None])
        for w, result in zip(keyed, results, strict=True):
            if isinstance(result, Exception) and not_the_message(result):
                raise result
            w.verdict, w.outcome = verdict(result)
            if isinstance(result, Exception) and not isinstance(result, DataError) and w.message is not None:
                fields = {"key": f"{w.message.source}/{w.message.message_id}", "error": result}
                log_event(self.logger, logging.WARNING, "attempt-failed", fields)

    def _done(self, w: _Work, handed: bool, seconds: float) -> None:
        """The delivery's hand-back is over (`handed`: it was handed back): move its lifecycle, count and log it."""
        w.lifecycle.handed_back(w.verdict.hand_back, handed=handed)
        self._count(w, seconds)

    def _count(self, w: _Work, seconds: float) -> None:
        """Add the delivery's outcome to the totals and the metrics, and log its `settled` line."""
        self.totals[w.outcome] += 1
        if self.metrics is not None and w.outcome is not DeliveryOutcome.NOT_SETTLED:
            self.metrics.settled(w.outcome, consumer=self.consumer)
        fields: dict[str, Any] = {"key": w.message.message_id if w.message else w.delivery.coordinates}
        fields.update(outcome=w.outcome, ms=round(seconds * 1000, 1), delivery=w.delivery.coordinates)
        if w.verdict.reason:
            fields["reason"] = w.verdict.reason
        settled(self.logger, fields)

    def _running(self) -> Journal:
        """The journal of the running loop; RuntimeError outside `run`."""
        if self._journal is None:
            raise RuntimeError("the consumer is not running: call run()")
        return self._journal

    def _back(self, dependency: str) -> None:
        if self.metrics is not None:
            self.metrics.reconnected(consumer=self.consumer, dependency=dependency)

    def _lost(self, queue: str) -> None:
        if self.metrics is not None:
            self.metrics.queue_lost(consumer=self.consumer, queue=queue)


def _producer_id(delivery: Delivery) -> str | None:
    """The producer's id the source read from the delivery (never its broker coordinates)."""
    return delivery.message_id


@contextlib.contextmanager
def _signals(stop: asyncio.Event | None) -> Iterator[asyncio.Event]:
    """`stop`, or a new event that SIGTERM and SIGINT set while the block runs (in the main thread only: elsewhere
    the caller's own `stop` is the way to end it)."""
    if stop is not None:
        yield stop
        return
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    try:
        yield stop
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
