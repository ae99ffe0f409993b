"""Redis Streams (redis.asyncio): a consumer group, XACK after the commit, dead consumers' entries reclaimed.

URL: `redis://:password@127.0.0.1:6379/0?stream=edi.in&group=hub` with the options

- `stream` (required): the stream, created with the group when missing;
- `group`: the consumer group (default: the inbox consumer's name); processes in one group share the work;
- `name`: this process's consumer name in the group (default `<host>-<pid>`). A stable name lets a restarted
  process take back its own pending entries at once; with the default, another member reclaims them;
- `dead_after`: seconds a member may stay silent (no read, no claim, no `in_progress`) before the others presume it
  dead and claim all its pending entries at once (default 15). It is the source's `ack_wait`: a caller holding
  deliveries longer than a third of it calls `in_progress`, which keeps the member alive and its entries its own;
- `claim_idle`: seconds an entry of a live member stays pending before any member reclaims it with XAUTOCLAIM
  (default 60; keep it well above the longest handler time, or in-flight work is stolen and run twice);
- `dead`: the stream parked entries are moved to (default `<stream>.dead`);
- `open_timeout`: seconds `open()` keeps trying to reach the server, with backoff, before it raises (default 10).

Redis never redelivers by itself: on start (and after every reconnection) this consumer re-reads its own pending
entries (`XREADGROUP ... 0`), then reads new ones (`>`). Every `dead_after / 2` seconds it claims the entries of
members silent for `dead_after` (XINFO CONSUMERS idle time, XCLAIM with that minimum idle time, so a member that
woke up meanwhile keeps them), and every `claim_idle / 2` seconds it reclaims idle entries of any member. The
delivery count comes from XPENDING. The key is the `message_id` field of the entry, which `publish` writes next to
`payload`; the fallback key is the entry id, stable across redeliveries but not across producer retries.

Hygiene: every few seconds, and on close, the stream is trimmed (`XTRIM MINID`) below the oldest entry any group
still needs (its oldest pending entry, or the one after its last delivered entry), so settled entries do not pile
up; a group created later reads only what is left. A clean close deletes this consumer from the group when it has
nothing pending; members presumed dead long ago (silent for twice `claim_idle`, nothing pending) are deleted too.

Outages: redis-py reconnects on the next command (with a short retry); a failed call raises SourceError and the
next `receive` prepares the group again (recreating it when a server restarted empty) and re-reads the pending
entries, so an entry whose ack failed comes back and the inbox finds it settled. For a second after a failure,
settling calls fail at once instead of each trying the server again. A cancelled call raises CancelledError (also
when redis-py returned its reply regardless) and is handled as a failure: the next `receive` re-reads the pending
entries, among them those a cancelled read was delivered but never returned.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from edinbox._errors import SourceError
from edinbox._urls import mask
from edinbox.sources._base import Delivery, Outgoing, Publisher, Source, publish_once
from edinbox.sources._failures import failing, quietly, unless_cancelled, with_backoff
from edinbox.sources._options import name_option, positive_float, server_url, split_url
from edinbox.sources._redis_group import Group, client, refused, text

__all__ = ["PUBLISHER", "SOURCE", "RedisPublisher", "RedisSource", "publish"]

_SCHEMES = ("redis", "rediss")
MAX_DATABASE = 2**31 - 1
"""The largest database number a URL may name (`/N`); a default server has 0-15 (its `databases` setting), and a
number it does not have is refused when the source opens, as a configuration error."""
ID_FIELD = "message_id"
PAYLOAD_FIELD = "payload"
_BLOCK_MAX = 1.0  # seconds one XREADGROUP blocks at most, so claims and trims keep their rhythm
_QUIET = 1.0  # seconds after a failed call during which settling calls fail at once instead of reconnecting


class RedisSource(Source):
    """A Redis stream read through a consumer group; parked entries are moved to `<stream>.dead`."""

    def __init__(
        self,
        url: str,
        *,
        consumer: str,
        stream: str,
        group: str | None = None,
        name: str | None = None,
        claim_idle: float = 60.0,
        dead_after: float = 15.0,
        dead: str | None = None,
        open_timeout: float = 10.0,
    ) -> None:
        """Configure the source; nothing connects before `open()`."""
        self.url = mask(url)
        self.consumer = consumer
        self.stream = stream
        self.group = group or consumer
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.claim_idle = claim_idle
        self.dead_after = dead_after
        self.ack_wait = min(claim_idle, dead_after)
        self.dead = dead or f"{stream}.dead"
        self.open_timeout = open_timeout
        self._server = url
        self._redis: Any = None
        self._members: Group | None = None
        self._prepared = False
        self._drain_from: str | None = "0"  # own pending entries are re-read after this id; None: all re-read
        self._cursor = "0-0"
        self._next_claim = 0.0
        self._next_dead = 0.0
        self._next_trim = 0.0
        self._due: dict[str, float] = {}
        self._failed_at: float | None = None

    @classmethod
    def from_url(cls, url: str, *, consumer: str, **options: Any) -> RedisSource:
        """Build the source a `redis://` URL names; unknown or invalid options raise ConfigurationError."""
        parts, opts = split_url(url, schemes=_SCHEMES, overrides=options)
        database = parts.path.strip("/")
        if database and not (database.isascii() and database.isdigit() and int(database) <= MAX_DATABASE):
            raise opts.error(f"the database number {database[:40]!r} is not a number from 0 to {MAX_DATABASE}")
        source = cls(
            server_url(parts),
            consumer=consumer,
            stream=opts.require("stream", name_option),
            group=opts.take("group", name_option, None) or _checked(opts, consumer),
            name=opts.take("name", name_option, None),
            claim_idle=opts.take("claim_idle", positive_float, 60.0),
            dead_after=opts.take("dead_after", positive_float, 15.0),
            dead=opts.take("dead", name_option, None),
            open_timeout=opts.take("open_timeout", positive_float, 10.0),
        )
        opts.finish()
        source.url = mask(url)
        return source

    async def open(self) -> None:
        """Connect (with backoff, for up to `open_timeout` s) and create the stream and the group when missing."""
        await self._ready(within=self.open_timeout)

    async def _ready(self, *, within: float) -> None:
        if self._redis is None:
            with failing(f"connecting to {self.url}"):
                self._redis = client(self._server)
            self._members = Group(self._redis, self.stream, self.group, self.name)
        if not self._prepared:
            await with_backoff(self._prepare, within=within)

    @property
    def _group(self) -> Group:
        if self._members is None:
            raise SourceError(f"the source {self.url} is closed")
        return self._members

    async def _prepare(self) -> None:
        with failing(f"preparing group {self.group!r} of {self.stream!r} at {self.url}", refused=refused):
            await self._group.create()
        self._drain_from, self._cursor, self._prepared, self._failed_at = "0", "0-0", True, None
        self._next_claim = self._next_dead = self._next_trim = 0.0

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Return due nacked entries, own pending entries, dead or idle members' entries, or new entries."""
        started = time.monotonic()
        await self._ready(within=timeout)
        try:
            with failing(f"read from {self.stream!r} at {self.url}", refused=refused):
                return await self._receive(max_messages, started + timeout)
        except (SourceError, asyncio.CancelledError):
            # reconnect, recreate the group if it vanished, and re-read own pending entries: a cancelled read may
            # have been delivered entries (pending on this member now) whose reply it never returned
            self._prepared = False
            raise

    async def _receive(self, max_messages: int, deadline: float) -> list[Delivery]:
        while True:
            deliveries = await self._receive_once(max_messages, deadline)
            unless_cancelled()
            if deliveries or time.monotonic() >= deadline:
                return deliveries

    async def _receive_once(self, max_messages: int, deadline: float) -> list[Delivery]:
        now = time.monotonic()
        if now >= self._next_trim:
            self._next_trim = now + min(2.0, self.dead_after / 2)
            await self._group.trim()
        due = [entry_id for entry_id, at in self._due.items() if at <= now][:max_messages]
        if due:
            for entry_id in due:
                del self._due[entry_id]
            claimed = await self._redis.xclaim(self.stream, self.group, self.name, 0, due)
            return await self._counted(claimed)
        if self._drain_from is not None:
            reply = await self._redis.xreadgroup(
                self.group, self.name, {self.stream: self._drain_from}, count=max_messages
            )
            entries = reply[0][1] if reply else []
            if entries:  # the next page starts after them: entries in hand are not handed out twice
                self._drain_from = text(entries[-1][0])
                return await self._counted(entries)
            self._drain_from = None
        if now >= self._next_dead:
            self._next_dead = now + self.dead_after / 2
            entries = await self._group.claim_dead(
                dead_after=self.dead_after, forget_after=2 * max(self.claim_idle, self.dead_after), count=max_messages
            )
            if entries:
                self._next_dead = now  # more may be left
                return await self._counted(entries)
        if now >= self._next_claim:
            reply = await self._redis.xautoclaim(
                self.stream, self.group, self.name, int(self.claim_idle * 1000), self._cursor, count=max_messages
            )
            self._cursor = text(reply[0])
            if self._cursor == "0-0":
                self._next_claim = now + self.claim_idle / 2
            if reply[1]:
                return await self._counted(reply[1])
        timeout = min(deadline - now, _BLOCK_MAX)
        if self._due:  # wake up for the next nacked entry that falls due
            timeout = min(timeout, min(self._due.values()) - now)
        block = max(1, int(timeout * 1000))
        reply = await self._redis.xreadgroup(self.group, self.name, {self.stream: ">"}, count=max_messages, block=block)
        entries = reply[0][1] if reply else []
        return [self._delivery(entry_id, fields, 1) for entry_id, fields in entries if fields]

    async def _counted(self, entries: Sequence[Any]) -> list[Delivery]:
        """Deliveries for re-read or claimed entries, with their delivery counts from XPENDING."""
        gone = [entry_id for entry_id, fields in entries if not fields]
        if gone:  # trimmed from the stream while pending: nothing left to deliver
            await self._redis.xack(self.stream, self.group, *gone)
        live = [(entry_id, fields) for entry_id, fields in entries if fields]
        async with self._redis.pipeline(transaction=False) as pipe:
            for entry_id, _ in live:
                pipe.xpending_range(self.stream, self.group, min=entry_id, max=entry_id, count=1)
            pending = await pipe.execute()
        counts = [rows[0]["times_delivered"] if rows else None for rows in pending]
        return [self._delivery(entry_id, fields, count) for (entry_id, fields), count in zip(live, counts, strict=True)]

    def _delivery(self, entry_id: Any, fields: dict[Any, Any], count: int | None) -> Delivery:
        texts = {text(k): v for k, v in fields.items()}
        payload = texts.pop(PAYLOAD_FIELD, b"")
        headers = {k: text(v) for k, v in texts.items()}
        entry = text(entry_id)
        return Delivery(
            bytes(payload) if isinstance(payload, bytes) else str(payload).encode(),
            message_id=headers.get(ID_FIELD) or None,
            coordinates=f"{self.stream}:{entry}",
            source=f"redis:{self.stream}",
            headers=headers,
            delivery_count=count,
            redelivered=count is None or count > 1,
            handle=entry,
        )

    async def ack(self, delivery: Delivery) -> None:
        """XACK the entry: it leaves the group's pending list."""
        await self._call("XACK", delivery, lambda: self._redis.xack(self.stream, self.group, delivery.handle))

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Keep the entry pending and claim it back to this consumer after `delay` seconds (XCLAIM)."""
        self._due[delivery.handle] = time.monotonic() + (delay or 0.0)

    async def in_progress(self, delivery: Delivery) -> None:
        """Reset the entry's idle time (XCLAIM JUSTID to this consumer): no member reclaims it, this one looks alive."""
        await self._call(
            "XCLAIM",
            delivery,
            lambda: self._redis.xclaim(self.stream, self.group, self.name, 0, [delivery.handle], justid=True),
        )

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Move the entry to the dead stream with the reason, and XACK it, in one MULTI/EXEC."""
        fields: dict[str, Any] = {**delivery.headers, PAYLOAD_FIELD: delivery.payload}
        fields.update({"edinbox_reason": reason, "edinbox_coordinates": delivery.coordinates})

        async def park() -> None:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.xadd(self.dead, fields)
                pipe.xack(self.stream, self.group, delivery.handle)
                await pipe.execute()

        await self._call(f"parking in {self.dead!r}", delivery, park)

    async def _call(self, verb: str, delivery: Delivery, call: Any) -> None:
        if self._redis is None:
            raise SourceError(f"{verb} of {delivery.key!r} at {self.url} failed: the source is not open")
        if self._failed_at is not None and time.monotonic() - self._failed_at < _QUIET:
            # the server failed a moment ago: fail at once, so a batch settled during an outage is not held
            # by one reconnect attempt per message (the entry stays pending and comes back)
            raise SourceError(f"{verb} of {delivery.key!r} at {self.url} failed: the server failed a moment ago")
        try:
            with failing(f"{verb} of {delivery.key!r} at {self.url}", refused=refused):
                await call()
            unless_cancelled()
        except SourceError:  # the entry stays pending and comes back; the inbox absorbs the redelivery
            self._prepared, self._failed_at = False, time.monotonic()
            raise
        except asyncio.CancelledError:  # the call may not have landed: the next receive re-reads the entry
            self._prepared = False
            raise
        self._failed_at = None

    async def aclose(self) -> None:
        """Trim, leave the group when nothing is pending here, and close; never raises.

        Unacked entries stay pending, for this name's next start or for another member to claim.
        """
        redis, members, self._redis, self._members, self._prepared = self._redis, self._members, None, None, False
        if redis is None:
            return
        try:
            if members is not None:
                await quietly(f"trimming {self.stream!r} at {self.url}", members.trim)
                await quietly(f"leaving group {self.group!r} at {self.url}", members.leave)
                unless_cancelled()
        finally:  # also when cancelled: no connection is left open
            await quietly(f"closing {self.url}", redis.aclose)


SOURCE = RedisSource


class RedisPublisher(Publisher):
    """XADDs to the URL's stream on one client, each entry's `message_id` field set to the producer id and the
    message's headers as further fields."""

    def __init__(self, url: str) -> None:
        """Publish to the stream a `redis://` URL names; nothing connects before the first send."""
        self._source = RedisSource.from_url(url, consumer="publisher")
        self.url = self._source.url
        self._redis: Any = None

    async def open(self) -> None:
        """Create the client (redis-py connects on the first command and again after any failure)."""
        self._redis = client(self._source._server)

    async def send(self, messages: Sequence[Outgoing]) -> None:
        """XADD in pipelines of 500 entries."""
        source = self._source
        if self._redis is None:
            raise SourceError(f"publishing to {source.stream!r} at {source.url} failed: the publisher is not open")
        with failing(f"publishing to {source.stream!r} at {source.url}", refused=refused):
            for start in range(0, len(messages), 500):
                async with self._redis.pipeline(transaction=False) as pipe:
                    for message_id, payload, headers in messages[start : start + 500]:
                        pipe.xadd(source.stream, {**(headers or {}), ID_FIELD: message_id, PAYLOAD_FIELD: payload})
                    await pipe.execute()

    async def aclose(self) -> None:
        """Close the client."""
        redis, self._redis = self._redis, None
        if redis is not None:
            await quietly(f"closing {self.url}", redis.aclose)


PUBLISHER = RedisPublisher


async def publish(url: str, messages: Sequence[tuple[str, bytes] | Outgoing]) -> None:
    """XADD each payload with its `message_id` field set to the producer id."""
    await publish_once(RedisPublisher(url), messages)


def _checked(opts: Any, consumer: str) -> str:
    try:
        return name_option("group", consumer)
    except ValueError as exc:
        raise opts.error(f"the consumer name {consumer!r} cannot be a group name ({exc}); set group=") from None
