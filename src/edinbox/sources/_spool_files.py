"""Low-level spool file work: what kind of entry a path is, reading a claim within a limit, parking names, publishing.

Nothing here follows a symlink: every path is a name relative to a folder's descriptor (`_spool_folders`), files are
opened with `O_NOFOLLOW` (and `O_NONBLOCK`, so a fifo never blocks), and only after `lstat` or `fstat` said they are
regular files with one link (a hard link's other name may be anywhere on the volume: it is parked, never read).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from edinbox._errors import ConfigurationError, SourceError
from edinbox.sources._base import Outgoing, Publisher, publish_once
from edinbox.sources._spool_folders import Folders

__all__ = [
    "HEAD",
    "OPEN_FLAGS",
    "SpoolPublisher",
    "file_name",
    "file_problem",
    "free_name",
    "head",
    "kind_problem",
    "publish",
    "read_payload",
    "scan",
    "spool_path",
    "too_big",
    "why",
    "write_atomically",
]

HEAD = 64 * 1024
"""How much of a parked file a refused delivery carries as its payload."""
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def spool_path(url: str) -> Path:
    """Return the folder a `dir:///absolute/path` or `dir:relative/path` URL names.

    `dir://name` is refused, as `sqlite://name` is: after two slashes comes a host, not a path.
    """
    parts = urlsplit(url)
    if parts.scheme != "dir":
        raise ConfigurationError(f"not a spool URL: {url!r} (expected dir:///path)")
    if parts.netloc:
        raise ConfigurationError(
            f"invalid spool URL {url!r}: use dir:///absolute/path or dir:relative/path (dir://NAME names a host)"
        )
    raw = unquote(parts.path)
    if not raw:
        raise ConfigurationError(f"the spool URL {url!r} names no folder")
    return Path(raw)


def kind_problem(mode: int) -> str:
    """Why an entry of this `st_mode` cannot be delivered; empty for a regular file."""
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISLNK(mode):
        return "a symbolic link (the spool never follows one)"
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    return "not a regular file"


def file_problem(info: os.stat_result) -> str:
    """Why the entry `info` describes (from `lstat` or `fstat`) cannot be delivered; empty for a regular file with a
    single link."""
    if problem := kind_problem(info.st_mode):
        return problem
    if info.st_nlink > 1:
        return f"a file with {info.st_nlink} hard links (the spool reads none: its other names may be anywhere)"
    return ""


def why(exc: OSError) -> str:
    """The error without the file names it carries (they may not be printable)."""
    return exc.strerror or type(exc).__name__


def too_big(size: int, limit: int) -> str:
    """The reason a payload of `size` bytes is refused."""
    return f"the payload has {size} bytes, more than max_payload ({limit} bytes)"


def read_payload(fd: int, size: int, limit: int) -> bytes:
    """Read an open file to its end, but never more than `limit + 1` bytes."""
    chunks = []
    total = 0
    want = min(size, limit) + 1
    while total <= limit:
        asked = max(want - total, 1 << 16)
        chunk = os.read(fd, asked)
        chunks.append(chunk)
        total += len(chunk)
        if len(chunk) < asked:  # a regular file on Linux reads short only at its end
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def head(folder: int, name: str) -> tuple[bytes, int | None]:
    """The first bytes of the parked regular file `name` in `folder` and its size; nothing for anything else (links
    are not followed, a hard-linked file is not read)."""
    try:
        if file_problem(os.stat(name, dir_fd=folder, follow_symlinks=False)):  # a device or a fifo is never opened
            return b"", None
        fd = os.open(name, OPEN_FLAGS, dir_fd=folder)
    except OSError:
        return b"", None
    try:
        info = os.fstat(fd)
        if file_problem(info):
            return b"", None
        return os.pread(fd, HEAD, 0), info.st_size
    except OSError:
        return b"", None
    finally:
        os.close(fd)


def _exists(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def free_name(folder: int, name: str) -> str:
    """`name`, or `name.<random>` when `folder` already holds a file (or reason) of that name."""
    if _exists(folder, name) or _exists(folder, f"{name}.reason"):
        return f"{name}.{uuid.uuid4().hex[:8]}"
    return name


def scan(folder: int) -> list[str]:
    """The names in the folder open as `folder` that do not start with `.`."""
    with os.scandir(folder) as it:
        return [e.name for e in it if not e.name.startswith(".")]


def write_atomically(tmp: int, folder: int, name: str, data: bytes) -> None:
    """Write `data` to a scratch file in the folder `tmp`, flush it to disk, then rename it over `name` in `folder`
    (the scratch file is created anew, never through a link)."""
    scratch = f".{uuid.uuid4().hex}"
    fd = os.open(scratch, _WRITE_FLAGS, 0o666, dir_fd=tmp)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(scratch, dir_fd=tmp)
        raise
    os.close(fd)
    os.replace(scratch, name, src_dir_fd=tmp, dst_dir_fd=folder)


def file_name(message_id: str) -> str:
    """The inbound file name for a payload published with a producer id: ordered by time, unique, one extension.

    Dots of the id are escaped too (`order.x12` -> `order%2Ex12.edi`), so a file published under its own name never
    gets a double extension; the reader unquotes them.
    """
    return f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}~{quote(message_id, safe='').replace('.', '%2E')[:180]}.edi"


class SpoolPublisher(Publisher):
    """Writes files into a spool folder's `inbound/`, the producer id in each file name; headers are refused: a
    spool file carries its payload and its name only."""

    def __init__(self, url: str) -> None:
        """Publish into the spool folder `url` names (created with its `inbound/` and `tmp/` at the first send)."""
        self.root = spool_path(url)
        self.url = url
        self._flushing: ThreadPoolExecutor | None = None
        self._writing: ThreadPoolExecutor | None = None

    async def open(self) -> None:
        """Start the thread that writes files and the threads that flush them to disk."""
        self._flushing = ThreadPoolExecutor(_FLUSHERS, thread_name_prefix="edinbox-spool-flush")
        self._writing = ThreadPoolExecutor(1, thread_name_prefix="edinbox-spool-write")

    async def send(self, messages: Sequence[Outgoing]) -> None:
        """Write each payload atomically (tmp/ first, then a rename), in the publisher's own thread: a relay
        publishing beside the hub holds neither its event loop nor the loop's default threads (which parse the
        hub's batches) through the fsyncs."""
        for message in messages:
            if message.headers:
                raise ConfigurationError(f"{message.message_id}: a spool folder (dir://) carries no headers")
        if self._flushing is None or self._writing is None:
            raise SourceError(f"cannot publish into the spool folder {self.root}: the publisher is not open")
        pairs = [(m.message_id, m.payload) for m in messages]
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._writing, _write_all, self.root, pairs, self._flushing)
        except OSError as exc:
            raise SourceError(f"cannot publish into the spool folder {self.root}: {exc}") from exc

    async def aclose(self) -> None:
        """Stop the writing and flushing threads."""
        for pool in (self._writing, self._flushing):
            if pool is not None:
                pool.shutdown(wait=False)
        self._writing = self._flushing = None


async def publish(url: str, messages: Sequence[tuple[str, bytes] | Outgoing]) -> None:
    """Write each `(message_id, payload)` into the spool folder's `inbound/` atomically."""
    await publish_once(SpoolPublisher(url), messages)


def _flush_files(fds: Sequence[int], flushing: Executor) -> None:
    """Flush files to disk: a few in this thread one after the other, more in slices flushed by several threads at
    once (the disk commits them together); each slice holds `_FILES_PER_FLUSHER` files or more, as every thread
    that wakes for a file costs the interpreter's lock a hand-over or two, which the hub working beside pays."""
    slices = min(_FLUSHERS, len(fds) // _FILES_PER_FLUSHER)
    if slices < 2:
        _flush_slice(fds)
        return
    list(flushing.map(_flush_slice, [fds[n::slices] for n in range(slices)]))


def _flush_slice(fds: Sequence[int]) -> None:
    for fd in fds:
        os.fsync(fd)


_FLUSHERS = 8
"""Threads flushing one send's files at once, at most."""
_FILES_PER_FLUSHER = 16
"""Files a flushing thread takes at least (fewer files are flushed by the writing thread alone)."""
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _write_all(root: Path, messages: Sequence[tuple[str, bytes]], flushing: Executor) -> None:
    """Write every scratch file, flush them all to disk, rename each into `inbound/`, then flush `inbound/`.

    The root, `inbound/` and `tmp/` are opened for each send (created when missing) and every file is written
    relative to them, never through a link: a subfolder that is a symlink is a ConfigurationError (the relay parks
    the rows with it), as it is for the source.

    Plain descriptors and string paths: each file is opened once, and the relay calls this for every pass beside a
    busy hub, whose thread waits for the interpreter while this one holds it. Many files are flushed in slices by
    the threads of `flushing` at once, so the file system commits them in a few journal commits instead of one each
    (a tenth of the time for 100 files on a busy ext4 disk); a few are flushed by this thread (`_flush_files`). No
    file is renamed before every file is flushed: a failure part way leaves none under its final name."""
    folders = Folders(root, ("inbound", "tmp"), create=True)
    tmp, inbound = folders["tmp"], folders["inbound"]
    scratch: list[tuple[str, str, int]] = []
    renamed = 0
    try:
        for message_id, payload in messages:
            name = f".{uuid.uuid4().hex}"
            scratch.append((name, message_id, os.open(name, _WRITE_FLAGS, 0o666, dir_fd=tmp)))
            view = memoryview(payload)
            while view:
                view = view[os.write(scratch[-1][2], view) :]
        _flush_files([fd for _, _, fd in scratch], flushing)
        for name, message_id, _ in scratch:
            os.replace(name, file_name(message_id), src_dir_fd=tmp, dst_dir_fd=inbound)
            renamed += 1
        if scratch:  # the renames themselves survive a crash only once the folder is flushed
            os.fsync(inbound)
    finally:
        for n, (name, _, fd) in enumerate(scratch):
            os.close(fd)
            if n >= renamed:  # a failure part way: the files not renamed are removed
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=tmp)
        folders.close()
