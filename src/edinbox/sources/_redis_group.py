"""Redis consumer-group upkeep: the client, creating the group, trimming settled entries, claiming dead members'.

Kept apart from the source so each rule reads on its own; every method raises the driver's exceptions, which the
source turns into SourceError.
"""

from __future__ import annotations

from typing import Any

from edinbox._errors import ConfigurationError

__all__ = ["Group", "client", "refused", "text"]


def client(server: str) -> Any:
    """A redis.asyncio client for the URL (it connects on its first command), retrying a dropped connection briefly."""
    try:
        import redis.asyncio
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialWithJitterBackoff
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ConfigurationError("redis:// sources need the redis extra: pip install 'edinbox[redis]'") from exc
    return redis.asyncio.Redis.from_url(
        server,
        socket_connect_timeout=2,
        socket_timeout=10,
        retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries=2),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
    )


def refused(exc: BaseException) -> bool | str:
    """Whether the server refused the user or password, or (as text) the database number of the URL: a
    configuration error, not an outage."""
    from redis.exceptions import AuthenticationError, AuthorizationError

    if "DB index is out of range" in str(exc):
        return "the server has no such database number (0-15 unless its `databases` setting gives more)"
    return isinstance(exc, AuthenticationError | AuthorizationError) or "WRONGPASS" in str(exc)


def text(value: Any) -> str:
    """A reply value as text."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _id(value: str) -> tuple[int, int]:
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)


class Group:
    """One consumer group of one stream, seen from one member."""

    def __init__(self, redis: Any, stream: str, group: str, name: str) -> None:
        """Name the stream, the group and this member's consumer name."""
        self._redis, self.stream, self.group, self.name = redis, stream, group, name

    async def create(self) -> None:
        """Create the stream and the group (reading from the start) when missing."""
        import redis.exceptions

        await self._redis.ping()
        try:
            await self._redis.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def trim(self) -> None:
        """XTRIM MINID below the oldest entry any group of the stream still needs."""
        floor: tuple[int, int] | None = None
        for info in await self._redis.xinfo_groups(self.stream):
            oldest = None
            if int(info["pending"]) > 0:  # a member may ack them all before XPENDING reads the oldest
                oldest = (await self._redis.xpending(self.stream, text(info["name"])))["min"]
            if oldest is not None:
                needed = _id(text(oldest))
            else:  # everything delivered to it is settled: it needs what comes after the last delivered entry
                ms, seq = _id(text(info["last-delivered-id"]))
                needed = (ms, seq + 1)
            floor = needed if floor is None else min(floor, needed)
        if floor is not None and floor > (0, 1):
            await self._redis.xtrim(self.stream, minid=f"{floor[0]}-{floor[1]}", approximate=False)

    async def claim_dead(self, *, dead_after: float, forget_after: float, count: int) -> list[Any]:
        """Claim up to `count` pending entries of members silent for `dead_after` s; forget long-gone empty ones.

        The claim asks for that same minimum idle time, so an entry a member touched meanwhile stays with it.
        """
        claimed: list[Any] = []
        for info in await self._redis.xinfo_consumers(self.stream, self.group):
            name, idle, pending = text(info["name"]), int(info["idle"]) / 1000, int(info["pending"])
            if name == self.name or idle < dead_after:
                continue
            if pending == 0:
                if idle >= forget_after:
                    await self._redis.xgroup_delconsumer(self.stream, self.group, name)
                continue
            rows = await self._redis.xpending_range(
                self.stream, self.group, min="-", max="+", count=count - len(claimed), consumername=name
            )
            ids = [row["message_id"] for row in rows]
            if ids:
                claimed += await self._redis.xclaim(self.stream, self.group, self.name, int(dead_after * 1000), ids)
            if len(claimed) >= count:
                break
        return claimed

    async def leave(self) -> None:
        """Delete this member from the group when nothing is pending on it (its entries would be lost otherwise)."""
        rows = await self._redis.xpending_range(
            self.stream, self.group, min="-", max="+", count=1, consumername=self.name
        )
        if not rows:
            await self._redis.xgroup_delconsumer(self.stream, self.group, self.name)
