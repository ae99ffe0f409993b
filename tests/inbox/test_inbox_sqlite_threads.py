"""Which thread runs the async SQLite store's statements: only what may wait goes to the driver's thread."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from datetime import timedelta
from pathlib import Path

from edinbox import AsyncInbox, Message, Outcome, Tx


def _watch(driver: sqlite3.Connection) -> list[tuple[str, bool]]:
    """Record each statement the driver runs from now on: its first word, and whether this thread ran it."""
    here = threading.get_ident()
    seen: list[tuple[str, bool]] = []
    driver.set_trace_callback(lambda sql: seen.append((sql.split()[0].upper(), threading.get_ident() == here)))
    return seen


async def test_a_batch_goes_to_the_drivers_thread_only_to_commit(tmp_path: Path) -> None:
    """A batch on a file the store opened, with no other writer: only COMMIT (the sync to disk) runs in the driver's
    thread; BEGIN IMMEDIATE and the journal's statements run on the event loop's thread, one trip instead of one per
    statement. On the old store every statement was a trip."""
    async with AsyncInbox(f"sqlite:///{tmp_path / 'inbox.db'}", consumer="c") as inbox:
        await inbox.create_schema()
        driver = inbox._store._driver  # type: ignore[attr-defined]
        assert driver is not None
        seen = _watch(driver)

        async def handler(tx: Tx, messages: list[Message]) -> None:
            return None

        messages = [Message(f"m{i}", "partner", b"x") for i in range(3)]
        assert await inbox.process_batch(messages, handler) == [Outcome.PROCESSED] * 3
        assert ("BEGIN", True) in seen
        assert [word for word, here in seen if not here] == ["COMMIT"], seen
        assert await inbox.process_batch(messages, handler) == [Outcome.DUPLICATE] * 3


async def test_a_batch_waits_for_another_writer_in_the_drivers_thread(tmp_path: Path) -> None:
    """While another connection holds the write lock, BEGIN IMMEDIATE waits in the driver's thread: the event loop
    keeps running meanwhile, and the batch settles once the lock is released."""
    path = tmp_path / "inbox.db"
    async with AsyncInbox(f"sqlite:///{path}", consumer="c") as inbox:
        await inbox.create_schema()
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        ticks = 0

        async def handler(tx: Tx, messages: list[Message]) -> None:
            return None

        batch = asyncio.ensure_future(inbox.process_batch([Message("m1", "partner", b"x")], handler))
        while ticks < 20:  # 0.2 s of a loop that is not blocked
            await asyncio.sleep(0.01)
            ticks += 1
        assert not batch.done()
        other.execute("COMMIT")
        other.close()
        assert await batch == [Outcome.PROCESSED]


async def test_a_purge_deletes_in_the_drivers_thread(tmp_path: Path) -> None:
    """A purge's DELETE of a whole batch of rows runs in the driver's thread even inside its transaction, so the
    event loop never waits for it."""
    async with AsyncInbox(f"sqlite:///{tmp_path / 'inbox.db'}", consumer="c") as inbox:
        await inbox.create_schema()
        driver = inbox._store._driver  # type: ignore[attr-defined]
        assert driver is not None
        seen = _watch(driver)
        await inbox.purge(timedelta(days=3650))
        deletes = [here for word, here in seen if word == "DELETE"]
        assert deletes
        assert not any(deletes), seen
