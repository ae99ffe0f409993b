"""The process that writes spool files for the `dir://` publishers, and the handle a publisher talks to it through.

Writing a file durably takes five system calls (create, write, flush, close, rename), and a thread of the hub's own
process takes the interpreter's lock back after each one: a relay sending beside a busy hub cost the hub a lock
hand-over per call (a dozen context switches per file, a third of its rate on two cores). A child process writes
the files instead, with an interpreter of its own; the hub's event loop only writes a request to a pipe and reads
the answer. The child runs this file with the standard library alone (`python -I`: no package of the caller is
imported), is shared by the publishers of one event loop, ignores SIGINT and SIGTERM (a send it began is finished,
never cut part way), and exits when its pipe closes: the last publisher closed, or the parent died (the rows of a
send it was writing were never marked sent, and are sent again: at least once).

Each send is written as the spool has always been written: scratch files in tmp/, each flushed to disk before it is
renamed into inbound/, inbound/ flushed after the last rename, and a failure part way leaves no file under a final
name. The answer is written only after the folder's flush, so a relay marks rows sent only once they survive a
power loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import marshal
import os
import signal
import struct
import sys
import time
import uuid
import weakref
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import BinaryIO
from urllib.parse import quote

__all__ = ["Writer", "file_name", "release", "shared", "write_all"]

_FLUSHERS = 8
"""Threads flushing one send's files at once, at most."""
_FILES_PER_FLUSHER = 16
"""Files a flushing thread takes at least (fewer files are flushed by the writing thread alone)."""
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_SCRIPT = os.path.abspath(__file__)
"""This file, which the child process runs."""
_LENGTH = struct.Struct(">Q")
"""The frame of every request and answer on the pipes: its length, then that many bytes of `marshal` data."""


def file_name(message_id: str) -> str:
    """The inbound file name for a payload published with a producer id: ordered by time, unique, one extension.

    Dots of the id are escaped too (`order.x12` -> `order%2Ex12.edi`), so a file published under its own name never
    gets a double extension; the reader unquotes them.
    """
    return f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}~{quote(message_id, safe='').replace('.', '%2E')[:180]}.edi"


def write_all(root: str, messages: Sequence[tuple[str, bytes]], flushing: Executor) -> None:
    """Write every scratch file, flush them all to disk, rename each into `inbound/`, then flush `inbound/`.

    Many files are flushed in slices by the threads of `flushing` at once, so the file system commits them
    together (a tenth of the time for 100 files on a busy ext4 disk); a few are flushed by this thread
    (`_flush_files`). No file is renamed before every file is flushed: a failure part way leaves none under its
    final name, and its scratch files are removed."""
    tmp, inbound = os.path.join(root, "tmp"), os.path.join(root, "inbound")
    for folder in (inbound, tmp):
        os.makedirs(folder, exist_ok=True)
    scratch: list[tuple[str, str, int]] = []
    renamed = 0
    try:
        for message_id, payload in messages:
            path = os.path.join(tmp, f".{uuid.uuid4().hex}")
            scratch.append((path, message_id, os.open(path, _WRITE_FLAGS, 0o666)))
            view = memoryview(payload)
            while view:
                view = view[os.write(scratch[-1][2], view) :]
        _flush_files([fd for _, _, fd in scratch], flushing)
        for path, message_id, _ in scratch:
            os.replace(path, os.path.join(inbound, file_name(message_id)))
            renamed += 1
        if scratch:  # the renames themselves survive a crash only once the folder is flushed
            _flush_folder(inbound)
    finally:
        for n, (path, _, fd) in enumerate(scratch):
            os.close(fd)
            if n >= renamed:  # a failure part way: the files not renamed are removed
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)


def _flush_folder(folder: str) -> None:
    """Flush a folder's entries (the names renamed into it) to disk."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _flush_files(fds: Sequence[int], flushing: Executor) -> None:
    """Flush files to disk: a few in this thread one after the other, more in slices flushed by several threads at
    once (the disk commits them together); each slice holds `_FILES_PER_FLUSHER` files or more."""
    slices = min(_FLUSHERS, len(fds) // _FILES_PER_FLUSHER)
    if slices < 2:
        _flush_slice(fds)
        return
    list(flushing.map(_flush_slice, [fds[n::slices] for n in range(slices)]))


def _flush_slice(fds: Sequence[int]) -> None:
    for fd in fds:
        os.fsync(fd)


def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    """The child's loop: for each request `(folder, [(message id, payload), ...])`, write the files (`write_all`)
    and answer None, or the failure as `(errno, message, file name)`; return when `requests` ends."""
    with ThreadPoolExecutor(_FLUSHERS, thread_name_prefix="edinbox-spool-flush") as flushing:
        while head := requests.read(_LENGTH.size):
            (size,) = _LENGTH.unpack(head)
            root, messages = marshal.loads(requests.read(size))  # noqa: S302 (the parent's own pipe)
            answer = None
            try:
                write_all(root, messages, flushing)
            except OSError as exc:
                answer = (exc.errno, exc.strerror or str(exc), exc.filename)
            data = marshal.dumps(answer)
            answers.write(_LENGTH.pack(len(data)) + data)
            answers.flush()


class Writer:
    """The handle of one child process that writes spool files; started at the first `write`, again after a
    failure."""

    def __init__(self) -> None:
        """No process yet."""
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self.users = 0
        """How many open publishers share it (`shared`, `release`)."""
        self.started = 0
        """How many child processes it started so far."""

    async def write(self, root: str, messages: Sequence[tuple[str, bytes]]) -> None:
        """Have the child write `messages` into the spool folder `root`; return once every file and the folder are
        flushed. OSError for the child's failure to write them, EOFError or OSError when the child is gone (the
        next call starts another one)."""
        request = marshal.dumps((root, [(message_id, bytes(payload)) for message_id, payload in messages]))
        async with self._lock:
            process = self._process
            if process is None or process.returncode is not None:
                process = self._process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-I",
                    _SCRIPT,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                )
                self.started += 1
            requests, answers = process.stdin, process.stdout
            try:
                if requests is None or answers is None:  # never: both are pipes
                    raise EOFError("the spool writer has no pipes")
                requests.write(_LENGTH.pack(len(request)) + request)
                await requests.drain()
                (size,) = _LENGTH.unpack(await answers.readexactly(_LENGTH.size))
                answer = marshal.loads(await answers.readexactly(size))  # noqa: S302 (our child's own pipe)
            except BaseException:  # the pipe is out of step, or the child is gone: a new one next time
                self._process = None
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await asyncio.shield(process.wait())
                raise
        if answer is not None:
            raise OSError(*answer)

    async def aclose(self) -> None:
        """Close the child's pipe and wait for it to exit (after the send it is writing, if any)."""
        async with self._lock:
            process, self._process = self._process, None
            if process is None:
                return
            if process.stdin is not None:
                process.stdin.close()
                with contextlib.suppress(ConnectionError):
                    await process.stdin.wait_closed()
            await process.wait()


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Writer] = weakref.WeakKeyDictionary()


def shared() -> Writer:
    """The writer of the running event loop's spool publishers, one more user counted (`release` when done)."""
    loop = asyncio.get_running_loop()
    writer = _SHARED.get(loop)
    if writer is None:
        writer = _SHARED[loop] = Writer()
    writer.users += 1
    return writer


async def release(writer: Writer) -> None:
    """One user fewer; the last one stops the child process."""
    writer.users -= 1
    if writer.users <= 0:
        loop = asyncio.get_running_loop()
        if _SHARED.get(loop) is writer:
            del _SHARED[loop]
        await writer.aclose()


if __name__ == "__main__":
    for number in (signal.SIGINT, signal.SIGTERM):  # the parent's stop ends the pipe; a send is never cut short
        signal.signal(number, signal.SIG_IGN)
    serve(sys.stdin.buffer, sys.stdout.buffer)
