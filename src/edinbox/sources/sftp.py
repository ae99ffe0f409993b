"""A partner's SFTP folder as a source: `sftp://user@host:port/folder`, files picked up once they stopped changing.

Options (besides `known_hosts`, `key` and `connect_timeout`, see `_sftp_connect`): `settle` (seconds, default 2: a
file is taken once two listings at least this far apart saw the same size and modification time), `poll` (seconds
between listings, default 1), `archive` (the remote folder an acked file is moved to, default `<folder>/archive`),
`delete` (`true`: an acked file is deleted instead), `rejected` (the remote folder a parked file is moved to, with a
`<name>.reason` file beside it, default `<folder>/rejected`), `max_payload` (bytes; a bigger file is parked unread,
default the hub's), `open_timeout` (seconds `open()` keeps trying to reach the server, default 10).

A file is keyed by its remote identity: `sftp:<host>:<port><path>@<size>:<mtime>:<sha256>`, so the same file read
again after a crash is the same message, and a file replaced under the same name is a new one (an EDI key, when the
hub finds one, wins over it). It is read whole (within `max_payload`), then its size and time are checked again on
the open file and by name: a file that changed while it was read is not consumed, and waits to settle again. It is
moved to the archive (or deleted) only by `ack`, after the commit, and only when it is still the file that was read:
one renamed or deleted under the hub is gone (nothing to do), one replaced is left for the next listing. A hub killed
between its commit and the move reads the file again at its next start: the journal finds it settled.

Names starting with `.` are uploads in progress (the convention of many SFTP clients): left alone until unchanged for
`dotfile_timeout` seconds (default an hour), then parked as abandoned. Subfolders are not files: left alone. A
symbolic link is parked (moved, never followed), as is any other non-regular file, a file over `max_payload` (its
first 64 KiB as the refused payload) and a file that cannot be read (permission denied): each comes out of `receive`
with `reason` set, and the rest goes on. A file that can be neither read nor moved is logged once with the reason and
skipped until it changes. A server that is down or a lost connection is a SourceError: the next `receive` connects
again with backoff. Several hubs may read one folder: each reads every file, and the journal settles each once (the
others find it a duplicate).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from edinbox._errors import ConfigurationError, SourceError
from edinbox._logs import log_event
from edinbox.sources._base import Delivery, Outgoing, Source, publish_once
from edinbox.sources._failures import quietly, with_backoff
from edinbox.sources._options import positive_float, positive_int, split_url
from edinbox.sources._sftp_connect import SftpAddress, asyncssh, connect, sftp_failing, shown
from edinbox.sources._sftp_files import as_bytes, exists, file_problem, free_name, read_head, write_reason
from edinbox.sources._sftp_listing import Listing
from edinbox.sources._sftp_publisher import SftpPublisher, remote_folder, truthy
from edinbox.sources._spool_files import too_big

__all__ = ["MAX_PAYLOAD", "PUBLISHER", "SOURCE", "SftpSource", "publish"]

MAX_PAYLOAD = 32 * 1024 * 1024
"""The default `max_payload`: bigger files are parked unread."""
BATCH_BYTES = 16 * 1024 * 1024
"""A receive reads no more files once those it read add up to this many bytes."""

_AT_ONCE = 16
"""Files read concurrently on the session (an SFTP server answers requests in flight, each file costs round trips)."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Read:
    """A file handed out: its name in the folder and the state it had when it was read."""

    name: bytes
    size: int
    mtime: int


@dataclass(frozen=True, slots=True)
class _Parked:
    """A file the source moved to the rejected folder itself: nothing is left to settle."""

    name: bytes


class SftpSource(Source):
    """Deliveries from files in a remote folder; ack moves each to the archive folder (or deletes it), reject to the
    rejected folder."""

    parks_oversize = True

    def __init__(
        self,
        address: SftpAddress,
        *,
        consumer: str,
        settle: float = 2.0,
        dotfile_timeout: float = 3600.0,
        claim_timeout: float = 300.0,
        poll: float = 1.0,
        archive: bytes | None = None,
        rejected: bytes | None = None,
        delete: bool = False,
        max_payload: int = MAX_PAYLOAD,
        open_timeout: float = 10.0,
    ) -> None:
        """Prepare a source on `address`'s folder; `open()` connects."""
        self.address = address
        self.url = address.where
        self.consumer = consumer
        self.poll = poll
        self.archive = archive or address.folder + b"/archive"
        self.rejected = rejected or address.folder + b"/rejected"
        self.delete = delete
        self.max_payload = max_payload
        self.open_timeout = open_timeout
        self._listing = Listing(settle=settle, claim_timeout=claim_timeout)
        self.ack_wait = claim_timeout  # a file held this long unsettled is handed out again: `in_progress` refreshes
        self.comeback = settle + 2 * poll
        """Seconds within which another process reads a file this one holds: holds are each process's own."""
        self._dots = Listing(settle=dotfile_timeout)  # uploads in progress, parked once abandoned
        self._listed = -poll
        self._counts: dict[tuple[bytes, int, int], int] = {}  # deliveries of each file state still listed
        self._stuck: set[bytes] = set()  # links and special files that could not be parked: skipped while listed
        self._conn: asyncssh.SSHClientConnection | None = None
        self._client: asyncssh.SFTPClient | None = None
        self._connecting: asyncio.Future[tuple[asyncssh.SSHClientConnection, asyncssh.SFTPClient]] | None = None

    @classmethod
    def from_url(cls, url: str, *, consumer: str, payload_limit: int | None = None, **options: Any) -> SftpSource:
        """Build a source from `sftp://user@host[:port]/folder[?options]` (see the module); unknown options are
        refused. `payload_limit` (the hub's) is the default `max_payload`; the URL's option wins."""
        parts, opts = split_url(url, schemes=("sftp",), overrides=options)
        address = SftpAddress.from_parts(url, parts, opts)
        source = cls(
            address,
            consumer=consumer,
            settle=opts.take("settle", positive_float, 2.0),
            dotfile_timeout=opts.take("dotfile_timeout", positive_float, 3600.0),
            claim_timeout=opts.take("claim_timeout", positive_float, 300.0),
            poll=opts.take("poll", positive_float, 1.0),
            archive=opts.take("archive", remote_folder, None),
            rejected=opts.take("rejected", remote_folder, None),
            delete=opts.take("delete", truthy, False),
            max_payload=opts.take("max_payload", positive_int, payload_limit or MAX_PAYLOAD),
            open_timeout=opts.take("open_timeout", positive_float, 10.0),
        )
        opts.finish()
        return source

    def _path(self, folder: bytes, name: bytes) -> bytes:
        return folder + b"/" + name

    @contextlib.contextmanager
    def _io(self, what: str) -> Iterator[None]:
        """Map failures as `sftp_failing` does; one that is not about a single file drops the connection (the next
        call connects again, and what was handed out is read again)."""
        try:
            with sftp_failing(f"{what} on {self.url}"):
                yield
        except SourceError as exc:
            if file_problem(exc.__cause__) is None:  # not about one file: the connection is suspect
                self._drop()
            raise

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.abort()
        self._conn = self._client = None
        self._listing.held.clear()  # what was handed out is read again after the reconnection

    async def _connect(self) -> tuple[asyncssh.SSHClientConnection, asyncssh.SFTPClient]:
        """Log in, check the folder is there and create the archive and rejected folders; a session is kept only once
        all of that worked (a missing folder is an outage: the next call connects and checks again)."""
        conn, client = await connect(self.address)
        try:
            with sftp_failing(f"preparing the folders of {self.url}"):
                if not await client.isdir(self.address.folder):
                    raise SourceError(f"{self.url}: the remote folder is not there (yet)")
                for folder in (self.rejected,) if self.delete else (self.archive, self.rejected):
                    try:
                        await client.mkdir(folder)
                    except asyncssh.SFTPPermissionDenied:
                        raise ConfigurationError(
                            f"{self.url}: the user may not create the folder {shown(folder)}: create it, or name "
                            "folders it may write with archive= and rejected= (or delete=true for no archive)"
                        ) from None
                    except (asyncssh.SFTPFailure, asyncssh.SFTPFileAlreadyExists):
                        pass  # there already (OpenSSH answers a plain failure), or checked just below
                    if not await client.isdir(folder):
                        raise SourceError(f"{self.url}: cannot create the folder {shown(folder)}")
        except BaseException:
            conn.abort()
            raise
        return conn, client

    async def _sftp(self, within: float, *, tries_for: float = 0.0) -> asyncssh.SFTPClient | None:
        """The open session; else a connection under way in the background across calls (started here when none is:
        tried again with backoff for `tries_for` seconds, once when 0), waited for up to `within` seconds. None while
        it is still under way: a slow handshake is never cut short by a caller's short wait, and no caller waits
        longer than it asked (a stopping hub least of all). Its SourceError or ConfigurationError once it failed."""
        if self._client is not None:
            return self._client
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(with_backoff(self._connect, within=tries_for))
        task = self._connecting
        await asyncio.wait({task}, timeout=max(within, 0.0))
        if not task.done():
            return None
        self._connecting = None
        self._conn, self._client = task.result()
        return self._client

    async def _session(self) -> asyncssh.SFTPClient:
        """The session an ack or a reject needs: one attempt, waited for up to `connect_timeout`."""
        client = await self._sftp(self.address.connect_timeout)
        if client is None:
            raise SourceError(f"connecting to {self.url} failed: no answer within {self.address.connect_timeout} s")
        return client

    async def open(self) -> None:
        """Connect (with backoff, for up to `open_timeout` s) and create the archive and rejected folders."""
        client = await self._sftp(self.open_timeout + self.address.connect_timeout, tries_for=self.open_timeout)
        if client is None:
            raise SourceError(f"connecting to {self.url} failed: no answer within {self.open_timeout} s")

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Read up to `max_messages` settled files in name order (fewer once they add up to `BATCH_BYTES`), waiting
        up to `timeout` for the first; files parked meanwhile come out with their reason."""
        deadline = time.monotonic() + timeout
        while True:
            client = await self._sftp(max(0.0, deadline - time.monotonic()))
            if client is None:  # still connecting (the next receive waits on the same attempt)
                return []
            if time.monotonic() - self._listed >= self.poll:
                out = await self._list(client, max_messages)
            else:
                out = []
            for names in self._batches(max_messages - len(out), BATCH_BYTES - sum(len(d.payload) for d in out)):
                taken = await asyncio.gather(*(self._take(client, name) for name in names), return_exceptions=True)
                failed = [t for t in taken if isinstance(t, BaseException)]
                if failed:  # the connection failed under them: none is handed out, all are read again
                    self._drop()
                    raise failed[0]
                out.extend(t for t in taken if isinstance(t, Delivery))
            left = deadline - time.monotonic()
            if out or left <= 0:
                return out
            await asyncio.sleep(min(left, max(0.01, self.poll - (time.monotonic() - self._listed))))

    def _batches(self, count: int, room: int) -> list[list[bytes]]:
        """The settled files to read now, in name order: at most `count`, and no more once their listed sizes fill
        `room` bytes; in groups of `_AT_ONCE` read concurrently (each read waits on the network, not on us)."""
        names: list[bytes] = []
        for name in self._listing.ready(now=time.monotonic()):
            if len(names) >= count or room <= 0:
                break
            names.append(name)
            room -= min(self._listing.seen[name].size, self.max_payload)
        return [names[n : n + _AT_ONCE] for n in range(0, len(names), _AT_ONCE)]

    async def _list(self, client: asyncssh.SFTPClient, limit: int) -> list[Delivery]:
        """List the folder into the listing; links and special files are parked at once (up to `limit`)."""
        with self._io("listing the folder"):
            entries = await client.readdir(self.address.folder)
        files: list[tuple[bytes, int, int]] = []
        dots: list[tuple[bytes, int, int]] = []
        odd: list[tuple[bytes, int]] = []
        for entry in entries:
            name, attrs = entry.filename, entry.attrs
            if not isinstance(name, bytes):  # the session's paths are bytes: asyncssh hands back bytes
                raise SourceError(f"listing {self.url} returned a text name")
            mode = attrs.permissions or 0
            if stat.S_ISDIR(mode):
                continue
            if stat.S_ISREG(mode):
                (dots if name.startswith(b".") else files).append((name, attrs.size or 0, int(attrs.mtime or 0)))
            elif not name.startswith(b"."):
                odd.append((name, mode))
        self._listing.update(files, now=time.monotonic())
        self._dots.update(dots, now=time.monotonic())
        self._listed = time.monotonic()
        self._counts = {state: n for state, n in self._counts.items() if state[0] in self._listing.seen}
        self._stuck &= {name for name, _ in odd}
        out = []
        for name, mode in sorted(n for n in odd if n[0] not in self._stuck)[:limit]:
            kind = "a symbolic link (never followed)" if stat.S_ISLNK(mode) else "not a regular file"
            parked = await self._park(client, name, kind)
            if parked is not None:
                out.append(parked)
        for name in self._dots.ready(now=time.monotonic())[: max(0, limit - len(out))]:
            self._dots.settled(name)  # parked, or (when it cannot be moved) logged again after another timeout
            idle = f"{self._dots.settle:.0f} s"
            parked = await self._park(client, name, f"a hidden (dot) file unchanged for {idle}: an abandoned upload")
            if parked is not None:
                out.append(parked)
        return out

    async def _take(self, client: asyncssh.SFTPClient, name: bytes) -> Delivery | None:
        """Read a settled file whole and check it did not change meanwhile; park it when it cannot be delivered."""
        seen = self._listing.seen[name]
        path = self._path(self.address.folder, name)
        if seen.size > self.max_payload:
            first = await read_head(client, path)
            return await self._park(client, name, too_big(seen.size, self.max_payload), first, seen.size)
        try:
            with self._io(f"reading {shown(name)}"):
                async with client.open(path, "rb") as file:
                    payload = as_bytes(await file.read(seen.size + 1, 0))
                    after = await file.stat()
                linked = await client.lstat(path)
        except SourceError as exc:
            problem = file_problem(exc.__cause__)
            if problem is None:
                raise
            if problem == "gone":
                self._listing.settled(name)
                return None
            return await self._park(client, name, f"cannot be read: {problem}")
        states = {(a.size, int(a.mtime or 0)) for a in (after, linked)}
        if states != {seen.state} or len(payload) != seen.size or not stat.S_ISREG(linked.permissions or 0):
            fields = {"source": self.url, "file": shown(name), "then": "taken once it settles again"}
            log_event(_log, logging.INFO, "file-changed-while-read", fields)
            self._listing.changed(name, size=after.size or 0, mtime=int(after.mtime or 0), now=time.monotonic())
            return None
        return self._delivery(name, payload, seen.size, seen.mtime)

    def _delivery(self, name: bytes, payload: bytes, size: int, mtime: int) -> Delivery:
        digest = hashlib.sha256(payload).hexdigest()
        where = shown(self._path(self.address.folder, name))
        if len(where.encode()) > 300:
            where = "/#" + hashlib.sha256(self._path(self.address.folder, name)).hexdigest()
        count = self._counts[(name, size, mtime)] = self._counts.get((name, size, mtime), 0) + 1
        self._listing.hold(name, now=time.monotonic())
        return Delivery(
            payload,
            message_id=None,
            coordinates=f"sftp:{self.address.host}:{self.address.port}{where}@{size}:{mtime}:{digest}",
            source=f"sftp:{self.address.host}",
            delivery_count=count,
            redelivered=count > 1,
            handle=_Read(name, size, mtime),
        )

    async def _park(
        self, client: asyncssh.SFTPClient, name: bytes, problem: str, first: bytes = b"", size: int | None = None
    ) -> Delivery | None:
        """Move `name` to the rejected folder with its reason and return it as a refused delivery; None when it is
        gone, or when it cannot be moved (logged, and skipped until it changes)."""
        try:
            with self._io(f"parking {shown(name)}"):
                target = await free_name(client, self.rejected, name)
                await write_reason(client, self._path(self.rejected, target), problem, consumer=self.consumer)
                try:
                    await client.rename(self._path(self.address.folder, name), self._path(self.rejected, target))
                except asyncssh.SFTPError:
                    with contextlib.suppress(asyncssh.SFTPError):
                        await client.remove(self._path(self.rejected, target + b".reason"))
                    raise
        except SourceError as exc:
            cause = file_problem(exc.__cause__)
            if cause is None:
                raise
            seen = self._listing.seen.get(name)
            if cause != "gone":
                if seen is not None:
                    self._listing.skipped[name] = seen.state
                else:
                    self._stuck.add(name)
                fields = {
                    "source": self.url,
                    "file": shown(name),
                    "error": f"{problem}: {cause}",
                    "then": "left in place, skipped until it changes",
                }
                log_event(_log, logging.WARNING, "cannot-park", fields)
            return None
        self._listing.settled(name)
        return Delivery(
            first,
            message_id=None,
            coordinates=f"sftp:rejected/{shown(target)}",
            source=f"sftp:{self.address.host}",
            handle=_Parked(target),
            reason=problem,
            size=size if size is not None and size > len(first) else None,
        )

    async def ack(self, delivery: Delivery) -> None:
        """Move the file to the archive folder (or delete it), if it is still the file that was read."""
        read = _handle(delivery)
        if read is None:
            return
        path = self._path(self.address.folder, read.name)
        client = await self._session()
        with self._io(f"archiving {shown(read.name)}"):
            try:
                now = await client.lstat(path)
            except asyncssh.SFTPNoSuchFile:
                fields = {"source": self.url, "file": shown(path), "then": "moved under the hub before its archiving"}
                log_event(_log, logging.INFO, "file-gone", fields)
                self._listing.settled(read.name)
                return
            if (now.size, int(now.mtime or 0)) != (read.size, read.mtime) or not stat.S_ISREG(now.permissions or 0):
                then = "replaced after it was read: left in place"
                fields = {"source": self.url, "file": shown(read.name), "then": then}
                log_event(_log, logging.INFO, "file-replaced", fields)
                self._listing.give_back(read.name, not_before=0.0)
                return
            try:
                if self.delete:
                    await client.remove(path)
                else:
                    await self._archive(client, path, read.name)
            except asyncssh.SFTPNoSuchFile:
                if await exists(client, path):  # the file is there: the archive folder is not (created again)
                    raise SourceError(f"cannot archive {shown(read.name)}: {shown(self.archive)} is gone") from None
        self._listing.settled(read.name)

    async def _archive(self, client: asyncssh.SFTPClient, path: bytes, name: bytes) -> None:
        """Move the file into the archive under its name, or `name.<random>` when that is taken (a plain SFTP rename
        never replaces a file: it fails, and only then is a free name looked for)."""
        try:
            await client.rename(path, self._path(self.archive, name))
        except (asyncssh.SFTPFailure, asyncssh.SFTPFileAlreadyExists):
            if not await exists(client, self._path(self.archive, name)):
                raise
            await client.rename(path, self._path(self.archive, await free_name(client, self.archive, name)))

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Give the file back: it is read again at a later receive (not before `delay` seconds)."""
        read = _handle(delivery)
        if read is not None:
            self._listing.give_back(read.name, not_before=time.monotonic() + (delay or 0.0))

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Move the file to the rejected folder with `<name>.reason` beside it; it is never delivered again."""
        read = _handle(delivery)
        if read is None:
            return
        client = await self._session()
        with self._io(f"parking {shown(read.name)}"):
            target = await free_name(client, self.rejected, read.name)
            await write_reason(client, self._path(self.rejected, target), reason, consumer=self.consumer)
            with contextlib.suppress(asyncssh.SFTPNoSuchFile):
                await client.rename(self._path(self.address.folder, read.name), self._path(self.rejected, target))
        self._listing.settled(read.name)

    async def in_progress(self, delivery: Delivery) -> None:
        """Keep the file held: it is not handed out again for another `claim_timeout` seconds."""
        read = _handle(delivery)
        if read is not None and read.name in self._listing.held:
            self._listing.hold(read.name, now=time.monotonic())

    async def aclose(self) -> None:
        """Close the connection (and stop one under way); unsettled files are read again by the next process."""
        task, self._connecting = self._connecting, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
            if not task.cancelled() and task.exception() is None:  # its failure is nobody's business now
                task.result()[0].abort()  # it connected meanwhile: nobody will use that session
        conn, self._conn, self._client = self._conn, None, None
        if conn is not None:
            conn.close()
            await quietly(f"closing {self.url}", conn.wait_closed)


def _handle(delivery: Delivery) -> _Read | None:
    """The file of a delivery; None for a file the source parked itself."""
    if isinstance(delivery.handle, _Parked):
        return None
    if not isinstance(delivery.handle, _Read):
        raise SourceError("this delivery did not come from an SFTP source")
    return delivery.handle


async def publish(url: str, messages: Sequence[tuple[str, bytes] | Outgoing]) -> None:
    """Write each payload into the remote folder under a temporary name, then rename it into place."""
    await publish_once(SftpPublisher(url), messages)


SOURCE = SftpSource
PUBLISHER = SftpPublisher
