"""The message store's search index, kept current beside the batch loop (a hub's, a consumer's).

On SQLite and PostgreSQL a kept payload is written in its settling transaction without its words (the costly part:
the words themselves, the full-text index's insert); `AsyncInbox.index_payloads` indexes them later, in batches of
their own. The loop does it when its source is idle, and at most every `EVERY` seconds while it is busy (so a busy
hour leaves a bounded backlog, not an unbounded one), one batch at a time; `run(once=True)` indexes what is left
before it returns. A search indexes whatever still waits before it looks (`AsyncInbox.search`): nothing settled is
missed, whenever the loop got to it. A database outage is the loop's own (`Outage`): one `dependency-down` line,
whether a batch step or an index batch met it first, and one `dependency-back` when either reaches it again.
"""

from __future__ import annotations

import asyncio
import time

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import TransientError
from edinbox.loop._outage import Outage

__all__ = ["EVERY", "Indexer"]

EVERY = 5.0
"""Seconds between two batches indexed while the source keeps the hub busy."""


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
        """After a loop step that settled `handled` deliveries: index one batch when the source was idle or `EVERY`
        seconds have passed; how many were indexed."""
        now = time.monotonic()
        if not self.enabled or (handled and now - self._last < EVERY):
            return 0
        self._last = now
        return await self._batch()

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
