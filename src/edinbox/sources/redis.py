"""Redis Streams (redis.asyncio): a consumer group, XACK after the commit, dead consumers' entries reclaimed.

URL: `redis://127.0.0.1:6379/0?stream=edi.in&group=hub` with the options

- `stream` (required): the stream, created with the group when missing;
- `group`: the consumer group (default: the inbox consumer's name); processes in one group share the work;
- `name`: this process's consumer name in the group (default `<host>-<pid>`). A stable name lets a restarted
  process take back its own pending entries at once; with the default, another member reclaims them;
- `claim_idle`: seconds an entry stays pending, unacked, before any member reclaims it with XAUTOCLAIM (default 60;
  keep it well above the longest handler time, or in-flight work is stolen and run twice);
- `dead`: the stream parked entries are moved to (default `<stream>.dead`).

Redis never redelivers by itself: on start this consumer re-reads its own pending entries (`XREADGROUP ... 0`),
then reads new ones (`>`), and every `claim_idle / 2` seconds it reclaims idle entries of other members. The delivery
count comes from XPENDING. The key is the `message_id` field of the entry, which `publish` writes next to `payload`;
the fallback key is the entry id, stable across redeliveries but not across producer retries.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from edinbox._errors import ConfigurationError, SourceError
from edinbox._urls import mask
from edinbox.sources._base import Delivery, Source
from edinbox.sources._options import name_option, positive_float, server_url, split_url

__all__ = ["SOURCE", "RedisSource", "publish"]

_SCHEMES = ("redis", "rediss")
ID_FIELD = "message_id"
PAYLOAD_FIELD = "payload"


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
        dead: str | None = None,
    ) -> None:
        """Configure the source; nothing connects before `open()`."""
        self.url = mask(url)
        self.consumer = consumer
        self.stream = stream
        self.group = group or consumer
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.claim_idle = claim_idle
        self.dead = dead or f"{stream}.dead"
        self._server = url
        self._redis: Any = None
        self._draining = True
        self._cursor = "0-0"
        self._next_claim = 0.0
        self._due: dict[str, float] = {}

    @classmethod
    def from_url(cls, url: str, *, consumer: str, **options: Any) -> RedisSource:
        """Build the source a `redis://` URL names; unknown or invalid options raise ConfigurationError."""
        parts, opts = split_url(url, schemes=_SCHEMES, overrides=options)
        source = cls(
            server_url(parts),
            consumer=consumer,
            stream=opts.require("stream", name_option),
            group=opts.take("group", name_option, None) or _checked(opts, consumer),
            name=opts.take("name", name_option, None),
            claim_idle=opts.take("claim_idle", positive_float, 60.0),
            dead=opts.take("dead", name_option, None),
        )
        opts.finish()
        source.url = mask(url)
        return source

    async def open(self) -> None:
        """Connect and create the stream and the consumer group (reading from the start) when missing."""
        self._redis = await _connect(self._server, self.url)
        try:
            await _ensure_group(self._redis, self.stream, self.group)
        except Exception as exc:
            await self.aclose()
            raise SourceError(f"cannot create group {self.group!r} on {self.stream!r} at {self.url}: {exc}") from exc
        self._draining, self._cursor, self._next_claim, self._due = True, "0-0", 0.0, {}

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Return due nacked entries, own pending entries (on start), reclaimed idle entries, or new entries."""
        if self._redis is None:
            raise SourceError(f"the source {self.url} is not open")
        try:
            return await self._receive(max_messages, timeout)
        except SourceError:
            raise
        except Exception as exc:
            raise SourceError(f"read from {self.stream!r} at {self.url} failed: {exc}") from exc

    async def _receive(self, max_messages: int, timeout: float) -> list[Delivery]:
        deadline = time.monotonic() + timeout
        while True:
            deliveries = await self._receive_once(max_messages, deadline)
            if deliveries or time.monotonic() >= deadline:
                return deliveries

    async def _receive_once(self, max_messages: int, deadline: float) -> list[Delivery]:
        now = time.monotonic()
        timeout = deadline - now
        due = [entry_id for entry_id, at in self._due.items() if at <= now][:max_messages]
        if due:
            for entry_id in due:
                del self._due[entry_id]
            claimed = await self._redis.xclaim(self.stream, self.group, self.name, 0, due)
            return await self._counted(claimed)
        if self._draining:
            reply = await self._redis.xreadgroup(self.group, self.name, {self.stream: "0"}, count=max_messages)
            entries = reply[0][1] if reply else []
            if entries:
                return await self._counted(entries)
            self._draining = False
        if now >= self._next_claim:
            reply = await self._redis.xautoclaim(
                self.stream, self.group, self.name, int(self.claim_idle * 1000), self._cursor, count=max_messages
            )
            self._cursor = _text(reply[0])
            if self._cursor == "0-0":
                self._next_claim = now + self.claim_idle / 2
            if reply[1]:
                return await self._counted(reply[1])
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
        texts = {_text(k): v for k, v in fields.items()}
        payload = texts.pop(PAYLOAD_FIELD, b"")
        headers = {k: _text(v) for k, v in texts.items()}
        entry = _text(entry_id)
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
        await self._call("XACK", delivery, self._redis.xack(self.stream, self.group, delivery.handle))

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Keep the entry pending and claim it back to this consumer after `delay` seconds (XCLAIM)."""
        self._due[delivery.handle] = time.monotonic() + (delay or 0.0)

    async def in_progress(self, delivery: Delivery) -> None:
        """Reset the entry's idle time (XCLAIM JUSTID to this consumer) so no member reclaims it meanwhile."""
        claim = self._redis.xclaim(self.stream, self.group, self.name, 0, [delivery.handle], justid=True)
        await self._call("XCLAIM", delivery, claim)

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Move the entry to the dead stream with the reason, and XACK it, in one MULTI/EXEC."""
        fields: dict[str, Any] = {**delivery.headers, PAYLOAD_FIELD: delivery.payload}
        fields.update({"edinbox_reason": reason, "edinbox_coordinates": delivery.coordinates})
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.xadd(self.dead, fields)
                pipe.xack(self.stream, self.group, delivery.handle)
                await pipe.execute()
        except Exception as exc:
            raise SourceError(f"cannot park {delivery.key!r} in {self.dead!r} at {self.url}: {exc}") from exc

    async def _call(self, verb: str, delivery: Delivery, call: Any) -> None:
        try:
            await call
        except Exception as exc:  # the entry stays pending and comes back; the inbox absorbs the redelivery
            raise SourceError(f"{verb} of {delivery.key!r} at {self.url} failed: {exc}") from exc

    async def aclose(self) -> None:
        """Close the connection; unacked entries stay pending until re-read or reclaimed."""
        client, self._redis = self._redis, None
        if client is not None:
            await client.aclose()


SOURCE = RedisSource


async def publish(url: str, messages: Sequence[tuple[str, bytes]]) -> None:
    """XADD each payload with its `message_id` field set to the producer id."""
    source = RedisSource.from_url(url, consumer="publisher")
    client = await _connect(source._server, source.url)
    try:
        for start in range(0, len(messages), 500):
            async with client.pipeline(transaction=False) as pipe:
                for message_id, payload in messages[start : start + 500]:
                    pipe.xadd(source.stream, {ID_FIELD: message_id, PAYLOAD_FIELD: payload})
                await pipe.execute()
    except Exception as exc:
        raise SourceError(f"cannot publish to {source.stream!r} at {source.url}: {exc}") from exc
    finally:
        await client.aclose()


def _checked(opts: Any, consumer: str) -> str:
    try:
        return name_option("group", consumer)
    except ValueError as exc:
        raise opts.error(f"the consumer name {consumer!r} cannot be a group name ({exc}); set group=") from None


async def _connect(server: str, masked: str) -> Any:
    try:
        import redis.asyncio
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ConfigurationError("redis:// sources need the redis extra: pip install 'edinbox[redis]'") from exc
    try:
        client = redis.asyncio.Redis.from_url(server)
        await client.ping()
    except Exception as exc:
        raise SourceError(f"cannot connect to {masked}: {mask(str(exc))}") from exc
    return client


async def _ensure_group(client: Any, stream: str, group: str) -> None:
    import redis.exceptions

    try:
        await client.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.exceptions.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
