"""A RabbitMQ queue that vanishes under a running hub is never waited on in silence.

Deleted while the hub consumes it (an operator's `queue_delete`, a policy's expiry), the broker cancels the hub's
consumer; lost while the hub was away (a node that forgot it in a crash), the hub's source finds it missing when it
reconnects. Either way the messages it held are gone: the source says so in one ERROR line naming the queue, counts
it (`edinbox_source_queues_lost_total`), declares the queue again and consumes what is published to it afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from edinbox.hub import HubConfig, open_hub
from edinbox.metrics import Metrics
from edinbox.sources.rabbitmq import publish
from hub.test_outage import invoices
from hub_ops import init
from servers import PrivateRabbitMQ
from services import require_service
from sources.test_rabbitmq import BROKER, drop

COUNT = 5


@pytest.fixture
def rabbit(private_rabbitmq: PrivateRabbitMQ) -> PrivateRabbitMQ:
    """A private node: its listeners are suspended and its connections closed."""
    return private_rabbitmq


def made(db: Path) -> int:
    """Invoices the hub created so far."""
    with sqlite3.connect(db, timeout=30) as conn:
        return int(conn.execute("SELECT count(*) FROM edinbox_hub_invoices").fetchone()[0])


async def until(done: Callable[[], object], run: asyncio.Task[Any], *, within: float = 60) -> None:
    """Wait until `done()` holds, failing if the hub exits or `within` seconds pass first."""
    deadline = time.monotonic() + within
    while not done():
        assert not run.done(), run  # the hub never exits on its own
        assert time.monotonic() < deadline, f"not done within {within} s"
        await asyncio.sleep(0.1)


def lost_lines(caplog: pytest.LogCaptureFixture, queue: str) -> list[str]:
    """The source's ERROR lines that name `queue`."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("edinbox") and r.levelno == logging.ERROR and f"queue={queue} " in r.getMessage()
    ]


def lost_count(metrics: Metrics, queue: str) -> float | None:
    """The hub's count of times `queue` was lost."""
    labels = {"consumer": "accounting", "queue": queue}
    return metrics.registry.get_sample_value("edinbox_source_queues_lost_total", labels)


async def hub_config(tmp_path: Path, url: str) -> HubConfig:
    """A hub on a fresh SQLite file, consuming `url`."""
    config = HubConfig(db=f"sqlite:///{tmp_path / 'hub.db'}", source=url, batch_size=5, consumer="accounting")
    await init(config)
    return config


async def test_a_queue_deleted_under_the_hub_is_declared_again_and_said_lost(
    tmp_path: Path, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The queue the hub consumes is deleted by another connection: the hub logs one ERROR line naming it, counts it
    lost, and the invoices published afterwards are all created (it does not sit idle on a cancelled consumer)."""
    require_service("rabbitmq")
    caplog.set_level(logging.INFO)
    url = f"{BROKER}?queue={unique_name}&reconnect_interval=0.2"
    config = await hub_config(tmp_path, url)
    db = tmp_path / "hub.db"
    metrics = Metrics()
    try:
        await publish(url, invoices(COUNT))
        async with open_hub(config, metrics=metrics) as hub:
            run = asyncio.create_task(hub.run())
            await until(lambda: made(db) == COUNT, run)
            connection = await aio_pika.connect(BROKER)
            async with connection:
                await (await connection.channel()).queue_delete(unique_name)
            await until(lambda: lost_lines(caplog, unique_name), run, within=20)  # the broker cancelled the consumer
            await publish(url, invoices(COUNT, start=COUNT))
            await until(lambda: made(db) == 2 * COUNT, run)
            hub.stop.set()
            await asyncio.wait_for(run, 60)
        [line] = lost_lines(caplog, unique_name)
        assert "may be lost" in line, line
        assert lost_count(metrics, unique_name) == 1
    finally:
        await drop(unique_name)


async def test_a_queue_lost_while_the_hub_was_away_is_declared_again_and_said_lost(
    rabbit: PrivateRabbitMQ, tmp_path: Path, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The hub's connection is closed and its queue deleted before it can reconnect (as a node that forgot the queue
    in a crash): on reconnecting the hub finds the queue missing, logs one ERROR line naming it, counts it lost,
    declares it again and creates every invoice published afterwards."""
    caplog.set_level(logging.INFO)
    url = f"{rabbit.url}?queue={unique_name}&reconnect_interval=0.2"
    config = await hub_config(tmp_path, url)
    db = tmp_path / "hub.db"
    metrics = Metrics()
    await publish(url, invoices(COUNT))
    async with open_hub(config, metrics=metrics) as hub:
        run = asyncio.create_task(hub.run())
        await until(lambda: made(db) == COUNT, run)
        await asyncio.to_thread(rabbit.lose_queue, unique_name)
        await until(lambda: rabbit.queues().get(unique_name, (0, 0, 0))[2] == 1, run)  # the hub consumes again
        await publish(url, invoices(COUNT, start=COUNT))
        await until(lambda: made(db) == 2 * COUNT, run)
        hub.stop.set()
        await asyncio.wait_for(run, 60)
    [line] = lost_lines(caplog, unique_name)
    assert "may be lost" in line, line
    assert lost_count(metrics, unique_name) == 1


async def test_a_quorum_queue_replaced_under_the_hub_without_a_cancel_is_said_lost(
    tmp_path: Path, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The quorum queue the hub consumes is deleted and at once declared again by a publisher (RabbitMQ 3.10 then
    sends no cancel: the new queue hands its first messages to the old consumer, which never receives them): the idle
    hub finds messages kept ready from it, logs one ERROR line naming the queue, counts it lost, reconnects, and every
    invoice published after the deletion is created."""
    require_service("rabbitmq")
    caplog.set_level(logging.INFO)
    url = f"{BROKER}?queue={unique_name}&queue_type=quorum&prefetch=2&idle_check=0.5&reconnect_interval=0.2"
    config = await hub_config(tmp_path, url)
    db = tmp_path / "hub.db"
    metrics = Metrics()
    try:
        await publish(url, invoices(COUNT))
        async with open_hub(config, metrics=metrics) as hub:
            run = asyncio.create_task(hub.run())
            await until(lambda: made(db) == COUNT, run)
            connection = await aio_pika.connect(BROKER)
            async with connection:
                await (await connection.channel()).queue_delete(unique_name)
            await publish(url, invoices(COUNT, start=COUNT))  # the publisher declares the queue again at once
            await until(lambda: made(db) == 2 * COUNT and lost_lines(caplog, unique_name), run)
            hub.stop.set()
            await asyncio.wait_for(run, 60)
        [line] = lost_lines(caplog, unique_name)
        assert "may be lost" in line, line
        assert lost_count(metrics, unique_name) == 1
    finally:
        await drop(unique_name)
