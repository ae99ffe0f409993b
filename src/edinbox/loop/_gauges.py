"""The journal gauges (rows by status, oldest ages) kept fresh while a loop runs, through database outages."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import TransientError
from edinbox._logs import log_event
from edinbox.loop._outage import dependency

if TYPE_CHECKING:
    from edinbox.metrics import Metrics

__all__ = ["Gauges"]


class Gauges:
    """Sets the journal gauges of `metrics` from `inbox`, at most once per `every` seconds."""

    def __init__(self, metrics: Metrics | None, inbox: AsyncInbox, *, logger: logging.Logger) -> None:
        """Read `inbox` into `metrics` (nothing when None); log to `logger`."""
        self.metrics = metrics
        self.inbox = inbox
        self.logger = logger
        self._refreshed = float("-inf")
        self._stale = False
        """The last refresh failed (logged once until one works again)."""

    async def refresh(self, *, every: float = 0.0) -> None:
        """Set the gauges from the database, when `every` seconds have passed since the last time; a database that is
        down leaves them as they were (the loop's next step waits the outage out), and one `gauges-stale` line says
        so until a refresh works again."""
        if self.metrics is None or time.monotonic() - self._refreshed < every:
            return
        try:
            await self.metrics.refresh(self.inbox)
        except TransientError as exc:
            if not self._stale:
                fields = {"dependency": dependency(exc), "error": " ".join(str(exc).split())[:300]}
                log_event(self.logger, logging.WARNING, "gauges-stale", fields)
            self._stale = True
            return
        self._stale = False
        self._refreshed = time.monotonic()
