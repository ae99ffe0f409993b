"""Progress while a batch is in hand: a slow batch tells the source it is still working, so nothing is redelivered.

A broker hands a delivery held unsettled longer than its ack wait to another consumer (NATS `ack_wait`, a Redis
pending entry claimed after `dead_after`, ...). While a batch takes longer than a third of the source's
`ack_wait`, the hub calls `source.in_progress(delivery)` for each of its deliveries every third of it. A failing call
is not the batch's business: the journal still turns a redelivery into a duplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from edinbox._errors import TransientError
from edinbox.sources import Delivery, Source

__all__ = ["progress"]


@contextlib.asynccontextmanager
async def progress(source: Source, deliveries: Sequence[Delivery]) -> AsyncIterator[None]:
    """Call `source.in_progress` on each delivery every third of `source.ack_wait` until the block ends."""
    ack_wait: float | None = getattr(source, "ack_wait", None)
    if not ack_wait or ack_wait <= 0 or not deliveries:
        yield
        return
    task = asyncio.create_task(_beat(source, deliveries, every=ack_wait / 3))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _beat(source: Source, deliveries: Sequence[Delivery], *, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        for delivery in deliveries:
            with contextlib.suppress(TransientError):
                await source.in_progress(delivery)
