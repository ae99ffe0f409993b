"""The journal a consumer settles its batches through: an async handler on `AsyncInbox`, or a plain (sync) handler
on `Inbox` in a worker thread of its own, so its `tx.connection` is the driver's sync connection, as with
`Inbox.process`."""

from __future__ import annotations

import abc
import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from edinbox._async_inbox import AsyncInbox
from edinbox._message import Message, Outcome
from edinbox._records import Tx
from edinbox._retry import Retry
from edinbox._sync_inbox import Inbox

__all__ = ["Handler", "Journal", "open_journal"]

Handler = Callable[[Tx, Message], Awaitable[object]] | Callable[[Tx, Message], object]
"""`handler(tx, message)`: the effect of one new message, in the journal's transaction (async or plain)."""


class Journal(abc.ABC):
    """Settles a batch with the handler; `inbox` (an AsyncInbox) also serves the loop's other work (its relay and
    gauges)."""

    def __init__(self, inbox: AsyncInbox) -> None:
        """Settle through (or beside) `inbox`."""
        self.inbox = inbox

    @abc.abstractmethod
    async def settle(self, messages: Sequence[Message]) -> list[Outcome | Exception]:
        """`process_batch` with isolation: one transaction for the batch, each message alone after a failure."""

    async def verify(self) -> None:
        """Raise SchemaError unless the journal is there, complete and current."""
        await self.inbox.verify()

    async def aclose(self) -> None:
        """Close the connections the journal opened."""
        await self.inbox.aclose()


class AsyncJournal(Journal):
    """An async handler, on the loop's `AsyncInbox`."""

    def __init__(self, inbox: AsyncInbox, handler: Callable[[Tx, Message], Awaitable[object]]) -> None:
        """Run `handler` for each new message of a batch through `inbox`."""
        super().__init__(inbox)
        self.handler = handler

    async def settle(self, messages: Sequence[Message]) -> list[Outcome | Exception]:
        """`process_batch` with isolation, the handler awaited once per new message."""

        async def each(tx: Tx, batch: Sequence[Message]) -> None:
            for message in batch:
                await self.handler(tx, message)

        return await self.inbox.process_batch(messages, each, isolate=True)


class ThreadJournal(Journal):
    """A plain handler, on a sync `Inbox` in a worker thread of its own."""

    def __init__(self, inbox: AsyncInbox, sync: Inbox, handler: Callable[[Tx, Message], object]) -> None:
        """Run `handler` for each new message through `sync` in a thread; `inbox` serves the loop's other work."""
        super().__init__(inbox)
        self.sync = sync
        self.handler = handler
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="edinbox-handler")

    async def settle(self, messages: Sequence[Message]) -> list[Outcome | Exception]:
        """`Inbox.process_batch` with isolation, in the worker thread (the loop goes on beating meanwhile)."""

        def each(tx: Tx, batch: Sequence[Message]) -> None:
            for message in batch:
                self.handler(tx, message)

        def run() -> list[Outcome | Exception]:
            return self.sync.process_batch(messages, each, isolate=True)

        return await asyncio.get_running_loop().run_in_executor(self.thread, run)

    async def aclose(self) -> None:
        """Close both inboxes; a call still running in the thread (cut off by a stop during an outage) ends on its
        own: nobody waits for it."""
        self.thread.shutdown(wait=False, cancel_futures=True)
        await asyncio.get_running_loop().run_in_executor(None, self.sync.close)
        await super().aclose()


def open_journal(
    db: Any,
    handler: Handler,
    *,
    consumer: str,
    table: str,
    max_attempts: int,
    retry: Retry | None = None,
    dead_letters: str | None = None,
    horizon: timedelta | None,
    keep_payloads: bool = False,
    payload_cap: int | None = None,
) -> Journal:
    """The journal for `handler`: on an AsyncInbox for a coroutine function, else on a sync Inbox in a thread too;
    `keep_payloads` and `payload_cap` as the inbox's (the message store)."""
    options: dict[str, Any] = {
        "consumer": consumer,
        "table": table,
        "max_attempts": max_attempts,
        "keep_payloads": keep_payloads,
    }
    if payload_cap is not None:
        options["payload_cap"] = payload_cap
    if horizon is not None:
        options["horizon"] = horizon
    if retry is not None:
        options["retry"] = retry
    if dead_letters is not None:
        options["dead_letters"] = dead_letters
    inbox = AsyncInbox(db, **options)
    if inspect.iscoroutinefunction(handler):
        return AsyncJournal(inbox, handler)
    return ThreadJournal(inbox, Inbox(db, **options), handler)
