"""The source contract and Redis Streams specifics, against the real Redis on 127.0.0.1:6379."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import redis.asyncio as redis_asyncio

from edinbox import ConfigurationError
from edinbox.sources import publisher
from edinbox.sources._redis_group import Group
from edinbox.sources.redis import RedisSource
from edinbox.testing._contract_source import KILLED_CONSUMER
from edinbox.testing.contract import collect
from services import require_service

from .contract import BrokerContract

SERVER = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def url(unique_name: str) -> AsyncIterator[str]:
    """A fresh stream (and its dead stream) reclaimed after 0.5 s idle, deleted afterwards."""
    require_service("redis")
    yield f"{SERVER}?stream={unique_name}&claim_idle=0.5"
    client = redis_asyncio.Redis.from_url(SERVER)
    await client.delete(unique_name, f"{unique_name}.dead")
    await client.aclose()


class TestRedis(BrokerContract):
    """Redis Streams: own pending entries re-read, idle entries reclaimed, XPENDING delivery counts."""

    quiet = 1.0  # longer than the claim_idle of 0.5 s below

    async def dead_letters(self, url: str) -> list[tuple[str | None, bytes]]:
        """The entries moved to the dead stream."""
        client = redis_asyncio.Redis.from_url(SERVER)
        try:
            entries = await client.xrange(RedisSource.from_url(url, consumer="x").dead)
        finally:
            await client.aclose()
        return [(fields[b"message_id"].decode(), fields[b"payload"]) for _, fields in entries]

    async def test_stable_name_takes_back_its_own_pending_entries(self, url: str) -> None:
        """A restarted consumer with the same name re-reads its pending entries at once; other members wait."""
        await self.publish(url, [("mine", b"x")])
        patient = url.replace("claim_idle=0.5", "claim_idle=60")
        async with self.source(patient, name="w1") as source:
            [first] = await collect(source, 1, within=5)
        async with self.source(patient, name="w2") as other:
            assert await collect(other, 1, within=0.5) == []
        async with self.source(patient, name="w1") as source:
            [again] = await collect(source, 1, within=10)
            assert (again.key, again.delivery_count, again.redelivered) == ("mine", 2, True)
            assert again.coordinates == first.coordinates
            await source.ack(again)

    async def test_idle_entry_of_a_live_member_is_reclaimed_after_claim_idle(self, url: str) -> None:
        """Another member reclaims an entry left pending longer than claim_idle (XAUTOCLAIM), counting it."""
        await self.publish(url, [("stuck", b"x")])
        async with self.source(url, name="w1") as stuck, self.source(url, name="w2") as rescuer:
            [held] = await collect(stuck, 1, within=5)
            [claimed] = await collect(rescuer, 1, within=10)
            assert (claimed.key, claimed.delivery_count) == ("stuck", 2)
            await rescuer.ack(claimed)
            await stuck.ack(held)  # the late ack of the first holder is harmless (XACK of an acked id is 0)

    async def test_in_progress_keeps_an_entry_from_being_reclaimed(self, url: str) -> None:
        """`in_progress` resets the idle time, so a slow handler's entry is not stolen by another member."""
        await self.publish(url, [("slow", b"x")])
        url = url.replace("claim_idle=0.5", "claim_idle=3")
        async with self.source(url, name="w1") as slow, self.source(url, name="w2") as rival:
            [held] = await collect(slow, 1, within=5)
            for _ in range(16):  # 4.8 s in all, idle about 0.35 s at a time: margin for a loaded machine
                await asyncio.sleep(0.3)
                await slow.in_progress(held)
                assert await rival.receive(max_messages=1, timeout=0.05) == []
            await slow.ack(held)


async def self_publish(url: str, messages: Sequence[tuple[str, bytes]]) -> None:
    """Publish as a producer does."""
    await publisher(url)(url, messages)


async def _client() -> redis_asyncio.Redis:
    return redis_asyncio.Redis.from_url(SERVER, decode_responses=True)


async def test_settled_entries_are_trimmed_and_a_clean_close_leaves_the_group(url: str) -> None:
    """Acked entries are trimmed from the stream (down to the oldest still pending), and a clean close deletes the
    consumer from the group only once nothing is pending on it: after a run the stream is empty, not a history."""
    await self_publish(url, [(f"m{n}", b"x") for n in range(10)])
    client = await _client()
    stream = RedisSource.from_url(url, consumer="x").stream
    try:
        async with RedisSource.from_url(url, consumer="hub", name="w1") as source:
            got = await collect(source, 10, within=5)
            for delivery in got[1:]:  # all but the oldest
                await source.ack(delivery)
        assert await client.xlen(stream) == 10  # the oldest entry is still pending: trimming stops below it
        assert [c["name"] for c in await client.xinfo_consumers(stream, "hub")] == ["w1"]
        async with RedisSource.from_url(url, consumer="hub", name="w1") as source:
            [again] = await collect(source, 1, within=5)
            assert again.key == got[0].key
            await source.ack(again)
            await self_publish(url, [("late", b"y")])
            [late] = await collect(source, 1, within=5)
            await source.ack(late)
        assert await client.xlen(stream) == 0
        assert await client.xinfo_consumers(stream, "hub") == []
    finally:
        await client.aclose()


async def test_trim_keeps_what_another_group_has_not_read(url: str) -> None:
    """Trimming considers every group of the stream: entries one group settled stay while another still needs them."""
    await self_publish(url, [(f"m{n}", b"x") for n in range(5)])
    client = await _client()
    stream = RedisSource.from_url(url, consumer="x").stream
    try:
        async with RedisSource.from_url(url, consumer="hub", name="w1") as first:
            await RedisSource.from_url(url, consumer="audit").open()  # a second group that reads nothing yet
            for delivery in await collect(first, 5, within=5):
                await first.ack(delivery)
        assert await client.xlen(stream) == 5
        async with RedisSource.from_url(url, consumer="audit", name="a1") as audit:
            for delivery in await collect(audit, 5, within=5):
                await audit.ack(delivery)
        assert await client.xlen(stream) == 0
    finally:
        await client.aclose()


async def test_a_killed_members_entries_are_claimed_after_dead_after(url: str) -> None:
    """A member SIGKILLed holding an entry is presumed dead once silent for `dead_after` (XINFO CONSUMERS idle):
    another member claims the entry then, long before `claim_idle`."""
    url = url.replace("claim_idle=0.5", "claim_idle=60&dead_after=1")
    await self_publish(url, [("orphan", b"x")])
    child = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", KILLED_CONSUMER, url, "hub"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.stdout.strip() == "orphan", child.stderr
    started = time.monotonic()
    async with RedisSource.from_url(url, consumer="hub", name="rescuer") as source:
        [again] = await collect(source, 1, within=10)
        waited = time.monotonic() - started
        assert (again.key, again.delivery_count) == ("orphan", 2)
        await source.ack(again)
    assert waited < 60 / 2  # well before claim_idle (60 s) passed


async def test_a_live_member_calling_in_progress_is_not_presumed_dead(url: str) -> None:
    """A member holding an entry past `dead_after` keeps it while it calls `in_progress` a few times per ack_wait."""
    url = url.replace("claim_idle=0.5", "claim_idle=60&dead_after=2")
    await self_publish(url, [("slow", b"x")])
    async with RedisSource.from_url(url, consumer="hub", name="w1") as slow:
        assert slow.ack_wait == 2
        [held] = await collect(slow, 1, within=5)
        async with RedisSource.from_url(url, consumer="hub", name="w2") as rival:
            for _ in range(16):  # 4.8 s, more than twice dead_after, idle about 0.35 s at a time
                await asyncio.sleep(0.3)
                await slow.in_progress(held)
                assert await rival.receive(max_messages=1, timeout=0.05) == []
        await slow.ack(held)


@pytest.mark.parametrize(
    "query",
    ["?group=g", "?stream=s&claim_idle=-1", "?stream=s&claim_idle=x", "?stream=s&group=a b", "?stream=s&idle=5"],
)
def test_bad_url_is_a_configuration_error_with_password_masked(query: str) -> None:
    """A missing, invalid or unknown option raises ConfigurationError and never shows the password."""
    with pytest.raises(ConfigurationError) as caught:
        RedisSource.from_url(f"redis://:s3cret@127.0.0.1:6379/0{query}", consumer="hub")
    assert "s3cret" not in str(caught.value)


def test_url_options_are_read() -> None:
    """Every documented option of a redis:// URL lands in the source; the group defaults to the consumer."""
    source = RedisSource.from_url("redis://127.0.0.1:6379/2?stream=edi.in&claim_idle=90&name=w1&dead=p", consumer="hub")
    assert (source.stream, source.group, source.name, source.claim_idle, source.dead) == (
        "edi.in",
        "hub",
        "w1",
        90,
        "p",
    )
    assert RedisSource.from_url("redis://h/0?stream=s", consumer="hub").name != ""


class SettlesBetween:
    """A real client whose XINFO GROUPS reply is followed, before it is returned, by `settle()`: another member
    acking its entries between the trim's two reads."""

    def __init__(self, inner: redis_asyncio.Redis, settle: Any) -> None:
        self.inner, self.settle = inner, settle

    async def xinfo_groups(self, stream: str) -> Any:
        """The groups as they were, then the other member's acks."""
        groups = await self.inner.xinfo_groups(stream)
        await self.settle()
        return groups

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_trim_meeting_entries_settled_between_its_reads_trims_what_is_settled(url: str) -> None:
    """XINFO GROUPS counts a pending entry that another member acks before the trim's XPENDING reads it (no oldest
    pending entry left): the trim takes the group as settled and trims below its last delivered entry, instead of
    failing on the missing entry (which the source reported as a broker outage)."""
    await self_publish(url, [(f"m{n}", b"x") for n in range(3)])
    client = redis_asyncio.Redis.from_url(SERVER)
    source = RedisSource.from_url(url, consumer="hub", name="w1")
    try:
        async with source:
            got = await collect(source, 3, within=5)

            async def settle() -> None:
                await client.xack(source.stream, source.group, *(d.handle for d in got))

            await Group(SettlesBetween(client, settle), source.stream, source.group, "w2").trim()
            assert await client.xlen(source.stream) == 0
    finally:
        await client.aclose()
