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

The spool trusts no path: its folders are opened once, a subfolder never through a symlink, and every file is
named relative to them (`_spool_folders`): a subfolder that is a symlink is a ConfigurationError at open (and at the
next listing when one is swapped in while the source runs), never followed. The spool takes regular files with one
link only. It parks at once in `rejected/`, with a `.reason`, anything it cannot deliver: a symlink (its target is
never read), a file with more than one hard link (never read), a directory or other special file, a file over
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
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from edinbox._errors import ConfigurationError, SourceError
from edinbox.sources._base import Delivery, Source
from edinbox.sources._options import positive_float, positive_int, split_url
from edinbox.sources._spool_files import (
    HEAD,
    OPEN_FLAGS,
    SpoolPublisher,
    file_name,
    file_problem,
    free_name,
    publish,
    read_payload,
    scan,
    spool_path,
    too_big,
    why,
)
from edinbox.sources._spool_folders import DIR_FLAGS, Folders, check_folders, open_folder
from edinbox.sources._spool_names import (
    name_problem,
    owner_dead,
    owner_id,
    safe,
    split_count,
)
from edinbox.sources._spool_parking import Parked, park, write_reason

__all__ = [
    "BATCH_BYTES",
    "FOLDERS",
    "HEAD",
    "MAX_PAYLOAD",
    "PUBLISHER",
    "SOURCE",
    "SpoolSource",
    "check",
    "file_name",
    "publish",
    "spool_path",
]

MAX_PAYLOAD = 32 * 1024 * 1024
"""The default `max_payload`: bigger files are parked unread."""
BATCH_BYTES = 16 * 1024 * 1024
"""A receive claims no more files once those it read add up to this many bytes: a batch of big files holds a few of
them (at most this plus one `max_payload`), whatever `max_messages` allows."""

FOLDERS = ("inbound", "processing", "archive", "rejected", "tmp")
"""The spool's subfolders, each opened without following a link (`_spool_folders`)."""
_POLL = 0.05
_REFRESH = 1.0  # the queue is listed again at least this often (new files join it in name order)
_LISTING_SHARE = 20  # ... and at most once per 20 listing durations, so listing a big backlog costs <= 5 %
_DOT_CHECK = 10.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Claim:
    """Where a claimed file lives while the hub works on it: `file` in the claim folder open as `folder`."""

    folder: int
    file: str
    name: str


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
        self._claim_name = "@".join(owner)
        self._folders: Folders | None = None
        self._claims = -1
        self._old_claims: list[int] = []  # claim folders removed under us: closed at the end (claims may name them)
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

    @property
    def _open(self) -> Folders:
        if self._folders is None:
            raise SourceError(f"the spool source on {self.root} is not open")
        return self._folders

    async def open(self) -> None:
        """Open (creating them) the spool folders, never through a link (a subfolder that is a symlink is a
        ConfigurationError), create this process's claim folder, and recover stale claims."""
        self._folders = Folders(self.root, FOLDERS, create=True)
        try:
            self._claims = open_folder(
                self._folders["processing"], self._claim_name, where=self._claim_where, create=True
            )
        except BaseException:
            self._folders.close()
            self._folders = None
            raise
        self.recover()

    @property
    def _claim_where(self) -> str:
        return f"{self.root}/processing/{self._claim_name}"

    def _claims_back(self) -> None:
        """Make this process's claim folder again when it was removed under us (claims need it)."""
        if os.fstat(self._claims).st_nlink:
            return
        self._old_claims.append(self._claims)
        self._claims = open_folder(self._open["processing"], self._claim_name, where=self._claim_where, create=True)

    def recover(self) -> int:
        """Move files claimed by dead processes (or claimed longer than `claim_timeout` ago, by any process, this one
        too) back to `inbound/`."""
        moved = 0
        host = safe(socket.gethostname())
        now = time.time()
        self._last_recovery = time.monotonic()
        processing = self._open["processing"]
        for name in scan(processing):
            own = name == self._claim_name
            try:
                folder = self._claims if own else os.open(name, DIR_FLAGS, dir_fd=processing)
            except OSError:  # not a folder (a link to one is never followed), or already removed
                continue
            try:
                # this process's own claims too: one it handed out and nobody settled (a hub stops handing back a
                # batch after an ack failed, a file whose parking failed) comes back once it is claim_timeout old
                owner = name.rsplit("@", 3)
                dead = not own and len(owner) == 4 and owner[1] == host and owner_dead(owner[2])
                for file in scan(folder):
                    try:
                        expired = now - os.stat(file, dir_fd=folder, follow_symlinks=False).st_mtime
                    except FileNotFoundError:
                        continue
                    if dead or expired > self.claim_timeout:
                        moved += self._redeliver(folder, file)
            finally:
                if not own:
                    os.close(folder)
            if dead:
                # not empty yet (a file was added meanwhile) or already removed by another process
                with contextlib.suppress(OSError):
                    os.rmdir(name, dir_fd=processing)
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
        """Check the folders (`Folders.refresh`), then list `inbound/` once into the queue, in name order; names
        starting with `.` are kept apart."""
        started = time.monotonic()
        folders = self._open
        folders.refresh(FOLDERS)
        names: list[str] = []
        dots: list[str] = []
        try:
            with os.scandir(folders["inbound"]) as entries:
                for entry in entries:
                    (dots if entry.name.startswith(".") else names).append(entry.name)
        except OSError as exc:
            raise SourceError(f"cannot list {folders.where('inbound')}: {why(exc)}") from exc
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
        inbound = self._open["inbound"]
        while self._dots and len(out) < limit:
            name = self._dots.pop()
            try:
                age = now - os.stat(name, dir_fd=inbound, follow_symlinks=False).st_mtime
            except OSError:
                continue  # renamed into place by its producer meanwhile, or gone
            if age > self.dotfile_timeout and name not in self._skipped:
                reason = f"a hidden (dot) file untouched for {age:.0f} s: an upload its producer abandoned"
                try:
                    os.rename(name, name, src_dir_fd=inbound, dst_dir_fd=self._claims)
                except OSError:
                    continue  # taken by another process, or renamed into place by its producer at this moment
                delivery = self._park(self._claims, name, reason)
                if delivery is not None:
                    out.append(delivery)
        if not self._dots:
            self._dots_checked = time.monotonic()
        return out

    def _take(self, name: str, now: float) -> Delivery | None:
        """Claim one listed file, or park it when it cannot be delivered; None when another process took it."""
        inbound = self._open["inbound"]
        try:
            info = os.stat(name, dir_fd=inbound, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return self._park(inbound, name, f"cannot be examined: {why(exc)}")
        if info.st_mtime > now:  # held back: a nack with a delay sets the modification time in the future
            return None
        problem = name_problem(name) or file_problem(info)
        try:  # whatever it is: the claim settles a race with other processes
            os.rename(name, name, src_dir_fd=inbound, dst_dir_fd=self._claims)
        except FileNotFoundError:
            self._claims_back()
            return None
        except OSError as exc:
            return self._park(inbound, name, f"{problem or 'cannot be claimed'}: {why(exc)}")
        if problem:
            return self._park(self._claims, name, problem)
        return self._read_claim(name)

    def _read_claim(self, name: str) -> Delivery | None:
        """Read a claimed file whole, or park it (too big, swapped for another kind of file, unreadable)."""
        try:
            fd = os.open(name, OPEN_FLAGS, dir_fd=self._claims)
        except OSError as exc:
            return self._park(self._claims, name, f"cannot be opened without following links: {why(exc)}")
        try:
            info = os.fstat(fd)
            problem = file_problem(info)
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
            return self._park(self._claims, name, problem)
        return self._delivery(name, payload)

    def _delivery(self, file: str, payload: bytes) -> Delivery:
        base, count = split_count(file)
        message_id = unquote(base.split("~", 1)[1].removesuffix(".edi")) if "~" in base else None
        return Delivery(
            payload,
            message_id=message_id or None,
            coordinates=f"dir:{base}",
            source=f"dir:{self.root.name}",
            delivery_count=count,
            redelivered=count > 1,
            handle=_Claim(self._claims, file, base),
        )

    def _park(self, folder: int, name: str, problem: str) -> Delivery | None:
        """Move `name` in `folder` (a claim, or in inbound/ when it cannot be claimed) to `rejected/` with its reason,
        and return it as a refused delivery (`_spool_parking.park`); None when another process took it first."""
        return park(
            folder, name, problem, into=self._open, root=self.root, consumer=self.consumer, skipped=self._skipped
        )

    def _redeliver(self, folder: int, file: str) -> int:
        """Move a claimed file back to `inbound/`, counting the delivery in its name; 0 if another process did."""
        base, count = split_count(file)
        try:
            os.rename(file, f"{base}#{count + 1}", src_dir_fd=folder, dst_dir_fd=self._open["inbound"])
        except FileNotFoundError:
            return 0
        except OSError as exc:  # e.g. a too long name claimed by an older version: park it instead
            parked = self._park(folder, file, f"cannot be put back into inbound/: {why(exc)}")
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
            os.replace(claim.file, claim.name, src_dir_fd=claim.folder, dst_dir_fd=self._open["archive"])
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
        self._redeliver(claim.folder, claim.file)

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Move the file to `rejected/` with `<name>.reason` beside it saying why; it is never delivered again.

        A name already parked there gets a random suffix: a rejected file never replaces another.
        """
        claim = _handle(delivery)
        if claim is None:
            return
        rejected = self._open["rejected"]
        target = free_name(rejected, claim.name)
        try:
            write_reason(self._open, target, reason, consumer=self.consumer)
            os.rename(claim.file, target, src_dir_fd=claim.folder, dst_dir_fd=rejected)
        except OSError as exc:
            raise SourceError(f"cannot park {claim.name} in rejected/: {exc}") from exc

    async def in_progress(self, delivery: Delivery) -> None:
        """Refresh the claim so other processes do not take it as stale."""
        claim = _handle(delivery)
        if claim is not None:
            self._touch(claim, None)

    def _touch(self, claim: _Claim, times: tuple[float, float] | None) -> None:
        """Set a claimed file's times; SourceError when the claim is gone (given back at close, or recovered)."""
        if self._folders is None:  # its folder's descriptor is closed too (the number may name another file now)
            raise SourceError(f"the claim on {claim.name} is gone: the source is closed")
        try:
            os.utime(claim.file, times, dir_fd=claim.folder, follow_symlinks=False)
        except OSError as exc:
            raise SourceError(f"the claim on {claim.name} is gone (closed or recovered meanwhile): {why(exc)}") from exc

    async def aclose(self) -> None:
        """Give unacked claims back to `inbound/`, remove this process's claim folder and close the folders."""
        folders = self._folders
        if folders is None:
            return
        try:
            for file in scan(self._claims):
                self._redeliver(self._claims, file)
            with contextlib.suppress(OSError):  # already gone, or a file was left behind: recovery moves it back
                os.rmdir(self._claim_name, dir_fd=folders["processing"])
        finally:
            for fd in (self._claims, *self._old_claims):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._claims, self._old_claims, self._folders = -1, [], None
            folders.close()


def _handle(delivery: Delivery) -> _Claim | None:
    """The claim of a delivery; None for a file the source parked itself."""
    if isinstance(delivery.handle, Parked):
        return None
    if not isinstance(delivery.handle, _Claim):
        raise SourceError("this delivery did not come from a spool source")
    return delivery.handle


def check(root: Path) -> None:
    """Refuse, changing nothing, a spool folder that does not exist or whose subfolders include a symbolic link or
    something else than a folder (ConfigurationError naming it): what `edinbox doctor` checks."""
    if not root.is_dir():
        raise ConfigurationError(f"the spool folder {root} does not exist")
    check_folders(root, FOLDERS)


SOURCE = SpoolSource
PUBLISHER = SpoolPublisher
