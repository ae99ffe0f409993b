"""The contract every source keeps, run against its real broker: subclass `SourceContract` once per source.

A subclass provides the `url` fixture (yielding the source URL on a fresh queue/stream/subject, removed after the
test) and `dead_letters(url)` (what sits in the dead-letter place), and states what its broker really does with the
class attributes below. Every test publishes with the source module's own publisher (`edinbox.sources.publisher`,
or the subclass's `publish`), so keys come from producer ids. Shipped in `edinbox.testing.contract`; edinbox's own
sources (RabbitMQ, NATS, Redis, Kafka, the spool folder) run it in its test suite.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import pytest

from edinbox import ConfigurationError, SourceError
from edinbox.sources import Delivery, Source, open_source, publisher

__all__ = ["KILLED_CONSUMER", "SourceContract", "collect"]

CONSUMER = "hub"

KILLED_CONSUMER = """
import asyncio, os, signal, sys
from edinbox.sources import open_source

async def main():
    source = open_source(sys.argv[1], consumer=sys.argv[2])
    await source.open()
    got = await source.receive(max_messages=1, timeout=20)
    print(got[0].key if got else "", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # no ack, no close: the process dies holding the delivery

asyncio.run(main())
"""


async def collect(source: Source, count: int, *, within: float, poll: float = 1.0) -> list[Delivery]:
    """Receive until `count` deliveries arrived or `within` seconds passed, each `receive` waiting up to `poll` s."""
    deadline = time.monotonic() + within
    got: list[Delivery] = []
    while len(got) < count and (left := deadline - time.monotonic()) > 0:
        got.extend(await source.receive(max_messages=count - len(got), timeout=min(left, poll)))
    return got


class SourceContract(abc.ABC):
    """Publish, receive, ack, nack, reject, close and kill against a real broker; each subclass is one source."""

    publisher_dedup: ClassVar[bool] = False
    """The broker drops a second publish of the same producer id (NATS within its duplicate window)."""
    counts_deliveries: ClassVar[bool] = True
    """The broker reports a delivery count on redeliveries (RabbitMQ quorum queues, NATS, Redis XPENDING)."""
    redelivery_wait: ClassVar[float] = 20.0
    """Seconds within which a closed or killed consumer's unacked delivery comes back: a bound generous enough for
    a loaded machine (a delivery that comes back ends the wait at once)."""
    quiet: ClassVar[float] = 1.0
    """Seconds after which a delivery that did not come back never will (longer than the broker's ack wait)."""
    poll: ClassVar[float] = 1.0
    """Seconds each `receive` waits while a test waits for a redelivery that a broker timer brings back (the ack
    wait, a nack's delay)."""

    @abc.abstractmethod
    async def dead_letters(self, url: str) -> list[tuple[str | None, bytes]]:
        """The (producer id, payload) of every message parked in the source's dead-letter place."""

    def source(self, url: str, **options: Any) -> Source:
        """An unopened source for the URL, consumed as the hub."""
        return open_source(url, consumer=CONSUMER, **options)

    async def publish(self, url: str, messages: Sequence[tuple[str, bytes]]) -> None:
        """Publish as a producer does, with the producer id set."""
        await publisher(url)(url, messages)

    async def test_publish_receive_ack(self, url: str) -> None:
        """Published messages arrive once each, keyed by their producer ids, and are gone once acked."""
        sent = [(f"id-{n}", f"payload {n}".encode()) for n in range(5)]
        await self.publish(url, sent)
        async with self.source(url) as source:
            got = await collect(source, 5, within=10)
            assert sorted((d.key, d.payload) for d in got) == sorted(sent)
            assert all(d.message_id == d.key and d.source for d in got)
            assert all(not d.redelivered and d.delivery_count in (1, None) for d in got)
            for delivery in got:
                await source.ack(delivery)
        async with self.source(url) as source:
            assert await collect(source, 1, within=self.quiet) == []

    async def test_nack_redelivers(self, url: str) -> None:
        """A nacked delivery (not settled) comes back with the same key, flagged or counted as a redelivery."""
        await self.publish(url, [("retry-me", b"x")])
        async with self.source(url) as source:
            [first] = await collect(source, 1, within=10)
            await source.nack(first)
            [again] = await collect(source, 1, within=self.redelivery_wait)
            assert (again.key, again.payload) == ("retry-me", b"x")
            assert again.redelivered
            if self.counts_deliveries:
                assert again.delivery_count == 2
            await source.ack(again)

    async def test_nack_with_delay_waits(self, url: str) -> None:
        """A nack with a delay is not redelivered before the delay, and is redelivered after it."""
        await self.publish(url, [("later", b"x")])
        async with self.source(url) as source:
            [first] = await collect(source, 1, within=10)
            started = time.monotonic()
            await source.nack(first, delay=1.0)
            [again] = await collect(source, 1, within=self.redelivery_wait + 1.0, poll=self.poll)
            assert time.monotonic() - started >= 0.9
            assert again.key == "later"
            assert again.redelivered
            await source.ack(again)

    async def test_close_without_ack_redelivers(self, url: str) -> None:
        """A delivery that was never acked comes back to the next consumer after the first one closed."""
        await self.publish(url, [("unacked", b"x")])
        async with self.source(url) as source:
            [first] = await collect(source, 1, within=10)
            assert not first.redelivered
        async with self.source(url) as source:
            [again] = await collect(source, 1, within=self.redelivery_wait, poll=self.poll)
            assert again.key == "unacked"
            assert again.redelivered
            if self.counts_deliveries:
                assert again.delivery_count is not None
                assert again.delivery_count >= 2
            await source.ack(again)
            assert await collect(source, 1, within=self.quiet) == []

    async def test_killed_consumer_redelivers(self, url: str) -> None:
        """A consumer SIGKILLed while holding a delivery (commit done, ack not sent) leaves it to be redelivered."""
        await self.publish(url, [("killed", b"x")])
        child = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", KILLED_CONSUMER, url, CONSUMER],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert child.returncode == -9, child.stderr
        assert child.stdout.strip() == "killed"
        async with self.source(url) as source:
            [again] = await collect(source, 1, within=self.redelivery_wait, poll=self.poll)
            assert again.key == "killed"
            assert again.redelivered
            await source.ack(again)
            assert await collect(source, 1, within=self.quiet) == []

    async def test_reject_parks_in_dead_letters(self, url: str) -> None:
        """A rejected delivery is never redelivered and shows up, with its producer id, in the dead-letter place."""
        await self.publish(url, [("poison", b"bad"), ("fine", b"good")])
        async with self.source(url) as source:
            got = {d.key: d for d in await collect(source, 2, within=10)}
            await source.reject(got["poison"], reason="EdiSyntaxError: no UNZ trailer")
            await source.ack(got["fine"])
            assert await collect(source, 1, within=self.quiet) == []
        async with self.source(url) as source:
            assert await collect(source, 1, within=self.quiet) == []
        assert await self.dead_letters(url) == [("poison", b"bad")]

    async def test_publisher_duplicates_share_a_key(self, url: str) -> None:
        """A producer retry (same id twice) arrives as two first deliveries with one key, unless the broker dedups."""
        await self.publish(url, [("dup", b"x"), ("dup", b"x"), ("single", b"y")])
        async with self.source(url) as source:
            got = await collect(source, 2 if self.publisher_dedup else 3, within=10)
            for delivery in got:
                await source.ack(delivery)
            got.extend(await collect(source, 1, within=self.quiet))
        counts = Counter(d.key for d in got)
        assert counts == Counter({"dup": 1 if self.publisher_dedup else 2, "single": 1})
        # the broker sees two new messages: only the producer id tells the inbox they are one
        assert all(not d.redelivered for d in got)

    def test_unknown_option_is_rejected(self, url: str) -> None:
        """A misspelt URL option is a ConfigurationError naming it, never silently ignored."""
        bad = url + ("&" if "?" in url else "?") + "prefech=10"
        with pytest.raises(ConfigurationError, match="prefech"):
            self.source(bad)

    async def test_settling_after_close_is_a_source_error_at_worst(self, url: str) -> None:
        """After close, settling a delivery raises SourceError or nothing (never a driver's exception), and closing
        again is quiet: the hub can always finish its batch and shut down."""
        await self.publish(url, [("late", b"x")])
        source = self.source(url)
        async with source:
            [delivery] = await collect(source, 1, within=10)
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: source.in_progress(delivery),
            lambda: source.nack(delivery, delay=1.0),
            lambda: source.nack(delivery),
            lambda: source.ack(delivery),
            lambda: source.reject(delivery, reason="late"),
        ]
        for call in calls:
            with contextlib.suppress(SourceError):
                await call()
        await source.aclose()
        async with self.source(url) as again:  # leave the queue clean: settle a redelivery, if any
            for delivery in await collect(again, 1, within=self.redelivery_wait):
                await again.ack(delivery)
