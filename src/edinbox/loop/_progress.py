"""Progress while deliveries are held: a slow batch tells the source it is still working, so nothing is redelivered.

A broker hands a delivery held unsettled longer than its ack wait to another consumer (NATS `ack_wait`, a Redis
pending entry claimed after `dead_after`, a spool claim older than `claim_timeout`, ...). While a batch takes longer
than a third of the source's `ack_wait`, the loop calls `source.in_progress(delivery)` for each delivery it holds
every third of it: the batch in hand and, on a source that `receives_ahead`, the next batch claimed meanwhile. A
failing call is not the batch's business: the journal still turns a redelivery into a duplicate. It is logged, one
`progress-failed` line per beat with failures (how many of the deliveries held, the first one's coordinates and
error): a claim taken back meanwhile, or a broker that is down. The beats end when the block does, also when a
driver turns the cancel of a beat's call into an error or returns its reply regardless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence

from edinbox._errors import TransientError
from edinbox._logs import LOGGER, log_event
from edinbox.sources import Delivery, Source, unless_cancelled

__all__ = ["progress"]


@contextlib.asynccontextmanager
async def progress(
    source: Source,
    held: Callable[[], Sequence[Delivery]],
    *,
    logger: logging.Logger | None = None,
) -> AsyncIterator[None]:
    """Call `source.in_progress` on each delivery `held()` names, every third of `source.ack_wait`, until the block
    ends; `held` is asked again at each beat, so deliveries received meanwhile are covered too. Failed calls are
    logged to `logger` (`progress-failed`; the `edinbox.loop` logger when None)."""
    ack_wait: float | None = getattr(source, "ack_wait", None)
    if not ack_wait or ack_wait <= 0:
        yield
        return
    task = asyncio.create_task(_beat(source, held, every=ack_wait / 3, logger=logger or logging.getLogger(LOGGER)))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _beat(
    source: Source,
    held: Callable[[], Sequence[Delivery]],
    *,
    every: float,
    logger: logging.Logger,
) -> None:
    while True:
        await asyncio.sleep(every)
        deliveries = held()
        failed: list[tuple[Delivery, TransientError]] = []
        for delivery in deliveries:
            try:
                await source.in_progress(delivery)
            except TransientError as exc:
                failed.append((delivery, exc))
            unless_cancelled()  # a driver may have turned the cancel into an error or a reply
        if failed:
            first, error = failed[0]
            fields = {"failed": len(failed), "held": len(deliveries), "delivery": first.coordinates, "error": error}
            log_event(logger, logging.WARNING, "progress-failed", fields)
