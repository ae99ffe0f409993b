"""Which thread runs the async SQLite store's statements: only what may wait goes to the driver's thread."""

from __future__ import annotations

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


async def test_a_batch_goes_to_the_drivers_thread_only_to_begin_and_commit(tmp_path: Path) -> None:
    """A batch on a file the store opened: BEGIN IMMEDIATE and COMMIT run in the driver's thread (they wait for
    another writer and for the disk), the journal's statements inside the transaction on the event loop's thread,
    one trip each way less per statement. On the old store every statement was a trip."""
    async with AsyncInbox(f"sqlite:///{tmp_path / 'inbox.db'}", consumer="c") as inbox:
        await inbox.create_schema()
        driver = inbox._store._driver  # type: ignore[attr-defined]
        assert driver is not None
        seen = _watch(driver)

        async def handler(tx: Tx, messages: list[Message]) -> None:
            return None

        messages = [Message(f"m{i}", "partner", b"x") for i in range(3)]
        outcomes = await inbox.process_batch(messages, handler)
        assert outcomes == [Outcome.PROCESSED] * 3
        assert ("BEGIN", False) in seen
        assert ("COMMIT", False) in seen
        inside = [here for word, here in seen if word not in ("BEGIN", "COMMIT")]
        assert inside
        assert all(inside), seen
        again = await inbox.process_batch(messages, handler)
        assert again == [Outcome.DUPLICATE] * 3


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
