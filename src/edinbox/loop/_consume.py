"""`consume(...)`: the consumer loop's blocking face, for code that has no event loop (a Django command, a script)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from edinbox.loop._consumer import AsyncConsumer
from edinbox.loop._journal import Handler

__all__ = ["consume"]


def consume(
    source_url: str, handler: Handler, *, once: bool = False, idle_timeout: float = 1.0, **options: Any
) -> Counter[str]:
    """Run `AsyncConsumer(source_url, handler, **options)` in an event loop of its own until SIGTERM or SIGINT (or,
    with `once`, until the source stayed idle `idle_timeout` seconds); return its totals.

    A plain `handler(tx, message)` runs on a sync `Inbox` in a worker thread (`tx.connection` is the sync driver's
    connection, as with `Inbox.process`); a coroutine function runs on an `AsyncInbox`. The options are
    `AsyncConsumer`'s: `db` and `consumer` (required), `table`, `max_attempts`, `horizon`, `batch_size`,
    `poll_timeout`, `key`, `relay`, `metrics`, `give_up_after`, `log_json`.
    """
    consumer = AsyncConsumer(source_url, handler, **options)
    return asyncio.run(consumer.run(once=once, idle_timeout=idle_timeout))
