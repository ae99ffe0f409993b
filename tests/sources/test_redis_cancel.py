"""Cancelling a Redis call of the source mid-flight (the hub cancels at stop, on a batch abandoned, when a progress beat
ends), against the real Redis on 127.0.0.1:6379: the cancel propagates, nothing is lost, the source goes on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis
import redis.asyncio as redis_asyncio

from edinbox.sources import Delivery
from edinbox.sources.redis import RedisSource
from edinbox.testing.contract import collect
from services import require_service

SERVER = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def source(unique_name: str) -> AsyncIterator[RedisSource]:
    """An open source on a fresh stream whose entries are reclaimed only after 60 s idle; the stream deleted after."""
    require_service("redis")
    opened = RedisSource.from_url(f"{SERVER}?stream={unique_name}&claim_idle=60", consumer="hub", name="w1")
    await opened.open()
    yield opened
    await opened.aclose()
    client = redis_asyncio.Redis.from_url(SERVER)
    await client.delete(unique_name, f"{unique_name}.dead")
    await client.aclose()


def add(stream: str, key: str) -> None:
    """XADD an entry from a blocking client, holding the event loop until the server has executed it."""
    with redis.Redis.from_url(SERVER) as client:
        client.xadd(stream, {"message_id": key, "payload": b"x"})


def hold(seconds: float) -> None:
    """Hold the event loop (a blocking sleep): replies arrive meanwhile and no task reads them."""
    time.sleep(seconds)


async def cancelled_after_the_reply(
    call: Awaitable[Any], *, before: Callable[[], None] = lambda: None, blocking: bool = False
) -> None:
    """Start `call`, let it send its command (a `blocking` read waits in XREADGROUP), run `before()` and leave the
    server time to reply while the loop is held, then cancel the task before it reads the reply: CancelledError."""
    task = asyncio.ensure_future(call)
    if blocking:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0)  # the task's first step sends its command
    before()
    hold(0.02)  # the reply arrives and stays unread
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def pending(source: RedisSource) -> int:
    """How many entries of the source's group are pending."""
    client = redis_asyncio.Redis.from_url(SERVER)
    try:
        return int((await client.xpending(source.stream, source.group))["pending"])
    finally:
        await client.aclose()


async def received(source: RedisSource, count: int) -> list[Delivery]:
    """`count` deliveries within 3 s (far below claim_idle), acked."""
    got = await collect(source, count, within=3)
    for delivery in got:
        await source.ack(delivery)
    return got


async def test_a_read_cancelled_after_the_server_replied_hands_its_entries_out_at_the_next_receive(
    source: RedisSource,
) -> None:
    """XREADGROUP delivered entries to this member (now pending on it) but the cancelled read never returned them: the
    next receive hands them out, instead of leaving them pending until claim_idle."""
    await cancelled_after_the_reply(
        source.receive(max_messages=10, timeout=5), before=lambda: add(source.stream, "lost?"), blocking=True
    )
    assert [d.key for d in await received(source, 1)] == ["lost?"]
    assert await pending(source) == 0


@pytest.mark.parametrize("verb", ["ack", "in_progress", "reject"])
async def test_a_settling_call_cancelled_mid_flight_raises_cancelled_and_the_source_goes_on(
    source: RedisSource, verb: str
) -> None:
    """An ack, in_progress or reject cancelled while its reply is unread ends with CancelledError (not SourceError);
    the next calls get their own replies, and nothing is left pending."""
    add(source.stream, "first")
    [first] = await collect(source, 1, within=3)
    call = {"ack": source.ack, "in_progress": source.in_progress}.get(verb)
    await cancelled_after_the_reply(call(first) if call else source.reject(first, reason="bad"))
    add(source.stream, "second")
    keys = sorted(d.key or "" for d in await received(source, 2))
    assert keys in (["second"], ["first", "second"])  # a settlement that may not have landed comes back, once
    await source.ack(first)
    assert await pending(source) == 0


async def test_reads_cancelled_at_random_moments_lose_and_double_nothing(source: RedisSource) -> None:
    """Receives cancelled at every moment of a publishing run hand out each entry, none left pending, no stale reply
    read in place of another."""
    keys: list[str] = []
    for n in range(60):
        task = asyncio.ensure_future(source.receive(max_messages=5, timeout=5))
        await asyncio.sleep(0.01 + (n % 7) * 0.002)
        add(source.stream, f"m{n}")
        hold((n % 4) * 0.005)
        task.cancel()
        try:
            got = await task
        except asyncio.CancelledError:
            got = []
        for delivery in got:
            await source.ack(delivery)
        keys += [d.key or "" for d in got]
    deadline = time.monotonic() + 3
    while len(set(keys)) < 60 and time.monotonic() < deadline:
        for delivery in await source.receive(max_messages=60, timeout=0.5):
            await source.ack(delivery)
            keys.append(delivery.key or "")
    assert sorted(set(keys)) == sorted(f"m{n}" for n in range(60))
    assert await pending(source) == 0


async def test_a_close_cancelled_mid_flight_still_closes_the_client(source: RedisSource) -> None:
    """aclose cancelled while it trims still closes the client (no connection left open) and raises CancelledError."""
    client = source._redis
    await cancelled_after_the_reply(source.aclose())
    assert client.connection_pool._in_use_connections == set()
    assert all(c._writer is None for c in client.connection_pool._available_connections)
