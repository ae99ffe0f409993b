"""SIGTERM stops an idle `edinbox run` within a bounded time on every source, whatever its poll timeout.

The matrix starts one real hub process per cell (source x poll timeout) at once, each on a journal of its own,
then signals them one cell at a time and measures how long each takes to exit. A second signal stops at once, and
each source's receive takes an infinite timeout (waiting, not failing).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from edinbox.hub.config._model import HubConfig
from edinbox.sources import open_source, publisher
from edinbox.sources._kafka_config import MockCluster
from hub.test_outage import HubProcess, wait_for
from hub_ops import init
from services import require_service

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="signals as a process manager sends them")

SOURCES = ("spool", "rabbitmq", "nats", "redis", "kafka")
POLL_TIMEOUTS = ("default", "30", "3600")
BOUND = 10.0
"""Seconds an idle hub may take to exit after SIGTERM."""


class Sources:
    """One fresh queue, stream or topic per name on each source kind, removed at the end."""

    def __init__(self, root: Path, cluster: MockCluster) -> None:
        """Name places under `root` (the spool) and on `cluster` (Kafka)."""
        self.root = root
        self.cluster = cluster
        self.made: list[tuple[str, str]] = []

    def url(self, kind: str) -> str:
        """A fresh place of the `kind` source (skipped when its server is unreachable)."""
        name = "t" + uuid.uuid4().hex[:12]
        if kind == "spool":
            return f"dir://{self.root / name}"
        if kind == "kafka":
            return self.cluster.url(topic=name, group=name, **{"group.protocol": "consumer"})
        require_service(kind)
        self.made.append((kind, name))
        if kind == "rabbitmq":
            return f"amqp://guest:guest@127.0.0.1/?queue={name}"
        if kind == "nats":
            return f"nats://127.0.0.1:4222?stream={name}&subject={name}.in"
        return f"redis://127.0.0.1:6379/0?stream={name}"

    async def remove(self) -> None:
        """Delete the queues, streams and keys made on the brokers."""
        for kind, name in self.made:
            with contextlib.suppress(Exception):
                if kind == "rabbitmq":
                    from sources.test_rabbitmq import drop

                    await drop(name)
                elif kind == "nats":
                    import nats

                    nc = await nats.connect("nats://127.0.0.1:4222")
                    try:
                        await nc.jetstream().delete_stream(name)
                    finally:
                        await nc.close()
                else:
                    import redis.asyncio as redis_asyncio

                    client = redis_asyncio.Redis.from_url("redis://127.0.0.1:6379/0")
                    await client.delete(name, f"{name}.dead")
                    await client.aclose()


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sources]:
    """Places on every source kind, the Kafka ones on a mock cluster of this module."""
    cluster = MockCluster()
    made = Sources(tmp_path_factory.mktemp("spools"), cluster)
    try:
        yield made
    finally:
        asyncio.run(made.remove())
        cluster.close()


def start_hub(folder: Path, source: str, poll_timeout: str) -> HubProcess:
    """An `edinbox run` process on a new SQLite journal in `folder` and `source`, with `poll_timeout` unless it is
    "default"."""
    folder.mkdir(parents=True, exist_ok=True)
    db = f"sqlite:///{folder / 'hub.db'}"
    asyncio.run(init(HubConfig(db=db, source=source)))
    flags = [] if poll_timeout == "default" else ["--poll-timeout", poll_timeout]
    return HubProcess("--db", db, "--source", source, "--consumer", "hub", *flags)


@pytest.fixture(scope="module")
def hubs(sources: Sources, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], HubProcess]]:
    """One idle hub per cell of the matrix, all started at once (a cell whose server is unreachable has none)."""
    root = tmp_path_factory.mktemp("hubs")
    started: dict[tuple[str, str], HubProcess] = {}
    for kind in SOURCES:
        try:
            url = sources.url(kind)
        except pytest.skip.Exception:
            continue
        for poll in POLL_TIMEOUTS:
            started[kind, poll] = start_hub(root / f"{kind}-{poll}", url, poll)
    yield started
    for hub in started.values():
        if hub.proc.poll() is None:
            hub.proc.kill()
            hub.proc.wait()


@pytest.mark.parametrize("poll_timeout", POLL_TIMEOUTS)
@pytest.mark.parametrize("kind", SOURCES)
def test_sigterm_stops_an_idle_hub_within_its_bound(
    hubs: dict[tuple[str, str], HubProcess], kind: str, poll_timeout: str
) -> None:
    """An idle hub on this source and poll timeout exits with status 0 within BOUND seconds of one SIGTERM."""
    if (kind, poll_timeout) not in hubs:
        pytest.skip(f"{kind} is not reachable")
    hub = hubs[kind, poll_timeout]
    wait_for(lambda: bool(hub.events("started")) or hub.proc.poll() is not None, timeout=60, what="the hub's start")
    assert hub.proc.poll() is None, "\n".join(hub.lines)
    time.sleep(1.5)  # idle in its receive (or its broker's first poll)
    hub.proc.send_signal(signal.SIGTERM)
    began = time.monotonic()
    try:
        code = hub.proc.wait(timeout=60)
    finally:
        if hub.proc.poll() is None:
            hub.proc.kill()
    took = time.monotonic() - began
    assert code == 0, "\n".join(hub.lines)
    assert took < BOUND, f"exited {took:.1f} s after SIGTERM"


def test_a_second_signal_stops_at_once(tmp_path: Path) -> None:
    """SIGTERM then SIGINT while the first stop is under way ends the hub at once with status 130, saying so."""
    hub = start_hub(tmp_path, f"dir://{tmp_path / 'spool'}", "3600")
    wait_for(lambda: bool(hub.events("started")) or hub.proc.poll() is not None, timeout=60, what="the hub's start")
    time.sleep(0.5)
    os.kill(hub.proc.pid, signal.SIGTERM)
    os.kill(hub.proc.pid, signal.SIGINT)
    began = time.monotonic()
    code = hub.proc.wait(timeout=60)
    assert code == 128 + signal.SIGINT, "\n".join(hub.lines)
    assert time.monotonic() - began < 2
    hub._reader.join(timeout=10)
    assert "SIGINT again: stopping at once" in hub.lines, "\n".join(hub.lines)


def test_an_infinite_poll_timeout_is_refused_in_one_line(tmp_path: Path) -> None:
    """`--poll-timeout inf` is a configuration error (exit 1, one line), never a hub that cannot stop."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    command = ["run", "--db", db, "--source", f"dir://{tmp_path}", "--poll-timeout", "inf"]
    done = subprocess.run(
        [sys.executable, "-m", "edinbox.cli", *command],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    refused = "Error: --poll-timeout: Input should be less than or equal to 3600, got 'inf'"
    assert done.stderr.strip().splitlines() == [refused]


@pytest.mark.parametrize("kind", [kind for kind in SOURCES if kind != "kafka"])  # the mock's group join takes 30 s
async def test_a_receive_waits_an_infinite_timeout_out(sources: Sources, kind: str) -> None:
    """A receive with an infinite timeout waits (no error) and returns the delivery published while it waits."""
    url = sources.url(kind)
    send = publisher(url)
    await send(url, [("m-0", b"payload")])  # the topic or stream exists before its consumer starts
    async with open_source(url, consumer="hub") as source:
        first = await source.receive(max_messages=10, timeout=30)
        assert [d.key for d in first] == ["m-0"]
        await source.ack(first[0])
        waiting = asyncio.ensure_future(source.receive(max_messages=10, timeout=float("inf")))
        await asyncio.sleep(1.0)
        assert not waiting.done()
        await send(url, [("m-1", b"payload")])
        got = await asyncio.wait_for(waiting, 30)
        assert [d.key for d in got] == ["m-1"]
        await source.ack(got[0])


async def test_the_library_consumer_stops_within_its_bound_on_a_long_poll(tmp_path: Path) -> None:
    """An idle `AsyncConsumer` with a poll timeout of an hour returns soon (STOP_CHECK plus a little) after its stop
    is set."""
    from edinbox import AsyncConsumer, Inbox, Message, Tx
    from edinbox.sources import STOP_CHECK

    db = f"sqlite:///{tmp_path}/app.db"
    with Inbox(db, consumer="app") as inbox:
        inbox.create_schema()

    async def handler(tx: Tx, message: Message) -> None:
        pass

    consumer = AsyncConsumer(f"dir://{tmp_path / 'spool'}", handler, db=db, consumer="app", poll_timeout=3600)
    stop = asyncio.Event()
    running = asyncio.ensure_future(consumer.run(stop=stop))
    await asyncio.sleep(1.5)  # idle in its receive
    assert not running.done()
    stop.set()
    began = time.monotonic()
    assert await asyncio.wait_for(running, 30) == {}
    assert time.monotonic() - began < STOP_CHECK + 2
