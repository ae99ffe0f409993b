"""The loop itself, around one step: settle batch after batch, wait out outages, stop on `stop`, run work beside it.

A step receives one batch, settles it and hands each delivery back; it returns how many deliveries it had (0: the
source was idle). `drive` calls it through `Outage.call` until `stop` is set or, with `once`, until the source has
stayed idle `idle_timeout` seconds; a TransientError of a step costs nothing and is waited out with backoff. The
hub's step (`edinbox.hub`: an EDI plan per delivery) and the library's (`AsyncConsumer`: a handler per message) both
run here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from edinbox.loop._outage import Outage, Stopped

__all__ = ["Stepper", "beside", "drive", "reached", "wait_beside"]


class Stepper(Protocol):
    """What `drive` runs: one step at a time, and a way to hand back what it holds when the loop ends."""

    async def step(self) -> int:
        """Receive one batch, settle it and hand each delivery back; return how many deliveries it had."""

    async def give_back(self) -> None:
        """Hand anything received ahead back to the source unsettled (at a stop, a failed step, the end)."""


async def drive(
    stepper: Stepper,
    *,
    outage: Outage,
    stop: asyncio.Event,
    once: bool = False,
    idle_timeout: float = 0.0,
    proves: Callable[[int, str], bool] | None = None,
    after: Callable[[int], Awaitable[None]] | None = None,
) -> None:
    """Run `stepper.step` until `stop` is set or, with `once`, until the source stayed idle `idle_timeout` seconds;
    `after(handled)` runs after each step (wake the relay, refresh the gauges); `give_back` runs at the end."""
    idle_since = time.monotonic()
    try:
        while not stop.is_set():
            try:
                handled = await outage.call(stepper.step, stop=stop, proves=proves or reached)
            except Stopped:
                break
            if handled:
                idle_since = time.monotonic()
            elif once and time.monotonic() - idle_since >= idle_timeout:
                break
            if after is not None:
                await after(handled)
    finally:
        await stepper.give_back()


def reached(handled: int, dependency: str) -> bool:
    """Whether a step reached the dependency that was down: any step reached the source; only a step that settled
    deliveries reached the database (and a hub's accounting API)."""
    return bool(handled) or dependency == "source"


def beside(work: Coroutine[Any, Any, None], *, stop: asyncio.Event) -> asyncio.Future[None]:
    """`work` (the relay, a purge) as a task beside the loop; should it fail (a configuration error, an outage longer
    than its patience), it sets `stop`, and `wait_beside` raises its error."""
    task = asyncio.ensure_future(work)

    def done(task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            stop.set()

    task.add_done_callback(done)
    return task


async def wait_beside(tasks: list[asyncio.Future[None]]) -> None:
    """Wait for the tasks beside the loop to end (their stop was set), and raise the error that ended one."""
    if tasks:
        await asyncio.wait(tasks)
    for task in tasks:
        task.result()
