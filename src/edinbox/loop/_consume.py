"""`consume(...)`: the consumer loop's blocking face, for code that has no event loop (a Django command, a script)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from edinbox._retry import Retry
from edinbox.loop._consumer import AsyncConsumer
from edinbox.loop._journal import Handler
from edinbox.sources import Delivery

if TYPE_CHECKING:
    from edinbox.metrics import Metrics

__all__ = ["consume"]


def consume(
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
    once: bool = False,
    idle_timeout: float = 1.0,
) -> Counter[str]:
    """Run `AsyncConsumer(source_url, handler, ...)` in an event loop of its own until SIGTERM or SIGINT (or, with
    `once`, until the source stayed idle `idle_timeout` seconds); return its totals.

    A plain `handler(tx, message)` runs on a sync `Inbox` in a worker thread (`tx.connection` is the sync driver's
    connection, as with `Inbox.process`); a coroutine function runs on an `AsyncInbox`. The other options are
    `AsyncConsumer`'s.
    """
    loop = AsyncConsumer(
        source_url,
        handler,
        db=db,
        consumer=consumer,
        table=table,
        max_attempts=max_attempts,
        retry=retry,
        dead_letters=dead_letters,
        horizon=horizon,
        batch_size=batch_size,
        poll_timeout=poll_timeout,
        key=key,
        relay=relay,
        metrics=metrics,
        give_up_after=give_up_after,
        keep_payloads=keep_payloads,
        payload_cap=payload_cap,
    )
    return asyncio.run(loop.run(once=once, idle_timeout=idle_timeout))
