"""The spool folder as a broker: `dir:///srv/edi` with inbound/, processing/, archive/ and rejected/.

Files dropped into `inbound/` are delivered at least once, in name order. A delivery is claimed by an atomic rename
into the claiming process's own folder under `processing/`, so several hub processes can share one spool and a file
is handed to one of them at a time (a lost race just skips the file). The ack is the move to `archive/`, done by the
hub after its transaction committed: a crash between the commit and the move leaves the file in `processing/`, and
the next process to look moves it back to `inbound/` (a stale claim: its owner is dead, its pid now names another
process, or its claim is older than `claim_timeout`), so it is delivered again. `claim_timeout` is the source's
`ack_wait`: a hub holding a claim longer than a third of it refreshes it with `in_progress`. `reject` moves the file to
`rejected/` with a `.reason` file beside it (its content flushed to disk before it is renamed into place, and
renamed before the file, so a parked file never has a half-written reason). Neither folder is flushed after these
moves, as `archive/` is not after an ack: a rename that a power cut undoes leaves the file in its claim, which is
recovered and delivered again, and the hub finds it settled, or parks it again (the journal keeps one row, counting
its deliveries); a flush would only spare that redelivery, at the cost of a disk write per settled file.

Each process lists `inbound/` once per refresh into a queue in memory and claims from it, so draining N waiting
files costs O(N) in all: only the file being claimed is examined (`lstat`, then `fstat` on the opened claim).

The spool takes regular files only and never follows a symlink. It parks at once in `rejected/`, with a `.reason`,
anything it cannot deliver: a symlink (its target is never read), a directory or other special file, a file over
`max_payload` bytes (never read whole), a name that is not UTF-8, has control characters or is too long (parked under
a generated name, the original escaped in the `.reason`), a file that cannot be claimed or read. A name starting
with `.` is a file its producer is still writing (the dot-prefix convention of rsync and many FTP servers): it is
left alone until untouched for `dotfile_timeout` seconds (default an hour), then parked as abandoned. Each parked
file still comes out of `receive` as a delivery with `reason` set (and its first 64 KiB as payload, its full size in
`size` when bigger), so the hub records and counts it as rejected; ack, nack and reject of it do nothing more.

Producer ids travel in the file name: `publish` writes `<time>-<random>~<quoted message id>.edi`, first into
`tmp/`, then renames it into `inbound/`, so readers never see half a file. Files dropped by hand have no producer
id; their name is the fallback key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from edinbox._errors import SourceError
from edinbox.sources._base import Delivery, Source
from edinbox.sources._options import positive_float, positive_int, split_url
from edinbox.sources._spool_files import (
    HEAD,
    OPEN_FLAGS,
    SpoolPublisher,
    file_name,
    free_name,
    head,
    kind_problem,
    publish,
    read_payload,
    scan,
    spool_path,
    too_big,
    why,
    write_atomically,
)
from edinbox.sources._spool_names import (
    name_problem,
    owner_dead,
    owner_id,
    parked_name,
    safe,
    shown,
    split_count,
)

__all__ = [
    "BATCH_BYTES",
    "HEAD",
    "MAX_PAYLOAD",
    "PUBLISHER",
    "SOURCE",
    "SpoolSource",
    "file_name",
    "publish",
    "spool_path",
]

MAX_PAYLOAD = 32 * 1024 * 1024
"""The default `max_payload`: bigger files are parked unread."""
BATCH_BYTES = 16 * 1024 * 1024
"""A receive claims no more files once those it read add up to this many bytes: a batch of big files holds a few of
them (at most this plus one `max_payload`), whatever `max_messages` allows."""

_FOLDERS = ("inbound", "processing", "archive", "rejected", "tmp")
_POLL = 0.05
_REFRESH = 1.0  # the queue is listed again at least this often (new files join it in name order)
_LISTING_SHARE = 20  # ... and at most once per 20 listing durations, so listing a big backlog costs <= 5 %
_DOT_CHECK = 10.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Claim:
    """Where a claimed file lives while the hub works on it."""

    path: str
    name: str


@dataclass(frozen=True, slots=True)
class _Parked:
    """A file the source parked in `rejected/` itself: nothing is left to settle."""

    path: str


class SpoolSource(Source):
    """Deliveries from files in `inbound/`; ack moves them to `archive/`, reject to `rejected/`."""

    def __init__(
        self,
        root: Path,
        *,
        consumer: str,
        claim_timeout: float = 300.0,
        max_payload: int = MAX_PAYLOAD,
        dotfile_timeout: float = 3600.0,
    ) -> None:
        """Prepare a source on the spool folder `root`; `open()` creates the folders."""
        self.root = root
        self.url = f"dir://{root}"
        self.consumer = consumer
        self.claim_timeout = claim_timeout
        self.ack_wait = claim_timeout  # a claim untouched this long is stale: `in_progress` refreshes it
        self.max_payload = max_payload
        self.dotfile_timeout = dotfile_timeout
        owner = (safe(consumer), safe(socket.gethostname()), owner_id(os.getpid()), uuid.uuid4().hex[:8])
        self._claims = root / "processing" / "@".join(owner)
        self._inbound = str(root / "inbound")
        self._rejected = str(root / "rejected")
        self._archive = str(root / "archive")
        self._last_recovery = 0.0
        self._queue: deque[str] = deque()
        self._dots: list[str] = []
        self._listed = -_REFRESH
        self._listing_cost = 0.0
        self._dots_checked = 0.0
        self._skipped: set[str] = set()
        self._parked: deque[Delivery] = deque()  # parked outside a receive (recovery), handed out by the next one

    parks_oversize = True
    receives_ahead = True
    """`open_source(..., max_payload=)` sets the size over which a file is parked unread, unless the URL sets it."""

    @classmethod
    def from_url(cls, url: str, *, consumer: str, payload_limit: int | None = None, **options: Any) -> SpoolSource:
        """Build a source from `dir:///path[?claim_timeout=S&max_payload=BYTES&dotfile_timeout=S]`; unknown options
        are refused. `payload_limit` (the hub's) is the default `max_payload`; the URL's option wins."""
        _, opts = split_url(url, schemes=("dir",), overrides=options)
        timeout = opts.take("claim_timeout", positive_float, 300.0)
        max_payload = opts.take("max_payload", positive_int, payload_limit or MAX_PAYLOAD)
        dotfile_timeout = opts.take("dotfile_timeout", positive_float, 3600.0)
        opts.finish()
        return cls(
            spool_path(url),
            consumer=consumer,
            claim_timeout=timeout,
            max_payload=max_payload,
            dotfile_timeout=dotfile_timeout,
        )

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
        """Move files claimed by dead processes (or claimed longer than `claim_timeout` ago, by any process, this one
        too) back to `inbound/`."""
        moved = 0
        host = safe(socket.gethostname())
        now = time.time()
        self._last_recovery = time.monotonic()
        for folder in scan(self.root / "processing"):
            if not folder.is_dir():
                continue
            # this process's own claims too: one it handed out and nobody settled (a hub stops handing back a
            # batch after an ack failed, a file whose parking failed) comes back once it is claim_timeout old
            owner = folder.name.rsplit("@", 3)
            own = folder == self._claims
            dead = not own and len(owner) == 4 and owner[1] == host and owner_dead(owner[2])
            for path in scan(folder):
                try:
                    expired = now - path.lstat().st_mtime > self.claim_timeout
                except FileNotFoundError:
                    continue
                if dead or expired:
                    moved += self._redeliver(str(path))
            if dead:
                # not empty yet (a file was added meanwhile) or already removed by another process
                with contextlib.suppress(OSError):
                    folder.rmdir()
        return moved

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Claim up to `max_messages` files from `inbound/` in name order (fewer once they add up to `BATCH_BYTES`),
        waiting up to `timeout` for the first."""
        deadline = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            if now - self._last_recovery > min(self.claim_timeout, 5.0):
                self.recover()
            since = now - self._listed
            if since > max(_REFRESH, _LISTING_SHARE * self._listing_cost) or (not self._queue and since >= _POLL):
                self._list()
            deliveries = self._claim(max_messages)
            if deliveries or time.monotonic() >= deadline:
                return deliveries
            await asyncio.sleep(min(_POLL, max(0.0, deadline - time.monotonic())))

    def _list(self) -> None:
        """List `inbound/` once into the queue, in name order; names starting with `.` are kept apart."""
        started = time.monotonic()
        names: list[str] = []
        dots: list[str] = []
        try:
            with os.scandir(self._inbound) as entries:
                for entry in entries:
                    (dots if entry.name.startswith(".") else names).append(entry.name)
        except OSError as exc:  # gone too (the spool moved, its volume unmounted): an outage, not an empty spool
            raise SourceError(f"cannot list {self._inbound}: {why(exc)}") from exc
        names.sort()
        self._queue = deque(names)
        self._dots = dots
        self._listed = time.monotonic()
        self._listing_cost = self._listed - started

    def _claim(self, limit: int) -> list[Delivery]:
        out: list[Delivery] = []
        while self._parked and len(out) < limit:
            out.append(self._parked.popleft())
        now = time.time()
        if self._dots and time.monotonic() - self._dots_checked > _DOT_CHECK:
            out.extend(self._abandoned(now, limit))
        held = sum(len(d.payload) for d in out)
        while self._queue and len(out) < limit and held < BATCH_BYTES:
            name = self._queue.popleft()
            if name not in self._skipped:
                delivery = self._take(name, now)
                if delivery is not None:
                    out.append(delivery)
                    held += len(delivery.payload)
        return out

    def _abandoned(self, now: float, limit: int) -> list[Delivery]:
        """Park dot-files untouched for `dotfile_timeout` seconds (at most `limit` now; the rest at the next check)."""
        out: list[Delivery] = []
        while self._dots and len(out) < limit:
            name = self._dots.pop()
            try:
                age = now - os.lstat(os.path.join(self._inbound, name)).st_mtime
            except OSError:
                continue  # renamed into place by its producer meanwhile, or gone
            if age > self.dotfile_timeout and name not in self._skipped:
                reason = f"a hidden (dot) file untouched for {age:.0f} s: an upload its producer abandoned"
                claimed = os.path.join(self._claims, name)
                try:
                    os.rename(os.path.join(self._inbound, name), claimed)
                except OSError:
                    continue  # taken by another process, or renamed into place by its producer at this moment
                delivery = self._park(claimed, name, reason)
                if delivery is not None:
                    out.append(delivery)
        if not self._dots:
            self._dots_checked = time.monotonic()
        return out

    def _take(self, name: str, now: float) -> Delivery | None:
        """Claim one listed file, or park it when it cannot be delivered; None when another process took it."""
        path = os.path.join(self._inbound, name)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return self._park(path, name, f"cannot be examined: {why(exc)}")
        if info.st_mtime > now:  # held back: a nack with a delay sets the modification time in the future
            return None
        problem = name_problem(name) or kind_problem(info.st_mode)
        claimed = os.path.join(self._claims, name)
        try:
            os.rename(path, claimed)  # whatever it is: the claim settles a race with other processes
        except FileNotFoundError:
            if not self._claims.is_dir():  # removed under us: claims need it back
                self._claims.mkdir(parents=True, exist_ok=True)
            return None
        except OSError as exc:
            return self._park(path, name, f"{problem or 'cannot be claimed'}: {why(exc)}")
        if problem:
            return self._park(claimed, name, problem)
        return self._read_claim(claimed, name)

    def _read_claim(self, path: str, name: str) -> Delivery | None:
        """Read a claimed file whole, or park it (too big, swapped for another kind of file, unreadable)."""
        try:
            fd = os.open(path, OPEN_FLAGS)
        except OSError as exc:
            return self._park(path, name, f"cannot be opened without following links: {why(exc)}")
        try:
            info = os.fstat(fd)
            problem = kind_problem(info.st_mode)
            if not problem and info.st_size > self.max_payload:
                problem = too_big(info.st_size, self.max_payload)
            if not problem:
                os.utime(fd)  # the claim's age starts now
                payload = read_payload(fd, info.st_size, self.max_payload)
                if len(payload) > self.max_payload:  # it grew after it was handed over
                    problem = too_big(len(payload), self.max_payload)
        except OSError as exc:
            problem = f"cannot be read: {why(exc)}"
        finally:
            os.close(fd)
        if problem:
            return self._park(path, name, problem)
        return self._delivery(path, payload)

    def _delivery(self, path: str, payload: bytes) -> Delivery:
        base, count = split_count(os.path.basename(path))
        message_id = unquote(base.split("~", 1)[1].removesuffix(".edi")) if "~" in base else None
        return Delivery(
            payload,
            message_id=message_id or None,
            coordinates=f"dir:{base}",
            source=f"dir:{self.root.name}",
            delivery_count=count,
            redelivered=count > 1,
            handle=_Claim(path, base),
        )

    def _park(self, path: str, name: str, problem: str) -> Delivery | None:
        """Move `path` (a claim, or in inbound/ when it cannot be claimed) to `rejected/` with its reason, and return
        it as a refused delivery.

        None when another process took it first; a file that cannot be moved at all is logged once and skipped.
        """
        odd = name_problem(name)
        base = split_count(name)[0] if not odd else name
        target = free_name(self._rejected, parked_name(name) if odd else base)
        reason = problem if not odd or problem.startswith(odd) else f"{odd}; {problem}"
        reason = f"{reason}: '{shown(name)}'" if odd else reason
        parked = os.path.join(self._rejected, target)
        try:
            self._write_reason(target, reason, original=name)
            try:
                os.rename(path, parked)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(f"{parked}.reason")
                raise
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._skipped.add(name)
            with contextlib.suppress(OSError):  # a claim: recovered (and parked again) once claim_timeout old
                os.utime(path, follow_symlinks=False)
            problem_text = f"{reason}: {why(exc)}"
            _log.warning(
                "spool %s: cannot park '%s' (%s); it stays in place, a claim is tried again after claim_timeout",
                self.root,
                shown(name),
                problem_text,
            )
            return None
        first, size = head(parked)
        return Delivery(
            first,
            message_id=None,
            coordinates=f"dir:rejected/{target}",
            source=f"dir:{self.root.name}",
            handle=_Parked(parked),
            reason=reason,
            size=size if size is not None and size > len(first) else None,
        )

    def _write_reason(self, target: str, reason: str, *, original: str | None = None) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        lines = [reason.replace("\n", " ")]
        if original is not None:
            lines.append(f"original-name: {shown(original)}")
        lines += [f"rejected-at: {stamp}", f"consumer: {shown(self.consumer)}", ""]
        reason_file = Path(self._rejected) / f"{target}.reason"
        write_atomically(self.root / "tmp", reason_file, "\n".join(lines).encode(errors="backslashreplace"))

    def _redeliver(self, path: str) -> int:
        """Move a claimed file back to `inbound/`, counting the delivery in its name; 0 if another process did."""
        name = os.path.basename(path)
        base, count = split_count(name)
        try:
            os.rename(path, os.path.join(self._inbound, f"{base}#{count + 1}"))
        except FileNotFoundError:
            return 0
        except OSError as exc:  # e.g. a too long name claimed by an older version: park it instead
            parked = self._park(path, name, f"cannot be put back into inbound/: {why(exc)}")
            if parked is None:
                return 0
            self._parked.append(parked)
        return 1

    async def ack(self, delivery: Delivery) -> None:
        """Move the claimed file to `archive/`: it will not be delivered again."""
        claim = _handle(delivery)
        if claim is None:
            return
        try:
            os.replace(claim.path, os.path.join(self._archive, claim.name))
        except OSError as exc:
            raise SourceError(f"cannot archive {claim.name}: {exc}") from exc

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Put the file back into `inbound/` (not before `delay` seconds when given)."""
        claim = _handle(delivery)
        if claim is None:
            return
        if delay:
            when = time.time() + delay
            self._touch(claim, (when, when))
        self._redeliver(claim.path)

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Move the file to `rejected/` with `<name>.reason` beside it saying why; it is never delivered again.

        A name already parked there gets a random suffix: a rejected file never replaces another.
        """
        claim = _handle(delivery)
        if claim is None:
            return
        target = free_name(self._rejected, claim.name)
        try:
            self._write_reason(target, reason)
            os.rename(claim.path, os.path.join(self._rejected, target))
        except OSError as exc:
            raise SourceError(f"cannot park {claim.name} in rejected/: {exc}") from exc

    async def in_progress(self, delivery: Delivery) -> None:
        """Refresh the claim so other processes do not take it as stale."""
        claim = _handle(delivery)
        if claim is not None:
            self._touch(claim, None)

    def _touch(self, claim: _Claim, times: tuple[float, float] | None) -> None:
        """Set a claimed file's times; SourceError when the claim is gone (given back at close, or recovered)."""
        try:
            os.utime(claim.path, times)
        except OSError as exc:
            raise SourceError(f"the claim on {claim.name} is gone (closed or recovered meanwhile): {why(exc)}") from exc

    async def aclose(self) -> None:
        """Give unacked claims back to `inbound/` and remove this process's claim folder."""
        for path in scan(self._claims):
            self._redeliver(str(path))
        with contextlib.suppress(OSError):  # already gone, or a file was left behind: recovery moves it back
            self._claims.rmdir()


def _handle(delivery: Delivery) -> _Claim | None:
    """The claim of a delivery; None for a file the source parked itself."""
    if isinstance(delivery.handle, _Parked):
        return None
    if not isinstance(delivery.handle, _Claim):
        raise SourceError("this delivery did not come from a spool source")
    return delivery.handle


SOURCE = SpoolSource
PUBLISHER = SpoolPublisher
