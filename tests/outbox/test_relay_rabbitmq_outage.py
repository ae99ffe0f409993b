"""The relay with RabbitMQ stopped under it and started again (a private node): the relay never exits, the outage is
two log lines, every committed row arrives at least once under its key, and a receiver's inbox processes each once.

`edinbox relay` and the relay inside `edinbox run` are the same `Relay`: the first test drives it in this process,
stopping the node between two of its passes (so the stop falls mid-send on every run); the second runs the hub as a
process whose acknowledgments go to the node, and stops the node while it relays them; the third runs `edinbox
relay` as a process. The last three raise a memory alarm on the node, which blocks the relay's publishing
connection: its sends fail within the destination's `confirm_wait`, one `relay-down` line says the broker blocks the
connection, and the rows go once the alarm clears.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from edinbox import AsyncInbox, Inbox, SourceError
from edinbox.hub.config._model import HubConfig
from edinbox.sources.spool import publish
from hub.test_outage import HubProcess, invoices, spool_empty, wait_for
from hub_ops import init
from servers import PrivateRabbitMQ

from .test_relay_brokers import drain, fill, received_once, relay_for, until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="private RabbitMQ nodes are started on Linux")


@pytest.fixture
def rabbit(private_rabbitmq: PrivateRabbitMQ) -> PrivateRabbitMQ:
    """A private RabbitMQ node, running and unblocked (shared with the process's other fault tests)."""
    return private_rabbitmq


async def test_rabbitmq_stopped_while_the_relay_sends(
    rabbit: PrivateRabbitMQ, tmp_path: Path, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The node stopped after the relay sent 60 of 300 rows and started again: the relay keeps running, logs one
    relay-down and one relay-back line, marks all 300 sent, and the receiver gets every key (at least once, copies
    under the same key) and processes each once."""
    url = f"{rabbit.url}?queue={unique_name}&open_timeout=1"
    keys = [f"ack/{n:04d}" for n in range(300)]
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    fill(db, url, keys)
    caplog.set_level(logging.INFO, logger="edinbox.test")
    async with AsyncInbox(db, consumer="hub") as inbox:
        relay = relay_for(inbox, limit=10, destinations=[rabbit.url])
        running = asyncio.ensure_future(relay.run())
        await until(lambda: relay.totals["sent"] >= 60, within=120, what="60 rows sent before the stop")
        rabbit.stop()  # blocks this loop: the relay is between two passes, 240 rows still to send
        stopped_at = relay.totals["sent"]
        await until(
            lambda: any("relay-down" in r.getMessage() for r in caplog.records), within=60, what="a relay-down line"
        )
        assert not running.done(), "the relay stopped on a broker outage"
        await asyncio.to_thread(rabbit.start)
        await until(lambda: relay.totals["sent"] >= 300, within=120, what="every row sent after the restart")
        assert not running.done()
        relay.stop.set()
        await running
        stats = await inbox.outbox_stats()
    assert 60 <= stopped_at < 300
    assert (stats.backlog, stats.parked, stats.sent) == (0, 0, 300)
    assert relay.publishers.opened >= 2  # the failed publisher was closed and a new one opened after the restart
    lines = [r.getMessage() for r in caplog.records]
    assert len([line for line in lines if line.startswith("relay-down ")]) == 1, lines
    assert len([line for line in lines if line.startswith("relay-back ")]) == 1, lines
    assert "dependency=source" in next(line for line in lines if line.startswith("relay-down "))
    got = await drain(url, 300, within=60)
    assert sorted({d.message_id or "" for d in got}) == keys
    assert received_once(got, tmp_path) == 300


def outbox(db: Path) -> tuple[int, int, list[str]]:
    """(rows sent, rows neither sent nor parked, every key) of the hub's outbox."""
    with sqlite3.connect(db, timeout=30) as connection:
        rows = connection.execute("SELECT key, sent_at, parked_at FROM inbox_outbox").fetchall()
    sent = sum(1 for _, sent_at, _ in rows if sent_at is not None)
    waiting = sum(1 for _, sent_at, parked_at in rows if sent_at is None and parked_at is None)
    return sent, waiting, sorted(key for key, _, _ in rows)


def test_rabbitmq_stopped_while_the_hubs_relay_sends_acknowledgments(
    rabbit: PrivateRabbitMQ, tmp_path: Path, unique_name: str
) -> None:
    """`edinbox run` acknowledging 200 invoices to a RabbitMQ queue, the node stopped while the relay sends them and
    started again: the hub never exits, logs one relay-down and one relay-back line (and no other outage), creates
    each invoice once, and every acknowledgment reaches the queue under its key; a receiver's inbox processes each
    once."""
    url = f"{rabbit.url}?queue={unique_name}&open_timeout=1"
    config = tmp_path / "edinbox.toml"
    config.write_text(f'[partners."*"]\noutbound = "{url}"\n')
    spool, db_file = tmp_path / "spool", tmp_path / "hub.db"
    spool.mkdir()
    db, source = f"sqlite:///{db_file}", f"dir://{spool}"
    asyncio.run(init(HubConfig(db=db, source=source)))
    asyncio.run(publish(source, invoices(150)))
    hub = HubProcess("--config", str(config), "--db", db, "--source", source, "--batch-size", "5")
    try:
        wait_for(lambda: outbox(db_file)[0] >= 20, timeout=120, what="the first acknowledgments to be sent")
        rabbit.stop()
        asyncio.run(publish(source, invoices(50, start=150)))  # their acknowledgments meet the outage for sure
        wait_for(lambda: bool(hub.events("relay-down")), timeout=60, what="the relay-down line")
        assert hub.proc.poll() is None
        rabbit.start()
        wait_for(lambda: spool_empty(spool), timeout=120, what="the hub to settle every invoice")
        wait_for(lambda: outbox(db_file)[:2] == (200, 0), timeout=120, what="the relay to send every acknowledgment")
        assert hub.proc.poll() is None
    finally:
        code = hub.stop()
    assert code == 0
    assert len(hub.events("relay-down")) == 1, hub.lines
    assert len(hub.events("relay-back")) == 1, hub.lines
    assert not hub.events("dependency-down"), hub.lines
    assert not [line for line in hub.lines if "Traceback" in line], "\n".join(hub.lines)
    with sqlite3.connect(db_file) as connection:
        assert connection.execute("SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices").fetchone() == (
            200,
            200,
        )
    keys = outbox(db_file)[2]
    got = asyncio.run(drain(url, len(keys), within=60))
    assert sorted({d.message_id or "" for d in got}) == keys
    assert received_once(got, tmp_path) == 200


def test_rabbitmq_stopped_under_edinbox_relay(rabbit: PrivateRabbitMQ, tmp_path: Path, unique_name: str) -> None:
    """`edinbox relay` sending 300 rows, the node stopped while it sends and started again: the process never
    exits, logs one dependency-down and one dependency-back line (no traceback, the driver's lines bounded), marks
    every row sent, and SIGTERM stops it with status 0; every key arrives, a receiver's inbox processes each once."""
    url = f"{rabbit.url}?queue={unique_name}&open_timeout=1"
    db_file = tmp_path / "hub.db"
    db = f"sqlite:///{db_file}"
    asyncio.run(init(HubConfig(db=db)))
    keys = [f"ack/{n:04d}" for n in range(400)]
    fill(db, url, keys[:300])
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")} | {"EDINBOX_POLL_TIMEOUT": "0.5"}
    command = [sys.executable, "-m", "edinbox", "relay", "--db", db, "--limit", "10", "--destinations", rabbit.url]
    relay = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in relay.stderr or []))
    reader.start()
    try:
        wait_for(lambda: outbox(db_file)[0] >= 20, timeout=120, what="the first rows to be sent")
        rabbit.stop()
        fill(db, url, keys[300:])  # rows committed during the outage: the relay meets it for sure
        wait_for(lambda: any(" event=dependency-down " in line for line in lines), timeout=60, what="dependency-down")
        assert relay.poll() is None
        rabbit.start()
        wait_for(lambda: outbox(db_file)[:2] == (400, 0), timeout=120, what="every row to be sent")
        assert relay.poll() is None
    finally:
        relay.send_signal(signal.SIGTERM)
        code = relay.wait(timeout=60)
        reader.join(timeout=10)
    assert code == 0, "\n".join(lines)
    assert len([line for line in lines if " event=dependency-down " in line]) == 1, "\n".join(lines)
    assert len([line for line in lines if " event=dependency-back " in line]) == 1, "\n".join(lines)
    assert not [line for line in lines if "Traceback" in line], "\n".join(lines)
    assert len([line for line in lines if " logger=edinbox." not in line]) < 20, "\n".join(lines)
    got = asyncio.run(drain(url, 400, within=60))
    assert sorted({d.message_id or "" for d in got}) == keys
    assert received_once(got, tmp_path) == 400


async def test_a_send_the_broker_blocks_fails_within_confirm_wait_and_goes_once_the_alarm_clears(
    rabbit: PrivateRabbitMQ, tmp_path: Path, unique_name: str
) -> None:
    """Two outbox rows for a RabbitMQ destination with `confirm_wait=1` while a memory alarm blocks publishers: a
    relay pass fails with SourceError (transient) within a few seconds, not 30, saying what timed out and that the
    broker blocks the connection, without the password; the rows stay unsent and are not parked. Once the alarm
    clears, the relay sends them and marks each sent once; copies the broker took unconfirmed meanwhile carry the
    same key, and a receiver's inbox processes each key once."""
    url = f"{rabbit.url}?queue={unique_name}&confirm_wait=1"
    keys = ["ack/1", "ack/2"]
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    fill(db, url, keys)
    rabbit.block_publishers()
    async with AsyncInbox(db, consumer="hub") as inbox:
        relay = relay_for(inbox, destinations=[rabbit.url])
        started = time.monotonic()
        with pytest.raises(SourceError) as caught:
            await asyncio.wait_for(relay.step(), timeout=15)
        assert time.monotonic() - started < 6  # 1 s without a confirm, then the publisher's close (2 s at most)
        text = str(caught.value)
        assert "2 of 2 messages not confirmed, no confirm from the broker for 1 s" in text, text
        assert "the broker blocks this connection (connection.blocked" in text, text
        assert "guest:guest" not in text
        stats = await inbox.outbox_stats()
        assert (stats.backlog, stats.parked, stats.sent) == (2, 0, 0)
        rabbit.unblock_publishers()
        totals = await asyncio.wait_for(relay.run(once=True), timeout=60)
        stats = await inbox.outbox_stats()
    assert (totals["sent"], totals["parked"]) == (2, 0)
    assert (stats.backlog, stats.parked, stats.sent) == (0, 0, 2)
    got = await drain(url, 2, within=30)
    assert sorted({d.message_id or "" for d in got}) == keys
    assert received_once(got, tmp_path) == 2


async def test_a_blocked_relay_says_so_once_and_once_when_it_is_unblocked(
    rabbit: PrivateRabbitMQ, tmp_path: Path, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The relay running while a memory alarm blocks its publishing connection for several of its attempts: one
    `relay-down` WARNING line naming the block (`connection.blocked`), however many sends fail, and one `relay-back`
    line once the alarm clears and the row is sent."""
    url = f"{rabbit.url}?queue={unique_name}&confirm_wait=1"
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    fill(db, url, ["ack/1"])
    caplog.set_level(logging.INFO, logger="edinbox.test")
    rabbit.block_publishers()
    async with AsyncInbox(db, consumer="hub") as inbox:
        relay = relay_for(inbox, destinations=[rabbit.url])
        running = asyncio.ensure_future(relay.run())
        await until(lambda: relay.publishers.opened >= 3, within=60, what="three publishers opened under the alarm")
        assert relay.totals["sent"] == 0
        rabbit.unblock_publishers()
        await until(lambda: relay.totals["sent"] == 1, within=60, what="the row sent once the alarm cleared")
        relay.stop.set()
        await running
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "edinbox.test"]
    down = [(level, line) for level, line in lines if line.startswith("relay-down ")]
    back = [line for _, line in lines if line.startswith("relay-back ")]
    assert len(down) == 1, lines
    assert down[0][0] == logging.WARNING
    assert "the broker blocks this connection (connection.blocked" in down[0][1], down
    assert len(back) == 1, lines


def test_the_hub_says_once_that_the_broker_blocks_its_acknowledgments(
    rabbit: PrivateRabbitMQ, tmp_path: Path, unique_name: str
) -> None:
    """`edinbox run` acknowledging invoices to a RabbitMQ queue (`confirm_wait=1`) while a memory alarm blocks its
    relay's connections for several sends: the hub keeps running and its log says so once, a `relay-down` WARNING
    naming `connection.blocked`, beside at most one line of the driver's own (its line per blocked connection is
    kept to one a minute), and one `relay-back` once the alarm clears; every acknowledgment then arrives under its
    key, a receiver's inbox processes each once."""
    url = f"{rabbit.url}?queue={unique_name}&confirm_wait=1"
    config = tmp_path / "edinbox.toml"
    config.write_text(f'[partners."*"]\noutbound = "{url}"\n')
    spool, db_file = tmp_path / "spool", tmp_path / "hub.db"
    spool.mkdir()
    db, source = f"sqlite:///{db_file}", f"dir://{spool}"
    asyncio.run(init(HubConfig(db=db, source=source)))
    asyncio.run(publish(source, invoices(10)))
    hub = HubProcess("--config", str(config), "--db", db, "--source", source, "--batch-size", "5")
    try:
        wait_for(lambda: outbox(db_file)[0] >= 10, timeout=120, what="the first acknowledgments to be sent")
        rabbit.block_publishers()
        opened = rabbit.accepted()
        asyncio.run(publish(source, invoices(10, start=10)))
        wait_for(lambda: bool(hub.events("relay-down")), timeout=60, what="the relay-down line")
        # several sends meet the alarm, each on a connection the broker blocks: the first on the connection open
        # before it, then one per new connection; a second one opened means the first new one failed too
        wait_for(lambda: rabbit.accepted() >= opened + 2, timeout=60, what="sends on two blocked connections")
        assert hub.proc.poll() is None
        assert outbox(db_file)[0] == 10
        rabbit.unblock_publishers()
        wait_for(lambda: outbox(db_file)[:2] == (20, 0), timeout=120, what="the relay to send every acknowledgment")
    finally:
        code = hub.stop()
    assert code == 0
    [down] = hub.events("relay-down")
    assert " level=warning " in down, down
    assert "the broker blocks this connection (connection.blocked" in down, down
    assert len(hub.events("relay-back")) == 1, hub.lines
    assert len([line for line in hub.lines if "was blocked by" in line]) <= 1, "\n".join(hub.lines)
    assert not hub.events("dependency-down"), hub.lines
    assert not [line for line in hub.lines if "Traceback" in line or "guest:guest" in line], "\n".join(hub.lines)
    keys = outbox(db_file)[2]
    got = asyncio.run(drain(url, len(keys), within=60))
    assert sorted({d.message_id or "" for d in got}) == keys
    assert received_once(got, tmp_path) == 20


async def test_a_send_the_broker_blocks_mid_write_fails_and_its_publisher_closes_at_once(
    rabbit: PrivateRabbitMQ, tmp_path: Path, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """64 rows of 512 KiB (more than the socket's buffers hold) for a RabbitMQ destination with `confirm_wait=1`
    while a memory alarm blocks publishers: the broker stops reading mid-send, so bytes stay unsent in the socket's
    buffer; the relay pass still fails with SourceError within a few seconds (the failed publisher's close aborts
    the socket instead of waiting for a broker that reads nothing) and nothing logs a traceback, the rows stay unsent
    and are not parked, and once the alarm clears a new publisher sends every row, each key processed once by a
    receiver's inbox."""
    url = f"{rabbit.url}?queue={unique_name}&confirm_wait=1"
    keys = [f"ack/{n:02d}" for n in range(64)]
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    with Inbox(db, consumer="hub") as writer:
        writer.create_schema()
        for key in keys:
            writer.transaction(lambda tx, k=key: tx.publish(url, k.encode().ljust(512 * 1024, b"."), key=k))
    rabbit.block_publishers()
    async with AsyncInbox(db, consumer="hub") as inbox:
        relay = relay_for(inbox, destinations=[rabbit.url])
        step = asyncio.ensure_future(relay.step())
        started = time.monotonic()
        try:
            done, _ = await asyncio.wait({step}, timeout=10)
            assert done, "the pass (its send, then the failed publisher's close) still waits after 10 s"
            assert time.monotonic() - started < 6  # 1 s without a confirm, then a close that waits for nothing
            with pytest.raises(SourceError, match="not confirmed"):
                step.result()
            stats = await inbox.outbox_stats()
            assert (stats.backlog, stats.parked, stats.sent) == (64, 0, 0)
            assert not [r.getMessage() for r in caplog.records if r.exc_info], "the abort was logged as a failure"
        finally:
            rabbit.unblock_publishers()
            await asyncio.wait({step}, timeout=60)
            step.exception()  # retrieved: the assertions above say what went wrong
        totals = await asyncio.wait_for(relay.run(once=True), timeout=120)
        stats = await inbox.outbox_stats()
    assert (totals["sent"], totals["parked"]) == (64, 0)
    assert (stats.backlog, stats.parked, stats.sent) == (0, 0, 64)
    assert relay.publishers.opened == 2
    got = await drain(url, 64, within=60)
    assert sorted({d.message_id or "" for d in got}) == keys
    assert received_once(got, tmp_path) == 64
