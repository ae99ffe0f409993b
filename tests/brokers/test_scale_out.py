"""Scaling out: four hub processes on one RabbitMQ queue and one PostgreSQL journal create every invoice once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aio_pika
import pytest

from services import require_service

from .harness import BROKERS, Broker
from .test_proof import CLI, check, hub_args, publish, traffic

HUBS = 4
_AMQP = "amqp://guest:guest@127.0.0.1/"


@pytest.fixture
def rabbitmq(unique_name: str) -> Iterator[Broker]:
    """RabbitMQ from the broker harness, the test's queue removed afterwards."""
    require_service("rabbitmq")
    [chosen] = [b for b in BROKERS if b.name == "rabbitmq"]
    yield chosen
    asyncio.run(chosen.cleanup(unique_name))


async def _consumers(queue: str) -> int:
    """Consumers subscribed to a queue (0 while it does not exist yet)."""
    connection = await aio_pika.connect(_AMQP)
    async with connection:
        channel = await connection.channel()
        try:
            declared = await channel.declare_queue(queue, passive=True)
        except aio_pika.exceptions.ChannelClosed:
            return 0
        return declared.declaration_result.consumer_count or 0


def test_four_hubs_share_one_queue_and_one_journal(
    rabbitmq: Broker, unique_name: str, tmp_path: Path, postgres_db: list[str]
) -> None:
    """Four hubs consuming one queue into one PostgreSQL journal: each settles a share, every invoice exists once,
    every producer copy is a duplicate, nothing is left on the queue."""
    url = rabbitmq.url(unique_name)
    files, unique = traffic(tmp_path, seed=11)
    init = subprocess.run(
        [*CLI, "init", *postgres_db, "--consumer", "hub"], capture_output=True, text=True, check=False
    )
    assert init.returncode == 0, init.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    # the idle timeout runs from each hub's start: on a loaded machine the four start seconds apart, and the first
    # must still be there when the traffic arrives
    args = [*CLI, *hub_args(url, postgres_db), "--batch-size", "2", "--idle-timeout", "12"]
    logs = [tmp_path / f"hub{n}.log" for n in range(HUBS)]
    hubs = [subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=log.open("w")) for log in logs]
    deadline = time.monotonic() + 60
    while asyncio.run(_consumers(unique_name)) < HUBS:  # all four subscribed before the traffic arrives
        assert time.monotonic() < deadline, "the four hubs never all subscribed"
        assert all(hub.poll() is None for hub in hubs), "a hub exited before the traffic arrived"
        time.sleep(0.2)
    publish(files, url)
    for hub in hubs:
        assert hub.wait(timeout=120) == 0, [log.read_text() for log in logs]
    texts = [log.read_text() for log in logs]
    assert all('"outcome":"processed"' in text for text in texts), "a hub settled no invoice"
    check(
        rabbitmq,
        unique_name,
        postgres_db,
        unique=unique,
        published=len(files),
        logs="\n".join(texts),
        redelivered=False,
    )
