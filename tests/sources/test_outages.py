"""Broker outages under a consuming source, on PRIVATE nats-server and redis-server instances killed with SIGKILL.

What the hub relies on: every failure is a one-line SourceError (never a driver's exception), the source comes
back by itself once the broker does, a source can be opened before its broker is up, closing a dead connection
never raises, and every published message is received and acked in the end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from edinbox import SourceError
from edinbox.sources import Delivery, open_source, publisher
from edinbox.testing.contract import collect
from servers import PrivateServer

from .contract import assert_one_line, settle_all

KINDS = ["nats", "redis"]


@pytest.fixture(params=KINDS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PrivateServer]:
    """A private broker (not started yet), killed after the test."""
    private = PrivateServer(request.param, tmp_path)
    yield private
    private.kill()


def url_of(server: PrivateServer, name: str) -> str:
    """A source URL on the private server, with short timers so the test runs in seconds."""
    if server.kind == "nats":
        return f"nats://127.0.0.1:{server.port}?stream={name}&subject={name}.in&ack_wait=2&open_timeout=1"
    return f"redis://127.0.0.1:{server.port}/0?stream={name}&claim_idle=30&dead_after=30&open_timeout=1"


async def publish_until_accepted(url: str, messages: list[tuple[str, bytes]], *, within: float = 20) -> None:
    """Publish, retrying while the restarted broker is still getting ready (JetStream takes a moment)."""
    deadline = time.monotonic() + within
    while True:
        try:
            await publisher(url)(url, messages)
            return
        except SourceError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_source_survives_its_broker_killed_and_restarted(server: PrivateServer, unique_name: str) -> None:
    """Acks and receives during the outage raise only SourceError; after the restart every message is acked."""
    server.start()
    url = url_of(server, unique_name)
    sent = [(f"m{n}", f"payload {n}".encode()) for n in range(20)]
    await publisher(url)(url, sent[:10])
    acked: set[str] = set()
    errors: list[SourceError] = []
    async with open_source(url, consumer="hub") as source:
        got = await collect(source, 10, within=10)
        assert len(got) == 10
        for delivery in got[:5]:
            await source.ack(delivery)
            acked.add(delivery.key)
        server.kill()
        for delivery in got[5:]:  # the commit happened, the ack cannot reach the broker: the message stays unsettled
            with pytest.raises(SourceError):
                await source.ack(delivery)
        for _ in range(3):
            try:
                assert await source.receive(max_messages=5, timeout=0.3) == []
            except SourceError as exc:
                errors.append(exc)
        assert errors, "an outage must be reported, not look like an empty queue forever"
        server.start()
        await publish_until_accepted(url, sent[10:])
        await settle_all(source, {key for key, _ in sent}, acked, errors)
    assert acked == {key for key, _ in sent}
    assert_one_line(errors)


async def test_source_opened_before_its_broker_starts_waits_for_it(server: PrivateServer, unique_name: str) -> None:
    """`open` with the broker down raises SourceError after `open_timeout`; the same source then works once it is up."""
    url = url_of(server, unique_name)
    source = open_source(url, consumer="hub")
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        await source.open()
    assert time.monotonic() - started >= 0.5  # it waited (with backoff) before giving up
    errors: list[SourceError] = [caught.value]
    try:
        with pytest.raises(SourceError):
            await source.receive(max_messages=1, timeout=0.2)
        server.start()
        await publish_until_accepted(url, [("late", b"x")])
        acked: set[str] = set()
        await settle_all(source, {"late"}, acked, errors)
        assert acked == {"late"}
    finally:
        await source.aclose()
    assert_one_line(errors)


async def test_close_on_a_dead_connection_never_raises(server: PrivateServer, unique_name: str) -> None:
    """Closing a source whose broker was killed returns quietly; its unacked delivery comes back after the restart."""
    server.start()
    url = url_of(server, unique_name)
    await publisher(url)(url, [("held", b"x")])
    source = open_source(url, consumer="hub", name="w1") if server.kind == "redis" else open_source(url, consumer="hub")
    await source.open()
    [held] = await collect(source, 1, within=10)
    server.kill()
    await source.aclose()
    await source.aclose()  # twice: still quiet
    server.start()
    again: list[Delivery] = []
    async with (
        open_source(url, consumer="hub", name="w1") if server.kind == "redis" else open_source(url, consumer="hub")
    ) as source:
        deadline = time.monotonic() + 20
        while not again and time.monotonic() < deadline:
            try:
                again = list(await source.receive(max_messages=1, timeout=0.5))
            except SourceError:
                continue
        assert [d.key for d in again] == [held.key]
        await source.ack(again[0])


async def test_source_recovers_from_a_broker_restarted_empty(server: PrivateServer, unique_name: str) -> None:
    """A broker that comes back without its data (no stream, no group, no consumer) is prepared again by the source
    on its own: what is published after the restart is received and acked, with only SourceError meanwhile."""
    server.start()
    url = url_of(server, unique_name)
    await publisher(url)(url, [("before", b"x")])
    errors: list[SourceError] = []
    acked: set[str] = set()
    async with open_source(url, consumer="hub") as source:
        await settle_all(source, {"before"}, acked, errors)
        server.kill()
        server.wipe()
        server.start()
        await publish_until_accepted(url, [("after", b"y")])
        await settle_all(source, {"after"}, acked, errors)
    assert acked == {"before", "after"}
    assert_one_line(errors)


async def test_settling_during_an_outage_fails_fast(server: PrivateServer, unique_name: str) -> None:
    """Acks sent as the broker dies fail as soon as the connection drops, not each after a full answer timeout:
    ten acks take about as long as one (a relative bound: at most three times one ack's failure)."""
    server.start()
    url = url_of(server, unique_name)
    await publisher(url)(url, [(f"m{n}", b"x") for n in range(11)])
    async with open_source(url, consumer="hub") as source:
        got = await collect(source, 11, within=10)
        server.kill()
        started = time.monotonic()
        with pytest.raises(SourceError):
            await source.ack(got[0])
        one = time.monotonic() - started
        started = time.monotonic()
        for delivery in got[1:]:
            with pytest.raises(SourceError):
                await source.ack(delivery)
        ten = time.monotonic() - started
    assert ten <= 3 * one + 0.5
