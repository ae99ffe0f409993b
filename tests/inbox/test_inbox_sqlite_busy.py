"""Other connections in the way of the async SQLite store's one-trip transactions: busy is waited for, never on the
event loop's thread, and costs no attempt.

The store runs BEGIN IMMEDIATE on the loop's thread only when the write lock is free (`begin_now`), else waits in the
driver's thread, up to the busy timeout; past it the call fails with a transient StoreError. Here another connection
holds the write lock past that timeout, or a checkpoint that waits for an old reader holds out every writer just as a
batch commits. Each time the event loop keeps running, nothing is charged, and every message settles once.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import pytest

from edinbox import AsyncInbox, Message, Outcome, Status, StoreError, TransientError, Tx
from edinbox.stores import _sqlite_sql

T = TypeVar("T")


async def longest_pause(work: Awaitable[T]) -> tuple[T | BaseException, float]:
    """Await `work` while a ticker runs on the loop; its result (or exception) and the longest gap between ticks."""
    task = asyncio.ensure_future(work)
    longest, last = 0.0, time.monotonic()
    while not task.done():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        longest, last = max(longest, now - last), now
    exc = task.exception()
    return (exc if exc is not None else task.result()), longest


async def nothing(tx: Tx, messages: list[Message]) -> None:
    """A batch handler with no effect of its own."""


async def test_a_write_lock_held_past_the_busy_timeout_is_transient_and_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection holds the write lock past the busy timeout (0.3 s here): the batch fails with a transient
    StoreError while the event loop keeps running, no row is written or charged, and once the lock is released the
    next attempt settles every message at attempt 1."""
    monkeypatch.setattr(_sqlite_sql, "BUSY_TIMEOUT", 0.3)
    path = tmp_path / "inbox.db"
    messages = [Message(f"m{i}", "partner", b"x") for i in range(3)]
    async with AsyncInbox(f"sqlite:///{path}", consumer="c") as inbox:
        await inbox.create_schema()
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        result, pause = await longest_pause(inbox.process_batch(messages, nothing))
        assert isinstance(result, StoreError), result
        assert isinstance(result, TransientError)
        assert pause < 0.2  # the wait for the lock was in the driver's thread
        assert other.execute("SELECT count(*) FROM inbox").fetchone() == (0,)
        other.execute("COMMIT")
        other.close()
        assert await inbox.process_batch(messages, nothing) == [Outcome.PROCESSED] * 3
        for m in messages:
            record = await inbox.get("partner", m.message_id)
            assert record is not None
            assert (record.status, record.attempts) == (Status.PROCESSED, 1)


def checkpoint_behind_a_reader(path: Path, *, started: threading.Event, wait: float) -> tuple[int, int, int]:
    """Open a read transaction (its snapshot taken now), then run a TRUNCATE checkpoint on another connection that
    waits for writers and for that reader up to `wait` seconds; its (busy, log, checkpointed) row."""
    reader = sqlite3.connect(path, isolation_level=None)
    checkpointer = sqlite3.connect(path, isolation_level=None, timeout=wait)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM inbox").fetchone()
        started.set()
        row = checkpointer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return int(row[0]), int(row[1]), int(row[2])
    finally:
        reader.execute("COMMIT")
        reader.close()
        checkpointer.close()


def in_the_way(path: Path, *, wait: float) -> asyncio.Future[tuple[int, int, int]]:
    """`checkpoint_behind_a_reader` started in a thread; its row when it ends."""
    started = threading.Event()
    job = asyncio.get_running_loop().run_in_executor(
        None, lambda: checkpoint_behind_a_reader(path, started=started, wait=wait)
    )
    assert started.wait(10)
    return job


def settled_once(records: list[object]) -> None:
    """Each record is processed, at attempt 1."""
    for record in records:
        assert (getattr(record, "status", None), getattr(record, "attempts", None)) == (Status.PROCESSED, 1)


async def test_a_checkpoint_started_mid_transaction_deadlocks_nothing(tmp_path: Path) -> None:
    """While a batch holds the write transaction, another connection opens a read transaction and a third starts a
    TRUNCATE checkpoint that waits for the writer and that reader: the batch commits, the checkpoint gives up (busy),
    and the next batch settles too, each message once at attempt 1."""
    path = tmp_path / "inbox.db"
    checkpoints: list[asyncio.Future[tuple[int, int, int]]] = []
    async with AsyncInbox(f"sqlite:///{path}", consumer="c") as inbox:
        await inbox.create_schema()

        async def start_checkpoint(tx: Tx, messages: list[Message]) -> None:
            checkpoints.append(in_the_way(path, wait=1.0))
            await asyncio.sleep(0.2)  # the checkpoint is waiting for this transaction to end

        first = [Message(f"a{i}", "partner", b"x") for i in range(3)]
        assert await inbox.process_batch(first, start_checkpoint) == [Outcome.PROCESSED] * 3
        second = [Message(f"b{i}", "partner", b"x") for i in range(3)]
        assert await inbox.process_batch(second, nothing) == [Outcome.PROCESSED] * 3
        busy, _, _ = await checkpoints[0]
        assert busy == 1
        settled_once([await inbox.get("partner", m.message_id) for m in first + second])


async def test_a_checkpoint_holding_out_writers_is_waited_for_off_the_loop(tmp_path: Path) -> None:
    """A TRUNCATE checkpoint that waits for a reader holds the write lock meanwhile (1 s here): the next batch waits
    for it in the driver's thread while the event loop keeps running, then settles each message once."""
    path = tmp_path / "inbox.db"
    async with AsyncInbox(f"sqlite:///{path}", consumer="c") as inbox:
        await inbox.create_schema()
        first = [Message(f"a{i}", "partner", b"x") for i in range(3)]
        assert await inbox.process_batch(first, nothing) == [Outcome.PROCESSED] * 3
        checkpoint = in_the_way(path, wait=1.0)
        await asyncio.sleep(0.2)  # the checkpoint copied the log and now waits for the reader, holding the lock
        second = [Message(f"b{i}", "partner", b"x") for i in range(3)]
        started = time.monotonic()
        result, pause = await longest_pause(inbox.process_batch(second, nothing))
        assert result == [Outcome.PROCESSED] * 3
        assert time.monotonic() - started > 0.4  # it did wait for the checkpoint
        assert pause < 0.2  # in the driver's thread
        busy, _, _ = await checkpoint
        assert busy == 1
        settled_once([await inbox.get("partner", m.message_id) for m in first + second])
