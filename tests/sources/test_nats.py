"""The source contract and NATS JetStream specifics, against the real nats-server on 127.0.0.1:4222."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import nats
import pytest
from nats.js.api import DiscardPolicy

from edinbox import ConfigurationError
from edinbox.sources import open_source
from edinbox.sources.nats import NatsSource
from edinbox.testing.contract import collect
from services import require_service

from .contract import BrokerContract

SERVER = "nats://127.0.0.1:4222"


async def _jetstream() -> tuple[Any, Any]:
    nc = await nats.connect(SERVER)
    return nc, nc.jetstream()


class TestNats(BrokerContract):
    """JetStream: nak and ack-wait expiry redeliver with `num_delivered`, the Msg-Id window drops quick retries."""

    publisher_dedup = True
    quiet = 1.5  # longer than the ack_wait of 1 s below
    poll = 20.0  # one pull outlasts the 1 s timers: a redelivery never comes due as the only pull request expires,
    # which nats-server before 2.10.14 answers with the message counted as a first delivery (see the source's docs)

    @pytest.fixture
    async def url(self, unique_name: str) -> AsyncIterator[str]:
        """A fresh stream and subject, with a 1 s ack wait; the stream is deleted afterwards."""
        require_service("nats")
        yield f"{SERVER}?stream={unique_name}&subject={unique_name}.in&ack_wait=1"
        nc, js = await _jetstream()
        try:
            await js.delete_stream(unique_name)
        except nats.js.errors.NotFoundError:
            pass  # the test never opened the source
        finally:
            await nc.close()

    async def dead_letters(self, url: str) -> list[tuple[str | None, bytes]]:
        """The copies published to the dead subject of the stream."""
        source = NatsSource.from_url(url, consumer="x")
        nc, js = await _jetstream()
        try:
            sub = await js.pull_subscribe(source.dead, stream=source.stream)
            try:
                messages = await sub.fetch(batch=100, timeout=1)
            except nats.errors.TimeoutError:
                return []
            return [(m.headers.get("Edinbox-Key"), m.data) for m in messages]
        finally:
            await nc.close()

    async def test_retry_after_the_dedup_window_is_a_new_message(self, url: str) -> None:
        """Past the Nats-Msg-Id window a producer retry is stored again: a first delivery carrying the same key."""
        async with self.source(url + "&duplicate_window=1") as source:
            await self.publish(url, [("late-retry", b"x")])
            await asyncio.sleep(1.5)
            await self.publish(url, [("late-retry", b"x")])
            got = await collect(source, 2, within=5)
            assert [(d.key, d.delivery_count) for d in got] == [("late-retry", 1), ("late-retry", 1)]
            assert got[0].coordinates != got[1].coordinates
            for delivery in got:
                await source.ack(delivery)

    async def test_in_progress_holds_a_long_delivery(self, url: str) -> None:
        """`in_progress` keeps resetting a 2 s ack wait, so a 3 s handler's delivery is not redelivered."""
        url = url.replace("ack_wait=1", "ack_wait=2")
        await self.publish(url, [("slow", b"x")])
        async with self.source(url) as source, self.source(url) as rival:
            [delivery] = await collect(source, 1, within=5)
            for _ in range(6):
                await asyncio.sleep(0.5)
                await source.in_progress(delivery)
            assert await collect(rival, 1, within=0.5) == []
            await source.ack(delivery)
        async with self.source(url) as source:
            assert await collect(source, 1, within=2.5) == []

    async def test_horizon_is_the_stream_max_age(self, unique_name: str) -> None:
        """The horizon is the stream's max_age, read when the source opens, and unknown before."""
        require_service("nats")
        nc, js = await _jetstream()
        try:
            await js.add_stream(name=unique_name, subjects=["other." + unique_name], max_age=3600)
            source = NatsSource.from_url(f"{SERVER}?stream={unique_name}&subject={unique_name}.in", consumer="hub")
            assert source.horizon is None
            async with source:
                assert source.horizon == timedelta(hours=1)
            info = await js.stream_info(unique_name)
            assert set(info.config.subjects) == {"other." + unique_name, f"{unique_name}.in", f"{unique_name}.in.dead"}
        finally:
            await js.delete_stream(unique_name)
            await nc.close()


@pytest.mark.parametrize(
    "query",
    [
        "?subject=a",
        "?stream=A.B&subject=a",
        "?stream=A&subject=a.*",
        "?stream=A&subject=a&ack_wait=0",
        "?stream=A&subject=a&max_deliver=0",
        "?stream=A&subject=a&durable=x.y",
        "?stream=A&subject=a&acks=1",
        "?stream=A&subject=a&discard=all",
        "?stream=A&subject=a&max_bytes=0",
        "?stream=A&subject=a&open_timeout=-1",
        "?stream=A&subject=a&max_age=60&duplicate_window=120",
    ],
)
def test_bad_url_is_a_configuration_error_with_password_masked(query: str) -> None:
    """A missing, invalid or unknown option raises ConfigurationError and never shows the password."""
    with pytest.raises(ConfigurationError) as caught:
        NatsSource.from_url(f"nats://user:s3cret@127.0.0.1:4222{query}", consumer="hub")
    assert "s3cret" not in str(caught.value)


def test_url_options_are_read() -> None:
    """Every documented option of a nats:// URL lands in the source; the durable defaults to the consumer."""
    source = NatsSource.from_url(
        "nats://127.0.0.1:4222?stream=EDI&subject=edi.in&ack_wait=5&max_deliver=3&max_ack_pending=9&dead=edi.parked",
        consumer="hub",
    )
    assert (source.stream, source.subject, source.durable, source.ack_wait) == ("EDI", "edi.in", "hub", 5.0)
    assert (source.max_deliver, source.max_ack_pending, source.dead) == (3, 9, "edi.parked")


async def test_stream_is_created_with_explicit_limits(unique_name: str) -> None:
    """A stream created by the source has the documented limits: max_age (the horizon), max_bytes, max_msgs, and
    discard=new by default, so a full stream refuses publishes instead of dropping unread messages."""
    require_service("nats")
    nc, js = await _jetstream()
    try:
        url = f"{SERVER}?stream={unique_name}&subject={unique_name}.in"
        async with NatsSource.from_url(url + "&max_age=3600&max_bytes=1000000&max_msgs=500", consumer="hub") as source:
            assert source.horizon == timedelta(hours=1)
            assert source.ack_wait == 30
        config = (await js.stream_info(unique_name)).config
        assert (config.max_age, config.max_bytes, config.max_msgs) == (3600, 1000000, 500)
        assert config.discard == DiscardPolicy.NEW
        await js.delete_stream(unique_name)
        async with NatsSource.from_url(url + "&discard=old", consumer="hub") as source:
            assert source.horizon == timedelta(days=7)
        config = (await js.stream_info(unique_name)).config
        assert (config.max_age, config.max_bytes, config.max_msgs) == (7 * 24 * 3600, 1 << 30, -1)
        assert config.discard == DiscardPolicy.OLD
    finally:
        await js.delete_stream(unique_name)
        await nc.close()


async def test_a_subject_another_stream_holds_is_a_configuration_error(unique_name: str) -> None:
    """A subject already held by another stream fails `open` at once with a ConfigurationError (no retry fixes
    it), never a SourceError the hub would wait on forever."""
    require_service("nats")
    nc, js = await _jetstream()
    try:
        await js.add_stream(name=unique_name + "_other", subjects=[f"{unique_name}.in"])
        url = f"{SERVER}?stream={unique_name}&subject={unique_name}.in&open_timeout=30"
        started = time.monotonic()
        with pytest.raises(ConfigurationError, match="overlap"):
            await NatsSource.from_url(url, consumer="hub").open()
        assert time.monotonic() - started < 30 / 2  # not retried until open_timeout
    finally:
        await js.delete_stream(unique_name + "_other")
        await nc.close()


async def test_the_inbox_horizon_is_the_max_age_of_a_stream_created_here(unique_name: str) -> None:
    """`open_source(..., horizon=)` gives a new stream that max_age unless the URL sets one; other sources ignore it."""
    require_service("nats")
    nc, js = await _jetstream()
    url = f"{SERVER}?stream={unique_name}&subject={unique_name}.in"
    try:
        async with open_source(url, consumer="hub", horizon=timedelta(hours=2)) as source:
            assert source.horizon == timedelta(hours=2)
        await js.delete_stream(unique_name)
        async with open_source(url + "&max_age=60", consumer="hub", horizon=timedelta(hours=2)) as source:
            assert source.horizon == timedelta(minutes=1)
    finally:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(unique_name)
        await nc.close()
    assert open_source("redis://127.0.0.1/0?stream=s", consumer="hub", horizon=timedelta(hours=2)) is not None
