"""Low-level spool file work: what kind of entry a path is, reading a claim within a limit, parking names, publishing.

Nothing here follows a symlink: files are opened with `O_NOFOLLOW` (and `O_NONBLOCK`, so a fifo never blocks), and
only after `lstat` or `fstat` said they are regular files.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

from edinbox._errors import ConfigurationError, SourceError
from edinbox.sources._base import Outgoing, Publisher, publish_once
from edinbox.sources._spool_writer import Writer, file_name, release, shared

__all__ = [
    "HEAD",
    "OPEN_FLAGS",
    "SpoolPublisher",
    "file_name",
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


def head(path: str) -> tuple[bytes, int | None]:
    """The first bytes of a parked regular file and its size; nothing for anything else (links are not followed)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):  # a device or a fifo is never opened
            return b"", None
        fd = os.open(path, OPEN_FLAGS)
    except OSError:
        return b"", None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return b"", None
        return os.pread(fd, HEAD, 0), info.st_size
    except OSError:
        return b"", None
    finally:
        os.close(fd)


def free_name(folder: str, name: str) -> str:
    """`name`, or `name.<random>` when `folder` already holds a file (or reason) of that name."""
    if os.path.lexists(os.path.join(folder, name)) or os.path.lexists(os.path.join(folder, f"{name}.reason")):
        return f"{name}.{uuid.uuid4().hex[:8]}"
    return name


def scan(folder: Path) -> list[Path]:
    """The entries of `folder` whose names do not start with `.` (none when it is missing)."""
    try:
        with os.scandir(folder) as it:
            return [Path(e.path) for e in it if not e.name.startswith(".")]
    except FileNotFoundError:
        return []


def write_atomically(tmp: Path, target: Path, data: bytes) -> None:
    """Write `data` to a scratch file in `tmp`, flush it to disk, then rename it over `target`."""
    scratch = tmp / f".{uuid.uuid4().hex}"
    with open(scratch, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(scratch, target)


class SpoolPublisher(Publisher):
    """Writes files into a spool folder's `inbound/`, the producer id in each file name; headers are refused: a
    spool file carries its payload and its name only."""

    def __init__(self, url: str) -> None:
        """Publish into the spool folder `url` names (created with its `inbound/` and `tmp/` at the first send)."""
        self.root = spool_path(url)
        self.url = url
        self._writer: Writer | None = None

    async def open(self) -> None:
        """Take a share of the event loop's spool writer (`_spool_writer`: a child process, started at the first
        send)."""
        if self._writer is None:
            self._writer = shared()

    async def send(self, messages: Sequence[Outgoing]) -> None:
        """Write each payload atomically (tmp/ first, each file flushed, then renamed, the folder flushed), in the
        spool writer's process: a relay publishing beside the hub takes none of the hub's interpreter, threads or
        event loop through the system calls and the flushes."""
        for message in messages:
            if message.headers:
                raise ConfigurationError(f"{message.message_id}: a spool folder (dir://) carries no headers")
        if self._writer is None:
            raise SourceError(f"cannot publish into the spool folder {self.root}: the publisher is not open")
        try:
            await self._writer.write(str(self.root), [(m.message_id, m.payload) for m in messages])
        except (OSError, EOFError) as exc:
            raise SourceError(f"cannot publish into the spool folder {self.root}: {exc}") from exc

    async def aclose(self) -> None:
        """Give back the share of the spool writer (the last publisher of the loop stops its process)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            await release(writer)


async def publish(url: str, messages: Sequence[tuple[str, bytes] | Outgoing]) -> None:
    """Write each `(message_id, payload)` into the spool folder's `inbound/` atomically."""
    await publish_once(SpoolPublisher(url), messages)
