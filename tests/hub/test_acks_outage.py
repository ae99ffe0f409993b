"""RabbitMQ's batched acks meet an outage: the broker goes away after a batch's commit, before its acks are sent.

A hub runs on a private RabbitMQ node. The hub's fault point, armed at one commit, makes the outage there (the batch
settled in the journal, its acks only noted: they leave once the hub next waits): the node is stopped or killed, or the
broker closes the hub's connection. The acks cannot be sent (logged, not raised); the broker requeues the batch;
the hub notices the lost connection, waits the outage out, reconnects, and takes the redelivered copies for
duplicates. Every invoice is created exactly once, every journal row settled once at attempt 1, and the hub never
exits on its own.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from edinbox.hub import HubConfig, open_hub
from edinbox.hub.config._fault import FaultPoint
from edinbox.sources import publisher
from hub.test_outage import invoices
from hub_ops import init
from servers import PrivateRabbitMQ

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="a private RabbitMQ node is started on Linux")

COUNT = 60


class OutageAtCommit(FaultPoint):
    """The fault point armed at the `after`-th commit: instead of killing the hub, it runs `outage` there (the loop
    blocked meanwhile, so the batch's acks are noted only after the broker went away)."""

    def __init__(self, after: int, outage: Callable[[], None]) -> None:
        super().__init__("after_commit", after)
        self.outage = outage
        self.done = threading.Event()

    def committed(self, last_words: Callable[[], None] | None = None) -> None:
        """Count the commit; at the armed one, make the outage."""
        self.commits += 1
        if self.commits == self.after:
            self.outage()
            self.done.set()


@pytest.fixture
def rabbit(private_rabbitmq: PrivateRabbitMQ) -> PrivateRabbitMQ:
    """A private node (each test has its own queue), started again if a test left it down."""
    return private_rabbitmq


def assert_closed(count: int) -> None:
    """The broker closed the hub's connection."""
    assert count >= 1


def journal(db: Path) -> tuple[tuple[int, int], list[tuple[str, int, int]]]:
    """(invoices, distinct numbers) and the journal's (status, attempts, count) rows."""
    with sqlite3.connect(db, timeout=30) as conn:
        made = conn.execute("SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices").fetchone()
        rows = conn.execute("SELECT status, attempts, count(*) FROM inbox GROUP BY status, attempts").fetchall()
    return (int(made[0]), int(made[1])), [tuple(r) for r in rows]


async def run_through(
    config: HubConfig, fault: OutageAtCommit, *, restart: Callable[[], None] | None
) -> dict[str, int]:
    """Run the hub until every invoice is settled (starting the node again after the outage, when given)."""
    db = Path(config.db.removeprefix("sqlite:///"))
    async with open_hub(config, fault=fault) as hub:
        run = asyncio.create_task(hub.run())
        await asyncio.to_thread(fault.done.wait, 120)
        assert fault.done.is_set()
        if restart is not None:
            await asyncio.to_thread(restart)
        for _ in range(1200):  # 60 s at most
            if run.done() or journal(db)[0][0] >= COUNT:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1)  # let the redelivered copies in flight be settled too
        assert not run.done(), run  # the hub never exited on its own
        hub.stop.set()
        return dict(await asyncio.wait_for(run, 60))


@pytest.mark.parametrize("outage", ["node-stopped", "node-killed", "connection-closed"])
def test_acks_noted_when_the_broker_goes_away_are_not_lost_nor_doubled(
    rabbit: PrivateRabbitMQ, tmp_path: Path, unique_name: str, outage: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker goes away between a batch's commit and its acks (the node stopped or killed, or the hub's connection
    closed by the broker): the failed acks are logged, the batch is redelivered and recognised as duplicates, the hub
    reconnects without exiting, and each invoice is created once with each journal row settled once at attempt 1."""
    caplog.set_level(logging.WARNING)
    db = tmp_path / "hub.db"
    # a killed node may bring a quorum queue back without a leader for minutes (see PrivateRabbitMQ.kill)
    kind = "classic" if outage == "node-killed" else "quorum"
    url = f"{rabbit.url}?queue={unique_name}&prefetch=50&queue_type={kind}"
    config = HubConfig(db=f"sqlite:///{db}", source=url, batch_size=5, consumer="accounting")
    asyncio.run(init(config))
    send = publisher(url)
    asyncio.run(send(url, invoices(COUNT)))
    if outage == "node-stopped":
        fault = OutageAtCommit(3, rabbit.stop)
        totals = asyncio.run(run_through(config, fault, restart=rabbit.start))
    elif outage == "node-killed":
        # a queue declared just before a SIGKILL may be forgotten with its messages (see PrivateRabbitMQ.kill): the
        # node is restarted cleanly first, so what is under test is the hub, not the broker's own durability
        rabbit.stop()
        rabbit.start()
        assert rabbit.queues()[unique_name] == (COUNT, 0, 0)
        fault = OutageAtCommit(3, rabbit.kill)
        totals = asyncio.run(run_through(config, fault, restart=rabbit.start))
    else:
        fault = OutageAtCommit(3, lambda: assert_closed(rabbit.close_connections()))
        totals = asyncio.run(run_through(config, fault, restart=None))
    # the broker's (ready, unacked, consumers) of the queue, when a message is missing: lost, held, or not offered
    assert journal(db) == ((COUNT, COUNT), [("processed", 1, COUNT)]), rabbit.queues().get(unique_name)
    assert totals.get("processed") == COUNT
    if outage != "node-killed":  # at least the batch whose acks were lost came back
        assert totals.get("duplicate", 0) >= 5, totals
    # a SIGKILLed node (RabbitMQ 3.10, classic queue) has come back without some deliveries it had handed out unacked
    # (0 duplicates, at load, once in three runs of the suite), as it may forget a queue (`PrivateRabbitMQ.kill`):
    # whether the batch returns is then the broker's; the hub's part is checked (none lost, none doubled, acks logged)
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("edinbox")]
    # the acks that could not be sent were logged (noted before the loss, or found on a closed channel), not raised
    assert [m for m in warnings if m.startswith("acks-not-sent ") or "its channel closed" in m], warnings
    if outage != "connection-closed":  # a closed connection may be opened again before the next receive sees it
        assert [m for m in warnings if "dependency-down" in m and "dependency=source" in m], warnings
        assert [m for m in warnings if "dependency-back" in m], warnings
