"""The hub's purge: `edinbox purge` once, and `edinbox run` periodically beside the batch loop (`purge_every`, by
default hourly; `--purge-every off` turns it off).

Both delete the settled journal rows (and the outbox's sent rows) older than the retention, never younger than the
horizon, in batches of `BATCH_SIZE` throttled to `purge_max_rate` rows per second, then the parked payloads rejected
before that. The periodic purge opens a journal of its own for each run (its own connection: it never holds the
batch loop's), one purger at a time across hubs (the stores' session lock: a second hub's run deletes nothing). A
database outage during a run is transient: one `purge-down` line, the next period tries again (`purge-back` once it
works), and the process goes on; only a configuration error (a retention shorter than the horizon) is raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from edinbox import AsyncTransaction
from edinbox._async_inbox import AsyncInbox
from edinbox._core import check_retention
from edinbox._errors import ConfigurationError, TransientError
from edinbox._urls import database_url
from edinbox.hub.config import LOGGER, HubConfig, duration_text, log_event
from edinbox.hub.database._journal import open_inbox
from edinbox.hub.database._tables import has_hub
from edinbox.loop import Outage, unless_stopped

if TYPE_CHECKING:
    from edinbox.metrics import Metrics

__all__ = ["BATCH_SIZE", "Purged", "Purger", "check_purge", "purge", "purge_rejected", "purgeable", "purges"]

BATCH_SIZE = 1000
"""Journal rows per purge transaction (`edinbox purge --batch-size`)."""


@dataclass(frozen=True, slots=True)
class Purged:
    """What a purge deleted: settled journal rows, and parked payloads rejected longer ago than the age."""

    rows: int
    rejected: int


async def purgeable(inbox: AsyncInbox, consumer: str, age: timedelta) -> int:
    """Rows a purge with this age would delete now (the same condition as the journal's purge)."""
    params = {"consumer": consumer, "older_than": age}
    rows = await inbox.read(lambda tx: tx.unit.fetch("purgeable", params))
    return int(rows[0][0] or 0)


async def purge(
    inbox: AsyncInbox,
    *,
    older_than: timedelta,
    max_rate: float,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
    interval: float = 0.5,
) -> Purged:
    """Delete `inbox`'s settled journal rows older than `older_than` in bounded batches, at most `max_rate` rows per
    second (`purge_max_rate`), then the parked payloads rejected before that; return how many of each.

    `progress(deleted_so_far, total)` is called while the purge runs (it counts the purgeable rows left).
    """
    consumer = inbox.consumer
    total = await purgeable(inbox, consumer, older_than) if progress else 0
    task = asyncio.ensure_future(inbox.purge(older_than, batch_size=batch_size, max_rate=max_rate))
    try:
        while progress is not None and total and not task.done():
            await asyncio.wait({task}, timeout=interval)
            left = None if task.done() else await _left(inbox, consumer, older_than, task)
            if left is not None:
                progress(max(0, total - left), total)
        deleted = int(await task)
    finally:
        await _finish(task)
    rejected = await purge_rejected(inbox, consumer=consumer, older_than=older_than)
    if progress is not None and total:
        progress(min(deleted, total), total)
    return Purged(rows=deleted, rejected=rejected)


async def _left(inbox: AsyncInbox, consumer: str, age: timedelta, purging: asyncio.Future[int]) -> int | None:
    """The purgeable rows left, or None when the purge ends first or the count fails: the count only moves the
    progress bar, and a database that fails it fails the purge too, which reports it."""
    count = asyncio.ensure_future(purgeable(inbox, consumer, age))
    await asyncio.wait({count, purging}, return_when=asyncio.FIRST_COMPLETED)
    await _finish(count)
    if count.cancelled() or count.exception() is not None:
        return None
    return count.result()


async def _finish(task: asyncio.Future[int]) -> None:
    """Cancel `task` unless it is done, wait for it, and retrieve its exception (raised already, or left for the
    purge's own): no "exception was never retrieved" at exit."""
    if not task.done():
        task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()


def purges(config: HubConfig) -> bool:
    """Whether `run` purges beside its batch loop: `purge_every` is not off, and the journal is not in the hub's
    memory (the purge works on a connection of its own, which would see another, empty, database)."""
    return config.purge_every is not None and not database_url(config.db).in_memory


def check_purge(config: HubConfig) -> None:
    """ConfigurationError when `config` asks for a periodic purge that can never run: a retention shorter than the
    horizon (checked before the hub connects)."""
    if not purges(config):
        return
    try:
        check_retention(config.retention, horizon=config.horizon)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{exc}: set a longer retention, or --purge-every off") from None


class Purger:
    """`run --purge-every`: a purge at start, then one every period, until `stop` is set."""

    def __init__(self, config: HubConfig, *, stop: asyncio.Event, metrics: Metrics | None = None) -> None:
        """Purge as `config` says (`purge_every`, `retention`, `purge_max_rate`); ConfigurationError at once when the
        retention is shorter than the horizon (the hub must not start with a purge that can never run)."""
        check_purge(config)
        self.config = config
        self.every = config.purge_every.total_seconds() if config.purge_every else 0.0
        self.stop = stop
        self.metrics = metrics
        self.logger = logging.getLogger(LOGGER)
        self.outage = Outage(self.logger, give_up_after=None, name="purge")
        self.runs = 0
        self.rows = 0

    async def run(self) -> None:
        """Purge now and after each period until `stop`; a purge in progress at `stop` is cancelled (its batch rolls
        back, its connection closes, and with it the purge lock)."""
        while not self.stop.is_set():
            await unless_stopped(self.step(), self.stop)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), timeout=self.every)

    async def step(self) -> Purged | None:
        """One purge; None when the database failed (logged once per outage: the next period tries again)."""
        try:
            async with open_inbox(self.config) as inbox:  # a connection of its own, beside the batch loop's
                purged = await purge(inbox, older_than=self.config.retention, max_rate=self.config.purge_max_rate)
        except TransientError as exc:
            self.outage.went_down(exc)
            return None
        self.outage.came_back()
        self.runs += 1
        self.rows += purged.rows
        if self.metrics is not None:
            self.metrics.purged(consumer=self.config.consumer, rows=purged.rows)
        fields = {"rows": purged.rows, "rejected": purged.rejected, "older_than": duration_text(self.config.retention)}
        log_event(self.logger, logging.INFO, "purged", fields)
        return purged


async def purge_rejected(inbox: AsyncInbox, *, consumer: str, older_than: timedelta) -> int:
    """Delete `consumer`'s parked payloads first rejected more than `older_than` ago, and the answers
    (`edinbox_hub_answers`), AS2 receipts (`edinbox_hub_as2_receipts`), ledger numbers (`edinbox_hub_ledger`) and
    validation findings (`edinbox_hub_findings`) last seen that long ago, on the journal the purge already has open;
    return how many parked payloads (0 on a library journal: no hub tables)."""
    if not await has_hub(inbox):
        return 0
    params = {"consumer": consumer, "older_than": older_than}

    async def purge(tx: AsyncTransaction) -> int:
        await tx.unit.run("hub_purge_answers", params)
        await tx.unit.run("hub_purge_as2_receipts", params)
        await tx.unit.run("hub_purge_ledger", params)
        await tx.unit.run("hub_purge_findings", params)
        return int(await tx.unit.run("hub_purge_rejected", params))

    return await inbox.transaction(purge)
