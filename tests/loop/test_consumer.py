"""The consumer loop as a library user gets it (`edinbox.AsyncConsumer`, `edinbox.consume`), on a spool folder and a
SQLite journal with no hub table: isolation, keys from the delivery only, duplicates, the relay beside it."""

from __future__ import annotations

import ast
import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import aio_pika

import edinbox
from edinbox import AsyncConsumer, Inbox, Message, Tx
from edinbox.sources import Delivery
from edinbox.sources.spool import publish
from services import require_service
from sources.test_rabbitmq import BROKER, drop


def journal(tmp_path: Path) -> str:
    """A SQLite journal made by the library alone, and a business table `effects` beside it."""
    db = f"sqlite:///{tmp_path}/app.db"
    with Inbox(db, consumer="app") as inbox:
        inbox.create_schema()
    with sqlite3.connect(tmp_path / "app.db") as conn:
        conn.execute("CREATE TABLE effects (message_id TEXT NOT NULL)")
    return db


def effects(tmp_path: Path) -> list[str]:
    """The business table's rows, sorted."""
    with sqlite3.connect(tmp_path / "app.db") as conn:
        return sorted(row[0] for row in conn.execute("SELECT message_id FROM effects"))


async def test_a_failing_message_is_charged_alone(tmp_path: Path) -> None:
    """An async handler that fails on one message of a batch: its batch-mates' effects commit, it alone is charged
    (with one attempt allowed, it is parked dead at once) and nacked; its redelivery finds it dead and is acked."""
    db = journal(tmp_path)
    spool = tmp_path / "spool"
    await publish(f"dir://{spool}", [(f"m{i}", b"good") for i in range(4)] + [("bad", b"boom")])

    async def handler(tx: Tx, message: Message) -> None:
        if message.payload == b"boom":
            raise ValueError("the handler refuses this one")
        await tx.connection.execute("INSERT INTO effects (message_id) VALUES (?)", (message.message_id,))

    consumer = AsyncConsumer(f"dir://{spool}", handler, db=db, consumer="app", max_attempts=1)
    totals = await consumer.run(once=True, idle_timeout=2.0)  # the nacked delivery comes back after NACK_DELAY
    assert totals == {"processed": 4, "not-settled": 1, "dead": 1}
    assert effects(tmp_path) == ["m0", "m1", "m2", "m3"]
    with Inbox(db, consumer="app") as inbox:
        record = inbox.get("dir:spool", "bad")
    assert record is not None
    assert record.status.value == "dead"


def test_a_sync_handler_runs_once_per_key_with_a_sync_connection(tmp_path: Path) -> None:
    """`edinbox.consume` with a plain handler: its `tx.connection` is the sync driver's (sqlite3), and the same keys
    delivered again run nothing (duplicates), while a new key runs once."""
    db = journal(tmp_path)
    source = f"dir://{tmp_path}/spool"
    seen: list[Any] = []

    def handler(tx: Tx, message: Message) -> None:
        seen.append(type(tx.connection))
        tx.connection.execute("INSERT INTO effects (message_id) VALUES (?)", (message.message_id,))

    asyncio.run(publish(source, [("a", b"1"), ("b", b"2")]))
    first = edinbox.consume(source, handler, db=db, consumer="app", once=True, idle_timeout=0.3)
    asyncio.run(publish(source, [("a", b"1"), ("b", b"2"), ("c", b"3")]))
    second = edinbox.consume(source, handler, db=db, consumer="app", once=True, idle_timeout=0.3)
    assert first == {"processed": 2}
    assert second == {"duplicate": 2, "processed": 1}
    assert effects(tmp_path) == ["a", "b", "c"]
    assert set(seen) == {sqlite3.Connection}


async def test_a_delivery_without_a_key_is_rejected_with_its_reason(tmp_path: Path) -> None:
    """A delivery the key function finds no producer id in is never keyed by its coordinates: it is rejected at once
    (the spool's rejected folder) with a reason saying so, and nothing runs for it."""
    db = journal(tmp_path)
    spool = tmp_path / "spool"
    await publish(f"dir://{spool}", [("keyed", b"ok"), ("anonymous", b"no id")])

    def key(delivery: Delivery) -> str | None:
        return None if delivery.payload == b"no id" else delivery.message_id

    async def handler(tx: Tx, message: Message) -> None:
        await tx.connection.execute("INSERT INTO effects (message_id) VALUES (?)", (message.message_id,))

    consumer = AsyncConsumer(f"dir://{spool}", handler, db=db, consumer="app", key=key)
    totals = await consumer.run(once=True, idle_timeout=0.3)
    assert totals == {"processed": 1, "rejected": 1}
    assert effects(tmp_path) == ["keyed"]
    rejected = [p for p in (spool / "rejected").rglob("*") if p.is_file()]
    assert any("anonymous" in p.name for p in rejected)
    reasons = " ".join(p.read_text(errors="replace") for p in rejected)
    assert "no message id" in reasons


async def test_the_relay_beside_the_loop_sends_what_the_handler_published(tmp_path: Path) -> None:
    """With `relay=True`, what a handler publishes in its transaction reaches its destination once the batch
    committed, with the handler's key as the producer id."""
    db = journal(tmp_path)
    inbound, outbound = tmp_path / "in", tmp_path / "out"
    await publish(f"dir://{inbound}", [("order-1", b"order")])

    async def handler(tx: Tx, message: Message) -> None:
        await tx.publish(f"dir://{outbound}", b"confirmed", key=f"confirm-{message.message_id}")

    consumer = AsyncConsumer(f"dir://{inbound}", handler, db=db, consumer="app", relay=True)
    totals = await consumer.run(once=True, idle_timeout=0.3)
    assert totals["processed"] == 1
    assert totals["relayed"] == 1
    sent = [p for p in (outbound / "inbound").rglob("*") if p.is_file()]
    assert len(sent) == 1
    assert "confirm-order-1" in sent[0].name


def test_the_loop_knows_no_hub_and_no_edi() -> None:
    """Layers: the consumer loop is the library's; no module of `edinbox.loop` imports the hub or the EDI parser."""
    root = Path(edinbox.__file__).parent / "loop"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                assert not name.startswith(("edinbox.hub", "edinbox.edi", "edinbox.cli")), (path.name, name)


async def test_metrics_count_what_the_loop_settled(tmp_path: Path) -> None:
    """With `metrics`, the loop counts each settled outcome, observes its batches and sets the journal gauges."""
    from edinbox.metrics import Metrics

    db = journal(tmp_path)
    spool = tmp_path / "spool"
    await publish(f"dir://{spool}", [("a", b"1"), ("b", b"2"), ("c", b"3")])

    async def handler(tx: Tx, message: Message) -> None:
        await tx.connection.execute("INSERT INTO effects (message_id) VALUES (?)", (message.message_id,))

    metrics = Metrics()
    consumer = AsyncConsumer(f"dir://{spool}", handler, db=db, consumer="app", metrics=metrics)
    await consumer.run(once=True, idle_timeout=0.3)
    value = metrics.registry.get_sample_value
    labels = {"consumer": "app", "outcome": "processed", "partner": "", "message_type": ""}
    assert value("edinbox_messages_settled_total", labels) == 3
    assert value("edinbox_batch_size_count", {"consumer": "app"}) == 1
    assert value("edinbox_journal_rows", {"consumer": "app", "status": "processed"}) == 3


async def test_a_slow_batch_keeps_its_claims_with_progress_beats(tmp_path: Path) -> None:
    """A handler slower than the spool's claim timeout: the loop beats `in_progress`, so a second consumer on the
    same folder never takes the claim over, and the message runs once."""
    db = journal(tmp_path)
    source = f"dir://{tmp_path}/spool?claim_timeout=0.6"
    await publish(f"dir://{tmp_path}/spool", [("slow", b"slow")])
    runs: list[str] = []

    async def slow(tx: Tx, message: Message) -> None:
        runs.append(message.message_id)
        await asyncio.sleep(2.0)

    first = AsyncConsumer(source, slow, db=db, consumer="app", poll_timeout=0.1)
    second = AsyncConsumer(source, slow, db=db, consumer="app", poll_timeout=0.1)
    one = asyncio.ensure_future(first.run(once=True, idle_timeout=0.5))
    await asyncio.sleep(0.3)  # the first holds the claim
    other = await second.run(once=True, idle_timeout=2.5)
    assert await one == {"processed": 1}
    assert other == {}
    assert runs == ["slow"]


async def test_a_failed_message_waits_for_its_retry_time_in_the_consumer_loop(tmp_path: Path) -> None:
    """`AsyncConsumer(retry=...)` on a library journal: a message whose handler fails is charged one attempt and
    runs again no sooner than the policy's wait (its delivery handed back to wait, nothing run meanwhile), then makes
    its one effect; its batch-mate is processed at once."""
    import time
    from datetime import timedelta

    from edinbox import Retry

    db = journal(tmp_path)
    spool = tmp_path / "spool"
    await publish(f"dir://{spool}", [("m", b"flaky"), ("ok", b"good")])
    runs: list[float] = []

    async def handler(tx: Tx, message: Message) -> None:
        if message.message_id == "m":
            runs.append(time.monotonic())
            if len(runs) < 3:  # the batch's run and the isolated run that is charged: one failed attempt
                raise ValueError("downstream is down")
        await tx.connection.execute("INSERT INTO effects (message_id) VALUES (?)", (message.message_id,))

    retry = Retry(immediate=0, first=timedelta(seconds=1), factor=1, jitter=0)
    consumer = AsyncConsumer(f"dir://{spool}", handler, db=db, consumer="app", max_attempts=5, retry=retry)
    totals = await consumer.run(once=True, idle_timeout=3.0)
    assert effects(tmp_path) == ["m", "ok"]
    assert len(runs) == 3
    assert runs[2] - runs[1] >= 0.95, runs  # not before its retry time
    assert totals["processed"] == 2
    with Inbox(db, consumer="app") as inbox:
        record = inbox.get("dir:spool", "m")
    assert record is not None
    assert (record.status.value, record.attempts, record.retry_at) == ("processed", 2, None)


async def test_a_message_parked_dead_is_relayed_once_to_the_error_queue(tmp_path: Path, unique_name: str) -> None:
    """`dead_letters=` on the consumer loop: the message its handler parks dead (max_attempts=1) is relayed beside
    the loop, once, to a RabbitMQ error queue, with the exception type and the attempts; its batch-mate is not."""
    require_service("rabbitmq")
    db, spool = journal(tmp_path), f"dir://{tmp_path / 'spool'}"
    errors = f"{BROKER}?queue={unique_name}"
    await publish(spool, [("fine", b"good"), ("bad", b"boom")])

    async def handler(tx: Tx, message: Message) -> None:
        if message.payload == b"boom":
            raise ValueError("the handler refuses this one")

    consumer = AsyncConsumer(spool, handler, db=db, consumer="app", max_attempts=1, dead_letters=errors, relay=True)
    try:
        totals = await consumer.run(once=True, idle_timeout=2.0)
        assert (totals["dead"], totals["relayed"]) == (1, 1)
        connection = await aio_pika.connect(BROKER)
        async with connection:
            queue = await (await connection.channel()).declare_queue(unique_name, passive=True)
            letter = await queue.get(no_ack=True)
            assert await queue.get(no_ack=True, fail=False) is None
    finally:
        await drop(unique_name)
    assert letter.message_id == "bad"
    headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in (letter.headers or {}).items()}
    assert (headers["Edinbox-Error-Type"], headers["Edinbox-Attempts"]) == ("ValueError", "1")
