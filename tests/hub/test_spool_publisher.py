"""The spool publisher (`dir://`, what the relay sends acknowledgments with): every file is flushed to disk before it
gets its final name, the folder after the renames, a failure part way leaves no file under a final name, and the
writing happens on the publisher's own thread, not on the event loop's default threads the hub parses with."""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from edinbox import SourceError
from edinbox._message import Outgoing
from edinbox.sources import _spool_files
from edinbox.sources._spool_files import SpoolPublisher


def messages(count: int) -> list[Outgoing]:
    """`count` messages whose payload names their producer id."""
    return [Outgoing(f"ack/{n:04d}", f"payload {n}".encode()) for n in range(count)]


@pytest.mark.parametrize("count", [3, 150])
async def test_each_file_is_flushed_before_its_rename_and_the_folder_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """A few files (flushed by the writing thread) and many (flushed in slices by several threads): the disk holds
    each file's bytes before the file takes its final name in inbound/, and inbound/ is flushed after the last
    rename; every message arrives once, under its producer id."""
    events: list[tuple[str, str]] = []
    lock = threading.Lock()
    fsync, replace = os.fsync, os.replace

    def flushed(fd: int) -> None:
        fsync(fd)
        with lock:
            events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))

    def renamed(source: str, target: str, **folders: int) -> None:
        replace(source, target, **folders)
        where = os.readlink(f"/proc/self/fd/{folders['src_dir_fd']}") if folders else os.path.dirname(source)
        with lock:
            events.append(("rename", os.path.join(where, os.path.basename(source))))

    monkeypatch.setattr(os, "fsync", flushed)
    monkeypatch.setattr(os, "replace", renamed)
    publisher = SpoolPublisher(f"dir://{tmp_path}")
    await publisher.open()
    try:
        await publisher.send(messages(count))
    finally:
        await publisher.aclose()
    renames = [n for n, (what, _) in enumerate(events) if what == "rename"]
    assert len(renames) == count
    for n in renames:
        assert ("fsync", events[n][1]) in events[:n], "renamed before it was flushed"
    assert events[-1] == ("fsync", str(tmp_path / "inbound")), "inbound/ is flushed after the renames"
    names = sorted(os.listdir(tmp_path / "inbound"))
    assert [name.split("~", 1)[1] for name in names] == [f"ack%2F{n:04d}.edi" for n in range(count)]
    assert os.listdir(tmp_path / "tmp") == []


@pytest.mark.parametrize("count", [3, 150])
async def test_a_failed_flush_leaves_no_file_under_a_final_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """When flushing one file of a send fails, the send fails as a SourceError (transient: the relay sends the rows
    again), no file of it appears in inbound/, and its scratch files are removed."""
    fsync, calls = os.fsync, []

    def failing(fd: int) -> None:
        calls.append(fd)
        if len(calls) == count // 2 + 1:
            raise OSError(5, "Input/output error")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", failing)
    publisher = SpoolPublisher(f"dir://{tmp_path}")
    await publisher.open()
    try:
        with pytest.raises(SourceError, match="Input/output error"):
            await publisher.send(messages(count))
    finally:
        await publisher.aclose()
    assert os.listdir(tmp_path / "inbound") == []
    assert os.listdir(tmp_path / "tmp") == []


async def test_the_publisher_writes_while_the_loops_default_threads_are_busy(tmp_path: Path) -> None:
    """With every default thread of the event loop held (as the hub's parsing of a batch holds one), a send still
    completes: the publisher writes on its own thread, so a relay beside the hub never holds the hub's threads
    through its disk flushes, nor waits for them."""
    loop = asyncio.get_running_loop()
    busy, release = ThreadPoolExecutor(1), threading.Event()
    loop.set_default_executor(busy)
    held = asyncio.ensure_future(asyncio.to_thread(release.wait, 120))
    publisher = SpoolPublisher(f"dir://{tmp_path}")
    try:
        await publisher.open()
        await asyncio.wait_for(publisher.send(messages(5)), timeout=60)
        assert not held.done()
    finally:
        release.set()
        await held
        await publisher.aclose()
    assert len(os.listdir(tmp_path / "inbound")) == 5


def test_a_few_files_are_flushed_without_the_flushing_threads(tmp_path: Path) -> None:
    """Fewer files than two slices are flushed by the writing thread alone; more are cut in slices of at least
    `_FILES_PER_FLUSHER`, at most `_FLUSHERS` of them."""
    used: list[int] = []

    class Counting(ThreadPoolExecutor):
        def map(self, fn, *iterables, **kwargs):  # type: ignore[no-untyped-def]
            slices = list(iterables[0])
            used.append(len(slices))
            return super().map(fn, slices, **kwargs)

    with Counting(_spool_files._FLUSHERS) as flushing:
        for count in (1, 2 * _spool_files._FILES_PER_FLUSHER - 1, 2 * _spool_files._FILES_PER_FLUSHER, 1000):
            folder = tmp_path / str(count)
            pairs = [(m.message_id, m.payload) for m in messages(count)]
            _spool_files._write_all(folder, pairs, flushing)
            assert len(os.listdir(folder / "inbound")) == count
    assert used == [2, _spool_files._FLUSHERS]
