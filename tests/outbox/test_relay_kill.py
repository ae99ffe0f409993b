"""The relay under SIGKILL, on the spool and on RabbitMQ: every committed row arrives at least once with the same
producer id, none is lost, a receiver's inbox sees each once, and nothing of a rolled-back transaction is sent."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edinbox import AsyncInbox, Inbox, Message, Outcome, Tx
from received import drain
from services import require_service

ROWS = 30


def edinbox(db: str, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the command from this worktree's code in a subprocess."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("EDINBOX_FAULT", None)
    if fault:
        env["EDINBOX_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "edinbox.cli", *args, "--db", db],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def fill(db: str, destination: str, rows: int = ROWS) -> list[str]:
    """Create the schema, commit `rows` published rows, ten per transaction, and roll one back; return the keys."""
    assert edinbox(db, "init").returncode == 0
    keys = [f"ack/{n:04d}" for n in range(rows)]
    with Inbox(db, consumer="accounting") as inbox:
        for start in range(0, rows, 10):
            inbox.transaction(
                lambda tx, s=start: [tx.publish(destination, k.encode(), key=k) for k in keys[s : s + 10]]
            )

        def rolled_back(tx: Tx) -> None:
            tx.publish(destination, b"never", key="rolled-back")
            raise RuntimeError("the business write failed")

        with pytest.raises(RuntimeError):
            inbox.transaction(rolled_back)
    return keys


def relay_with_kills(db: str, rows: int = ROWS, limit: int = 10, destinations: str = "") -> None:
    """Kill the relay after its first send (before the mark) twice, then let it drain the outbox (the passwords of
    the rows' destinations from `destinations`)."""
    relay = ["relay", "--once", "--limit", str(limit), "--destinations", destinations]
    for _ in range(2):
        killed = edinbox(db, *relay, fault="after_send:1")
        assert killed.returncode == -signal.SIGKILL, killed.stderr
    done = edinbox(db, *relay)
    assert done.returncode == 0, done.stderr
    with Inbox(db, consumer="accounting") as inbox:
        stats = inbox.outbox_stats()
    assert (stats.backlog, stats.parked, stats.sent) == (0, 0, rows)


def received_once(deliveries: list[tuple[str, bytes]], tmp_path: Path) -> int:
    """Run the deliveries through a receiver's inbox keyed by producer id; return how many it processed."""
    processed = 0
    with Inbox(f"sqlite:///{tmp_path / 'receiver.db'}", consumer="partner") as receiver:
        receiver.create_schema()
        for message_id, payload in deliveries:
            outcome = receiver.process(Message(message_id, "relay", payload), lambda tx, m: None)
            processed += outcome is Outcome.PROCESSED
    return processed


def test_spool_relay_killed_between_send_and_mark(tmp_path: Path) -> None:
    """On the spool, a relay killed after sending re-sends the same keys: every row arrives (the first send's
    rows twice or more, under the same producer id), the receiver's inbox processes each once."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    url = f"dir://{tmp_path / 'partner'}"
    keys = fill(db, url)
    relay_with_kills(db)
    deliveries = asyncio.run(drain(url, consumer="test"))
    ids = [message_id for message_id, _ in deliveries]
    assert sorted(set(ids)) == keys
    assert len(ids) >= ROWS + 10
    assert all(payload == message_id.encode() for message_id, payload in deliveries)
    assert received_once(deliveries, tmp_path) == ROWS


def test_a_large_spool_pass_killed_between_send_and_mark_is_sent_again_whole(tmp_path: Path) -> None:
    """A pass of 150 rows to one folder (its files flushed by several threads at once) killed after its send and
    before its mark: the next pass sends all 150 again under the same producer ids, every file in inbound/ is whole,
    none is left in tmp/, and the receiver's inbox processes each key once."""
    rows = 150
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    url = f"dir://{tmp_path / 'partner'}"
    keys = fill(db, url, rows)
    relay_with_kills(db, rows, limit=200)
    assert os.listdir(tmp_path / "partner" / "tmp") == []
    deliveries = asyncio.run(drain(url, consumer="test"))
    ids = [message_id for message_id, _ in deliveries]
    assert sorted(ids) == sorted(keys * 3)  # sent by both killed passes and by the last one, never marked before
    assert all(payload == message_id.encode() for message_id, payload in deliveries)
    assert received_once(deliveries, tmp_path) == rows


def test_rabbitmq_relay_killed_between_send_and_mark(tmp_path: Path, unique_name: str) -> None:
    """On RabbitMQ, the rows sent before a kill arrive again with the same message_id; none is lost, the
    receiver's inbox processes each once, and the rolled-back row never arrives."""
    require_service("rabbitmq")
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    url = f"amqp://guest:guest@127.0.0.1/?queue={unique_name}"
    keys = fill(db, url)
    relay_with_kills(db, destinations=url)
    deliveries = asyncio.run(drain(url, consumer="test"))
    ids = [message_id for message_id, _ in deliveries]
    assert sorted(set(ids)) == keys
    assert len(ids) >= ROWS + 10  # the first send's ten rows came twice (or more): at least once, same id
    assert received_once(deliveries, tmp_path) == ROWS


def test_async_inbox_rows_survive_a_kill_before_any_relay(tmp_path: Path) -> None:
    """Rows committed by a process killed before it relayed anything are all sent by the next relay."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    out = tmp_path / "partner"
    assert edinbox(db, "init").returncode == 0
    script = (
        "import asyncio, os, signal, sys\n"
        "from edinbox import AsyncInbox\n"
        "async def main():\n"
        f"    inbox = AsyncInbox({db!r}, consumer='accounting')\n"
        f"    await inbox.transaction(lambda tx: tx.publish('dir://{out}', b'x', key='k1'))\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "asyncio.run(main())\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run([sys.executable, "-c", script], env=env, timeout=60, check=False)
    assert killed.returncode == -signal.SIGKILL
    assert edinbox(db, "relay", "--once").returncode == 0
    assert [message_id for message_id, _ in asyncio.run(drain(f"dir://{out}", consumer="test"))] == ["k1"]


def relay_one_too_big(db: str, url: str) -> tuple[int, tuple[tuple[str, str], ...], tuple[int, int, int]]:
    """Publish rows "a", "big" (2 MiB) and "b" to `url` in one transaction and relay them with the hub's send:
    what the relay sent and parked, once a second relay has found nothing left to do, and the outbox's backlog,
    parked and sent rows."""
    from edinbox.loop import send

    with Inbox(db, consumer="accounting") as inbox:
        inbox.create_schema()
        sizes = {"a": 10, "big": 2 * 1024 * 1024, "b": 10}
        inbox.transaction(lambda tx: [tx.publish(url, b"x" * n, key=k) for k, n in sizes.items()])

        async def relay() -> tuple[int, tuple[tuple[str, str], ...]]:
            async with AsyncInbox(db, consumer="accounting") as mine:
                result = await mine.relay(send)
                again = await mine.relay(send)
                assert (again.sent, again.parked) == (0, ())
                return result.sent, result.parked

        sent, parked = asyncio.run(relay())
        stats = inbox.outbox_stats()
        return sent, parked, (stats.backlog, stats.parked, stats.sent)


def test_a_payload_over_the_brokers_limit_is_parked_alone(tmp_path: Path, unique_name: str) -> None:
    """A row bigger than the NATS server's max_payload is parked with its reason; its batch-mates are sent, and
    the parked row is never tried again."""
    require_service("nats")
    url = f"nats://127.0.0.1:4222?stream={unique_name}&subject={unique_name}.acks"
    sent, parked, counts = relay_one_too_big(f"sqlite:///{tmp_path / 'hub.db'}", url)
    assert sent == 2
    ((key, reason),) = parked
    assert key == "big"
    assert "max_payload" in reason
    assert counts == (0, 1, 2)  # backlog, parked, sent


def test_a_payload_over_kafkas_limit_is_parked_alone(tmp_path: Path, unique_name: str) -> None:
    """A row bigger than the producer's message.max.bytes is parked with its reason; its batch-mates are sent, and
    the parked row is never tried again."""
    from edinbox.sources._kafka_config import MockCluster

    cluster = MockCluster(brokers=1)
    try:
        sent, parked, counts = relay_one_too_big(f"sqlite:///{tmp_path / 'hub.db'}", cluster.url(topic=unique_name))
    finally:
        cluster.close()
    assert sent == 2
    ((key, reason),) = parked
    assert key == "big"
    assert "message.max.bytes" in reason
    assert counts == (0, 1, 2)  # backlog, parked, sent
