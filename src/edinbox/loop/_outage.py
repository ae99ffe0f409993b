"""Waiting out a dependency that is down: backoff with jitter (stamina), one line when it goes, one when it is back.

A transient failure (the database, the source, the accounting API) costs no attempt: the batch is left unsettled
and the same call is retried with exponential backoff and jitter until it succeeds, or until `give_up_after` has
passed since the outage began (the operator's choice; then the last error propagates: `edinbox run` exits 2): a
call that succeeds without reaching the dependency that is down (`proves`) does not start that wait over. Only a
configuration error stops the loop otherwise (a hub, a consumer, a relay).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

import stamina

from edinbox._errors import SourceError, StoreError, TransientError
from edinbox._logs import log_event
from edinbox._urls import mask

__all__ = ["Outage", "Stopped", "dependency", "unless_stopped"]

T = TypeVar("T")

WAIT_INITIAL = 0.2
"""Seconds before the first retry."""
WAIT_MAX = 3.0
"""The longest pause between two retries (before jitter): how late a recovery is noticed at most."""
WAIT_JITTER = 1.0
"""Up to this many seconds added at random to each pause, so hubs sharing a database do not retry in step."""
STOP_GRACE = 3.0
"""Seconds a call that is running when `stop` comes during an outage may still take: its attempt may be settling a
batch just as the database returns (then it commits and acks instead of being rolled back and redelivered)."""


class Stopped(Exception):
    """The stop event was set while a dependency was down: the wait ends, nothing was in hand."""


def dependency(exc: TransientError) -> str:
    """Which dependency a transient error comes from: "database", "source", or what the error class names."""
    if isinstance(exc, StoreError):
        return "database"
    if isinstance(exc, SourceError):
        return "source"
    return str(getattr(exc, "dependency", "dependency"))


async def unless_stopped(work: Awaitable[T], stop: asyncio.Event) -> T | None:
    """Await `work`, unless `stop` is set first: then `work` is cancelled and None returned; its exception, if it
    fails first, is raised."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return None if task.cancelled() else task.result()


class Outage:
    """Retries a call through outages of a loop's dependencies, logging each outage once when it starts and ends."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        give_up_after: timedelta | None,
        name: str = "dependency",
        on_back: Callable[[str], None] | None = None,
        stop_grace: float = STOP_GRACE,
    ) -> None:
        """Log to `logger` (events `<name>-down` / `<name>-back`); give up (re-raise) after `give_up_after` of one
        outage, never when None; `on_back` is told which dependency came back after each outage (the reconnect
        counter); `stop_grace`: see `call`."""
        self.logger = logger
        self.name = name
        self.on_back = on_back
        self.give_up_after = give_up_after
        self.down_since: float | None = None
        self.down: str | None = None
        self.stop_grace = stop_grace
        self._attempting = False  # an attempt of the action is running (not a pause between two)

    async def call(
        self,
        action: Callable[[], Awaitable[T]],
        *,
        stop: asyncio.Event | None = None,
        proves: Callable[[T, str], bool] | None = None,
    ) -> T:
        """Run `action()` until it succeeds, waiting out TransientErrors with exponential backoff and jitter.

        When `stop` is set while a dependency is down, the wait is abandoned and Stopped raised: at once during a
        pause between attempts; an attempt that is running is given `stop_grace` seconds to finish first (it may be
        the one that reaches the database as it returns: its batch then commits and is acked, not redelivered), then
        cancelled. An action that is running while the dependencies are up is left to finish (the batch in hand is
        settled and acked).
        `proves(result, dependency)` says whether a success reached the dependency that was down (a hub step that
        received nothing has not called the database or the accounting API); until one does, the outage goes on:
        no `-back` line, and its next failure logs no second `-down`.
        """
        if stop is None:
            return await self._retry(action, proves)
        call = asyncio.ensure_future(self._retry(action, proves))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({call, stopping}, return_when=asyncio.FIRST_COMPLETED)
            grace = time.monotonic() + self.stop_grace
            while not call.done():
                if self.down_since is not None and (not self._attempting or time.monotonic() >= grace):
                    call.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await call
                    raise Stopped
                await asyncio.wait({call}, timeout=0.1)
        finally:
            stopping.cancel()
        return call.result()

    async def _retry(self, action: Callable[[], Awaitable[T]], proves: Callable[[T, str], bool] | None) -> T:
        attempts, timeout = None, None
        if self.give_up_after is not None:  # counted from the outage's start: a call that proved nothing ends none
            timeout = self.give_up_after.total_seconds()
            if self.down_since is not None:
                timeout -= time.monotonic() - self.down_since
            if timeout <= 0:  # one more attempt: the dependency may be back
                attempts, timeout = 1, None
        async for attempt in stamina.retry_context(
            on=TransientError,
            attempts=attempts,
            timeout=timeout,
            wait_initial=WAIT_INITIAL,
            wait_max=WAIT_MAX,
            wait_jitter=WAIT_JITTER,
        ):
            with attempt:
                self._attempting = True
                try:
                    result = await action()
                except TransientError as exc:
                    self.went_down(exc)
                    raise
                finally:
                    self._attempting = False
        if self.down is None or proves is None or proves(result, self.down):
            self.came_back()
        return result

    def went_down(self, exc: TransientError) -> None:
        """Log the first failure of an outage (which dependency, the error's first line, masked); then stay quiet."""
        if self.down_since is not None:
            return
        self.down_since = time.monotonic()
        self.down = dependency(exc)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        fields = {"dependency": self.down, "error": mask(first)}
        log_event(self.logger, logging.WARNING, f"{self.name}-down", fields)

    def came_back(self) -> None:
        """Log the end of an outage with its length."""
        if self.down_since is None:
            return
        seconds = round(time.monotonic() - self.down_since, 1)
        fields = {"dependency": self.down, "down_for_s": seconds}
        if self.on_back is not None:
            self.on_back(str(self.down))
        self.down_since = self.down = None
        log_event(self.logger, logging.WARNING, f"{self.name}-back", fields)
