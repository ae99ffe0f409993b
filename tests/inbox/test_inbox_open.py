"""Opening an SQLite journal that cannot be opened fails cleanly: a clear StoreError and no thread left behind."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from edinbox import AsyncInbox, Inbox, Message, StoreError, Tx


@pytest.fixture
def thread_errors() -> Iterator[list[BaseException | None]]:
    """Collect exceptions raised in any thread (such as a driver thread outliving its event loop)."""
    seen: list[BaseException | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: seen.append(args.exc_value)
    yield seen
    threading.excepthook = previous


def open_async(url: str) -> StoreError:
    """Open an AsyncInbox on `url` in an event loop of its own, process one message, return the StoreError."""

    async def handler(tx: Tx, message: Message) -> None:
        raise AssertionError("the handler must not run")

    async def attempt() -> StoreError:
        async with AsyncInbox(url, consumer="c") as inbox:
            with pytest.raises(StoreError) as caught:
                await inbox.process(Message("1", "s", b"x"), handler)
            with pytest.raises(StoreError):
                await inbox.create_schema()
        return caught.value

    return asyncio.run(attempt())


def test_async_missing_folder_names_it_and_leaves_no_thread(
    tmp_path: Path, thread_errors: list[BaseException | None]
) -> None:
    """AsyncInbox on a file in a missing folder raises a StoreError naming the folder; no thread outlives the loop."""
    missing = tmp_path / "does" / "not" / "exist"
    before = threading.active_count()
    error = open_async(f"sqlite:///{missing}/x.db")
    assert f"the folder {missing} does not exist" in str(error)
    assert threading.active_count() == before
    assert thread_errors == []
    assert not (tmp_path / "does").exists()


def test_async_unopenable_file_leaves_no_thread(tmp_path: Path, thread_errors: list[BaseException | None]) -> None:
    """A path SQLite itself refuses (here a folder) gives a StoreError naming it, and no thread outlives the loop."""
    before = threading.active_count()
    error = open_async(f"sqlite:///{tmp_path}")
    assert "SQLite failed to open" in str(error)
    assert str(tmp_path) in str(error)
    assert threading.active_count() == before
    assert thread_errors == []


def test_sync_missing_folder_names_it(tmp_path: Path) -> None:
    """Inbox on a file in a missing folder raises a StoreError naming the folder and creates nothing."""
    missing = tmp_path / "nowhere"
    inbox = Inbox(f"sqlite:///{missing}/x.db", consumer="c")
    with pytest.raises(StoreError, match=f"the folder {missing} does not exist"):
        inbox.process(Message("1", "s", b"x"), lambda tx, message: None)
    inbox.close()
    assert not missing.exists()


def test_connections_keep_temporary_files_in_memory(tmp_path: Path) -> None:
    """The connections the store opens, sync and async, on a file or in memory, keep SQLite's temporary files (the
    statement journal a batch's writes fill) in memory, not in files written page by page (`temp_store` 2)."""

    def temp_store(tx: Tx) -> int:
        return int(tx.connection.execute("PRAGMA temp_store").fetchone()[0])

    async def read_async(url: str) -> int:
        async def temp_store_async(tx: Tx) -> int:
            cursor = await tx.connection.execute("PRAGMA temp_store")
            return int((await cursor.fetchone())[0])

        async with AsyncInbox(url, consumer="c") as inbox:
            return await inbox.read(temp_store_async)

    for url in (f"sqlite:///{tmp_path / 'x.db'}", "sqlite://"):
        with Inbox(url, consumer="c") as inbox:
            assert inbox.read(temp_store) == 2
        assert asyncio.run(read_async(url)) == 2
