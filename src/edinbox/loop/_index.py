"""The message store's search index, kept current beside the batch loop (a hub's, a consumer's).

On SQLite a kept payload is written in its settling transaction without its words (the full-text index's insert is
the costly part; PostgreSQL's rows left so by journal version 13 too); `AsyncInbox.index_payloads` indexes them
later, in batches of their own. The loop does it when its source is idle, one batch at a time, and every `EVERY`
seconds while it is busy, then batch after batch until nothing waits or `BUSY_BUDGET` seconds are spent (so a busy
hour leaves no backlog at up to about 6,000 deliveries a second on SQLite: 15 us a payload; beyond, a bounded share
of the loop's time goes to it); `run(once=True)` indexes what is left before it returns. A search indexes whatever
still waits before it looks (`AsyncInbox.search`): nothing settled is missed, whenever the loop got to it. A
database outage is the loop's own (`Outage`): one `dependency-down` line, whether a batch step or an index batch met
it first, and one `dependency-back` when either reaches it again.
"""

from __future__ import annotations

import asyncio
import time

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import TransientError
from edinbox.loop._outage import Outage

__all__ = ["EVERY", "Indexer"]

EVERY = 5.0
"""Seconds between two catch-ups of the index while the source keeps the loop busy."""
BUSY_BUDGET = 0.5
"""Seconds a catch-up of a busy loop may spend indexing (a tenth of `EVERY`)."""


class Indexer:
    """Indexes a loop's kept payloads between its batches (see the module's docstring)."""

    def __init__(self, inbox: AsyncInbox, *, outage: Outage, enabled: bool) -> None:
        """Index `inbox`'s kept payloads when `enabled` (its `keep_payloads`); a failure to reach the database is
        reported through `outage` (the loop's)."""
        self.inbox = inbox
        self.outage = outage
        self.enabled = enabled
        self._last = time.monotonic()

    async def step(self, handled: int) -> int:
        """After a loop step that settled `handled` deliveries: index one batch when the source was idle, or, busy,
        every `EVERY` seconds the batches waiting for up to `BUSY_BUDGET` seconds; how many were indexed."""
        now = time.monotonic()
        if not self.enabled or (handled and now - self._last < EVERY):
            return 0
        self._last = now
        total = indexed = await self._batch()
        while handled and indexed and time.monotonic() - now < BUSY_BUDGET:
            indexed = await self._batch()
            total += indexed
        return total

    async def finish(self, stop: asyncio.Event) -> int:
        """Index every kept payload still waiting (the end of `run(once=True)`), one batch at a time until none is
        left or `stop` is set (SIGTERM: what is left waits for the next run, or a search); how many."""
        total = 0
        while not stop.is_set() and (indexed := await self._batch()):
            total += indexed
        return total

    async def _batch(self) -> int:
        """Index one batch; how many. The database down leaves them waiting and starts the loop's outage (its
        `dependency-down` line, once): the loop's next step waits it out, a search indexes them first. A batch
        that works ends an outage of the database (its `dependency-back` line)."""
        if not self.enabled:
            return 0
        try:
            indexed = await self.inbox.index_payloads()
        except TransientError as exc:
            self.outage.went_down(exc)
            return 0
        if self.outage.down == "database":
            self.outage.came_back()
        return indexed
