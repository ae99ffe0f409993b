"""The hub loop: receive a batch of deliveries, settle their interchanges through the inbox, then ack.

Per batch: plan each delivery (parse, key, route); settle the inbox items with `process_batch` (the handler creates
the invoices through the accounting sink in the journal's transaction, and counts them there); commit the hub's own
bookkeeping (parked payloads, duplicate/conflict/bypass counters); only then ack, reject or nack each delivery.
A crash anywhere before the ack redelivers the batch, and the journal turns every copy into a duplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import InboxError
from edinbox._message import Message, Outcome
from edinbox._urls import mask
from edinbox.hub import _log
from edinbox.hub._accounting import Accounting, SqlAccounting
from edinbox.hub._config import BYPASS, INBOX, HubConfig, parse_duration
from edinbox.hub._db import Database, execute
from edinbox.hub._fault import FaultPoint
from edinbox.hub._parts import open_database, open_inbox
from edinbox.hub._plan import REJECT, Item, plan
from edinbox.hub._tables import BUMP, bump_counters, create_tables
from edinbox.sources import Source, open_source
from edinbox.sources._base import Delivery

__all__ = ["Hub", "open_hub"]

_NACK_DELAY = 1.0
_STORE_BACKOFF = 1.0
_REJECTED = """INSERT INTO {rejected} AS r (consumer, fingerprint, delivery, reason, payload) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (consumer, fingerprint) DO UPDATE SET deliveries = r.deliveries + 1"""


@dataclass(slots=True)
class _Work:
    """One delivery of the batch and what became of its items."""

    delivery: Delivery
    items: list[Item]
    outcomes: dict[int, str] = field(default_factory=dict)
    unsettled: bool = False


class Hub:
    """Moves deliveries from a source through the inbox into accounting, acking only after the commit."""

    def __init__(
        self,
        config: HubConfig,
        *,
        inbox: AsyncInbox,
        source: Source,
        db: Database,
        accounting: Accounting,
        fault: FaultPoint | None = None,
        log_json: bool = False,
    ) -> None:
        """Assemble a hub from open parts (see `open_hub` for the usual way)."""
        self.config = config
        self.inbox = inbox
        self.source = source
        self.db = db
        self.accounting = accounting
        self.fault = fault
        self.log_json = log_json
        self.totals: Counter[str] = Counter()
        self.stop = asyncio.Event()
        self.logger = logging.getLogger(_log.LOGGER)

    async def run(self, *, once: bool = False) -> Counter[str]:
        """Settle deliveries until `stop` is set (SIGTERM) or, with `once`, until the source stays idle."""
        idle_since = time.monotonic()
        while not self.stop.is_set():
            handled = await self.step()
            if handled:
                idle_since = time.monotonic()
            elif once and time.monotonic() - idle_since >= self.config.idle_timeout:
                break
        return self.totals

    async def step(self) -> int:
        """Receive one batch and settle it; return how many deliveries it had."""
        deliveries = await self.source.receive(max_messages=self.config.batch_size, timeout=self.config.poll_timeout)
        if not deliveries:
            return 0
        started = time.monotonic()
        work = [_Work(d, self._plan(d)) for d in deliveries]
        try:
            await self._settle(work)
        except InboxError as exc:  # the database failed: nothing is settled, everything comes back
            self.logger.error(_log.format_line("not-settled", {"error": mask(str(exc))}, as_json=self.log_json))
            for w in work:
                await self.source.nack(w.delivery, delay=_NACK_DELAY)
            await asyncio.sleep(_STORE_BACKOFF)
            return len(work)
        if self.fault is not None:
            self.fault.committed()
        elapsed = (time.monotonic() - started) * 1000
        for w in work:
            await self._finish(w, elapsed)
        return len(work)

    def _plan(self, delivery: Delivery) -> list[Item]:
        """Plan a delivery; a parser failure parks it instead of crashing the hub on every redelivery."""
        try:
            return plan(delivery, self.config)
        except Exception as exc:
            reason = f"the EDI parser failed on this payload: {type(exc).__name__}: {exc}"
            return [Item(REJECT, delivery.coordinates, reason=reason, payload=bytes(delivery.payload))]

    async def _settle(self, work: Sequence[_Work]) -> None:
        pending = [(w, i, item) for w in work for i, item in enumerate(w.items) if item.route == INBOX]
        # copies of one key in one batch: the inbox settles the first, the others are duplicates
        counted = await self._process(pending) if pending else Counter()
        try:
            await self._bookkeeping(work, counted)
        except BaseException:
            await self.db.rollback()
            raise

    async def _bookkeeping(self, work: Sequence[_Work], counts: Counter[str]) -> None:
        """Park rejected payloads and add the outcome counters not yet counted, in one commit."""
        for w in work:
            for i, item in enumerate(w.items):
                if item.route == BYPASS:
                    w.outcomes[i] = "bypassed"
                elif item.route == REJECT:
                    w.outcomes[i] = "rejected"
                    await self.db.execute(
                        _REJECTED,
                        (self.config.consumer, item.fingerprint, w.delivery.coordinates, item.reason, item.payload),
                    )
                if i in w.outcomes and w.outcomes[i] not in ("processed", "resent"):
                    counts[w.outcomes[i]] += 1  # processed and resent were counted in the inbox transaction
        await bump_counters(self.db, consumer=self.config.consumer, counts=counts)
        await self.db.commit()

    async def _process(self, entries: Sequence[tuple[_Work, int, Item]]) -> Counter[str]:
        """Settle inbox items; return the effects still to count (lease mode has no transaction to count in)."""
        by_key: dict[tuple[str, str], Item] = {}
        for _, _, item in entries:
            if item.message is not None:
                by_key.setdefault(item.message.key, item)
        effects: dict[tuple[str, str], str] = {}
        uncounted: Counter[str] = Counter()

        async def handler(tx: Any, messages: Sequence[Message]) -> None:
            counts: Counter[str] = Counter()
            for message in messages:
                item = by_key[message.key]
                created = await self.accounting.create(tx, message, list(item.invoices))
                outcome = "resent" if created.existing and not created.created else "processed"
                effects[message.key] = outcome
                counts[outcome] += 1
            if tx.connection is None:  # lease mode: counted with the hub's bookkeeping after completion
                uncounted.update(counts)
                return
            for outcome, n in counts.items():
                await execute(
                    tx.connection, BUMP, (self.config.consumer, outcome, n), dialect=tx.dialect, names=self.db.names
                )

        messages = [item.message for _, _, item in entries if item.message is not None]
        outcomes: Sequence[Outcome | None]
        if self.accounting.lease:  # a non-transactional sink: claim, call with the idempotency key, complete
            lease = parse_duration(self.config.lease)
            outcomes = [await self._process_one(m, handler, lease=lease) for m in messages]
        else:
            try:
                outcomes = await self.inbox.process_batch(messages, handler)
            except InboxError:
                raise
            except Exception:  # a handler failed: settle one by one to find (and count) the poison message
                outcomes = [await self._process_one(m, handler) for m in messages]
        for (w, i, item), outcome in zip(entries, outcomes, strict=True):
            if outcome is None:
                w.unsettled = True
            elif outcome is Outcome.PROCESSED:
                w.outcomes[i] = effects.get(item.message.key, "processed")  # type: ignore[union-attr]
            else:
                w.outcomes[i] = outcome.value
        return uncounted

    async def _process_one(self, message: Message, handler: Any, *, lease: timedelta | None = None) -> Outcome | None:
        async def single(tx: Any, msg: Message) -> None:
            await handler(tx, [msg])

        try:
            if lease is None:
                outcome: Outcome = await self.inbox.process(message, single)
            else:
                outcome = await self.inbox.process(message, single, lease=lease)
        except InboxError:
            raise
        except Exception as exc:
            self.logger.warning(
                _log.format_line("attempt-failed", {"key": f"{message.source}/{message.message_id}", "error": exc})
            )
            return None
        return outcome

    async def _finish(self, w: _Work, elapsed: float) -> None:
        delivery = w.delivery
        if w.unsettled:
            await self.source.nack(delivery, delay=_NACK_DELAY)
        elif w.items and all(item.route == REJECT for item in w.items):
            await self.source.reject(delivery, reason="; ".join(item.reason for item in w.items))
        else:
            await self.source.ack(delivery)
        for i, item in enumerate(w.items):
            outcome = w.outcomes.get(i, "not-settled")
            self.totals[outcome] += 1
            fields: dict[str, Any] = {"key": item.label, "outcome": outcome, "ms": round(elapsed, 1)}
            fields["delivery"] = delivery.coordinates
            if delivery.delivery_count and delivery.delivery_count > 1:
                fields["delivery_count"] = delivery.delivery_count
            if item.types:
                fields["types"] = ",".join(item.types)
            if item.reason:
                fields["reason"] = item.reason
            _log.settled(self.logger, fields, as_json=self.log_json)


async def _create_tables(db: Database) -> None:
    """Create the hub's tables, tolerating another hub process creating them at the same moment."""
    for attempt in range(3):
        try:
            await create_tables(db)
            return
        except InboxError:
            await db.rollback()
            if attempt == 2:
                raise
            await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def open_hub(
    config: HubConfig,
    *,
    fault: FaultPoint | None = None,
    log_json: bool = False,
    prepare: bool = True,
    accounting: Callable[[Database], Accounting] | None = None,
) -> AsyncIterator[Hub]:
    """Open the inbox, the hub's tables, the accounting sink and the source that `config` names.

    `accounting` builds another sink than the SQL table (e.g. an HTTP API in lease mode) from the hub's database.
    """
    if not config.source:
        raise InboxError("no source configured: pass --source URL (e.g. dir:///srv/edi) or set it in the config")
    async with open_inbox(config) as inbox:
        if prepare:
            with contextlib.suppress(InboxError):  # hubs starting together race to create it: verify decides
                await inbox.create_schema()
        await inbox.verify()
        async with open_database(config) as db:
            if prepare:
                await _create_tables(db)
            sink = accounting(db) if accounting else SqlAccounting(db.names, consumer=config.consumer)
            async with open_source(config.source, consumer=config.consumer) as source:
                yield Hub(config, inbox=inbox, source=source, db=db, accounting=sink, fault=fault, log_json=log_json)
