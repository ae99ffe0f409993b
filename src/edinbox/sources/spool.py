"""The spool folder as a broker: `dir:///srv/edi` with inbound/, processing/, archive/ and rejected/.

Files dropped into `inbound/` are delivered at least once. A delivery is claimed by an atomic rename into the
claiming process's own folder under `processing/`, so several hub processes can share one spool and a file is
handed to one of them at a time. The ack is the move to `archive/`, done by the hub after its transaction
committed: a crash between the commit and the move leaves the file in `processing/`, and the next process to look
moves it back to `inbound/` (a stale claim: its owner is dead, or its claim is older than `claim_timeout`), so it
is delivered again. `reject` moves the file to `rejected/` with a `.reason` file beside it.

Producer ids travel in the file name: `publish` writes `<time>-<random>~<quoted message id>.edi`, first into
`tmp/`, then renames it into `inbound/`, so readers never see half a file. Files dropped by hand have no producer
id; their name is the fallback key.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from edinbox._errors import ConfigurationError, SourceError
from edinbox.sources._base import Delivery, Source
from edinbox.sources._options import positive_float, split_url

__all__ = ["SOURCE", "SpoolSource", "file_name", "publish", "spool_path"]

_FOLDERS = ("inbound", "processing", "archive", "rejected", "tmp")
_REDELIVERED = re.compile(r"^(?P<name>.*?)(?:#(?P<count>\d+))?$")
_POLL = 0.05


def spool_path(url: str) -> Path:
    """Return the folder a `dir:///path` URL names (a relative `dir:relative/path` is allowed too)."""
    parts = urlsplit(url)
    if parts.scheme != "dir":
        raise ConfigurationError(f"not a spool URL: {url!r} (expected dir:///path)")
    raw = unquote(parts.netloc + parts.path)
    if not raw:
        raise ConfigurationError(f"the spool URL {url!r} names no folder")
    return Path(raw)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True, slots=True)
class _Claim:
    """Where a claimed file lives while the hub works on it."""

    path: Path
    name: str


class SpoolSource(Source):
    """Deliveries from files in `inbound/`; ack moves them to `archive/`, reject to `rejected/`."""

    def __init__(self, root: Path, *, consumer: str, claim_timeout: float = 300.0) -> None:
        """Prepare a source on the spool folder `root`; `open()` creates the folders."""
        self.root = root
        self.url = f"dir://{root}"
        self.consumer = consumer
        self.claim_timeout = claim_timeout
        owner = (_safe(consumer), _safe(socket.gethostname()), str(os.getpid()), uuid.uuid4().hex[:8])
        self._claims = root / "processing" / "@".join(owner)
        self._last_recovery = 0.0

    @classmethod
    def from_url(cls, url: str, *, consumer: str, **options: Any) -> SpoolSource:
        """Build a source from `dir:///path[?claim_timeout=SECONDS]`; unknown options are refused."""
        _, opts = split_url(url, schemes=("dir",), overrides=options)
        timeout = opts.take("claim_timeout", positive_float, 300.0)
        opts.finish()
        return cls(spool_path(url), consumer=consumer, claim_timeout=timeout)

    async def open(self) -> None:
        """Create the spool folders and this process's claim folder, and recover stale claims."""
        try:
            for name in _FOLDERS:
                (self.root / name).mkdir(parents=True, exist_ok=True)
            self._claims.mkdir()
        except OSError as exc:
            raise SourceError(f"cannot prepare the spool folder {self.root}: {exc}") from exc
        self.recover()

    def recover(self) -> int:
        """Move files claimed by dead processes (or claimed longer than `claim_timeout` ago) back to `inbound/`."""
        moved = 0
        host = _safe(socket.gethostname())
        now = time.time()
        self._last_recovery = time.monotonic()
        for folder in _scan(self.root / "processing"):
            if folder == self._claims or not folder.is_dir():
                continue
            owner = folder.name.rsplit("@", 3)
            dead = len(owner) == 4 and owner[1] == host and owner[2].isdigit() and not _pid_alive(int(owner[2]))
            for path in _scan(folder):
                try:
                    expired = now - path.stat().st_mtime > self.claim_timeout
                except FileNotFoundError:
                    continue
                if dead or expired:
                    moved += _redeliver(path, self.root / "inbound")
            if dead:
                # not empty yet (a file was added meanwhile) or already removed by another process
                with contextlib.suppress(OSError):
                    folder.rmdir()
        return moved

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Claim up to `max_messages` files from `inbound/`, oldest first, waiting up to `timeout` for the first."""
        deadline = time.monotonic() + timeout
        while True:
            if time.monotonic() - self._last_recovery > min(self.claim_timeout, 5.0):
                self.recover()
            deliveries = self._claim(max_messages)
            if deliveries or time.monotonic() >= deadline:
                return deliveries
            await asyncio.sleep(min(_POLL, max(0.0, deadline - time.monotonic())))

    def _claim(self, limit: int) -> list[Delivery]:
        inbound = self.root / "inbound"
        now = time.time()
        candidates = []
        for entry in _scan_entries(inbound):
            try:
                mtime = entry.stat().st_mtime
            except FileNotFoundError:
                continue
            if mtime <= now:  # a nack with a delay sets the modification time in the future
                candidates.append((mtime, entry.name))
        candidates.sort()
        out: list[Delivery] = []
        for _, name in candidates:
            if len(out) >= limit:
                break
            target = self._claims / name
            try:
                os.rename(inbound / name, target)
            except FileNotFoundError:
                continue  # another process claimed it first
            except OSError as exc:
                raise SourceError(f"cannot claim {name} in {self.root}: {exc}") from exc
            os.utime(target)  # the claim's age starts now
            out.append(self._delivery(target))
        return out

    def _delivery(self, path: Path) -> Delivery:
        match = _REDELIVERED.match(path.name)
        assert match is not None  # noqa: S101 - the pattern matches every string
        base, count = match["name"], int(match["count"] or 1)
        message_id = unquote(base.split("~", 1)[1].removesuffix(".edi")) if "~" in base else None
        return Delivery(
            path.read_bytes(),
            message_id=message_id or None,
            coordinates=f"dir:{base}",
            source=f"dir:{self.root.name}",
            delivery_count=count,
            redelivered=count > 1,
            handle=_Claim(path, base),
        )

    async def ack(self, delivery: Delivery) -> None:
        """Move the claimed file to `archive/`: it will not be delivered again."""
        claim = _handle(delivery)
        try:
            os.replace(claim.path, self.root / "archive" / claim.name)
        except OSError as exc:
            raise SourceError(f"cannot archive {claim.name}: {exc}") from exc

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Put the file back into `inbound/` (not before `delay` seconds when given)."""
        claim = _handle(delivery)
        if delay:
            when = time.time() + delay
            os.utime(claim.path, (when, when))
        _redeliver(claim.path, self.root / "inbound")

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Move the file to `rejected/` with `<name>.reason` beside it saying why; it is never delivered again."""
        claim = _handle(delivery)
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        note = f"{reason}\nrejected-at: {stamp}\nconsumer: {self.consumer}\n"
        rejected = self.root / "rejected"
        try:
            _write_atomically(self.root / "tmp", rejected / f"{claim.name}.reason", note.encode())
            os.replace(claim.path, rejected / claim.name)
        except OSError as exc:
            raise SourceError(f"cannot park {claim.name} in rejected/: {exc}") from exc

    async def in_progress(self, delivery: Delivery) -> None:
        """Refresh the claim so other processes do not take it as stale."""
        os.utime(_handle(delivery).path)

    async def aclose(self) -> None:
        """Give unacked claims back to `inbound/` and remove this process's claim folder."""
        for path in _scan(self._claims):
            _redeliver(path, self.root / "inbound")
        with contextlib.suppress(OSError):  # already gone, or a file was left behind: recovery moves it back
            self._claims.rmdir()


def _handle(delivery: Delivery) -> _Claim:
    if not isinstance(delivery.handle, _Claim):
        raise SourceError("this delivery did not come from a spool source")
    return delivery.handle


def _scan(folder: Path) -> list[Path]:
    return [Path(e.path) for e in _scan_entries(folder)]


def _scan_entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return [e for e in it if not e.name.startswith(".")]
    except FileNotFoundError:
        return []


def _redeliver(path: Path, inbound: Path) -> int:
    """Move a claimed file back to `inbound/`, counting the delivery in its name; 0 if another process did."""
    match = _REDELIVERED.match(path.name)
    assert match is not None  # noqa: S101 - the pattern matches every string
    count = int(match["count"] or 1) + 1
    try:
        os.rename(path, inbound / f"{match['name']}#{count}")
    except FileNotFoundError:
        return 0
    return 1


def _write_atomically(tmp: Path, target: Path, data: bytes) -> None:
    scratch = tmp / f".{uuid.uuid4().hex}"
    with open(scratch, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(scratch, target)


def file_name(message_id: str) -> str:
    """The inbound file name for a payload published with a producer id: ordered by time, unique."""
    return f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}~{quote(message_id, safe='')[:180]}.edi"


async def publish(url: str, messages: Sequence[tuple[str, bytes]]) -> None:
    """Write each `(message_id, payload)` into `inbound/` atomically (tmp/ first, then a rename)."""
    root = spool_path(url)
    try:
        for name in ("inbound", "tmp"):
            (root / name).mkdir(parents=True, exist_ok=True)
        for message_id, payload in messages:
            _write_atomically(root / "tmp", root / "inbound" / file_name(message_id), payload)
    except OSError as exc:
        raise SourceError(f"cannot publish into the spool folder {root}: {exc}") from exc


SOURCE = SpoolSource
