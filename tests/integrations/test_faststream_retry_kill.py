"""SIGKILL of a FastStream consumer on RabbitMQ while its deliveries wait (held) for their retry time: a new consumer
finds every failure recorded and runs each message once more, after its time: nothing lost, doubled or uncounted."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import aio_pika

from edinbox import AsyncInbox, Status
from services import require_service

AMQP = "amqp://guest:guest@127.0.0.1:5672/"
COUNT = 20

_APP = """
import asyncio, sqlite3, sys, time
from datetime import timedelta
from faststream import Context
from faststream.middlewares import AckPolicy
from faststream.rabbit import RabbitBroker, RabbitQueue
from edinbox import AsyncInbox, Retry
from edinbox.integrations.faststream import inbox_middleware

URL, QUEUE, DB, MARKS, COUNT = sys.argv[1:6]


async def main():
    retry = Retry(immediate=0, first=timedelta(seconds=2), jitter=0)
    inbox = AsyncInbox(f"sqlite:///{DB}", consumer="accounting", retry=retry, max_attempts=5)
    settled = set()
    done = asyncio.Event()

    def seen(msg, message, outcome):
        print(outcome.value, message.message_id, flush=True)
        settled.add(message.message_id)
        if len(settled) == int(COUNT):
            done.set()

    broker = RabbitBroker(URL, middlewares=[inbox_middleware(inbox, on_outcome=seen)], logger=None)

    @broker.subscriber(RabbitQueue(QUEUE, durable=True), ack_policy=AckPolicy.NACK_ON_ERROR)
    async def create_invoice(body: bytes, tx=Context("inbox_tx")):
        await tx.connection.execute("INSERT INTO invoices (body) VALUES (?)", (body.decode(),))
        with sqlite3.connect(MARKS) as marks:  # committed at once, whatever becomes of the inbox transaction
            first = marks.execute(
                "INSERT OR IGNORE INTO failed (body, at) VALUES (?, ?)", (body.decode(), time.time())
            ).rowcount
        if first:
            print("failed", body.decode(), flush=True)
            raise RuntimeError("accounting is down")  # the first run of each message fails

    async with broker:
        await broker.start()
        await asyncio.wait_for(done.wait(), 60)
        await asyncio.sleep(0.3)  # the acks go out after the middlewares return
    await inbox.aclose()

asyncio.run(main())
"""


async def test_sigkill_while_deliveries_wait_for_their_retry_time_loses_and_doubles_nothing(
    tmp_path: Path, unique_name: str
) -> None:
    """20 messages each fail once (a 2 s wait follows); the consumer is SIGKILLed while they are held for their retry
    time; a new consumer makes each invoice exactly once, every row PROCESSED at attempt 2 (the failure recorded
    before the kill is kept, the early redeliveries cost nothing), none before its retry time."""
    require_service("rabbitmq")
    db, marks = tmp_path / "hub.db", tmp_path / "marks.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE invoices (body TEXT NOT NULL)")
    with sqlite3.connect(marks) as conn:
        conn.execute("CREATE TABLE failed (body TEXT PRIMARY KEY, at REAL NOT NULL)")
    async with AsyncInbox(f"sqlite:///{db}", consumer="accounting") as inbox:
        await inbox.create_schema()
    connection = await aio_pika.connect(AMQP)
    channel = await connection.channel()
    queue = await channel.declare_queue(unique_name, durable=True)
    command = [sys.executable, "-c", _APP, AMQP, unique_name, str(db), str(marks), str(COUNT)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        for n in range(COUNT):
            body = f"inv-{n}".encode()
            await channel.default_exchange.publish(aio_pika.Message(body, message_id=f"m-{n}"), routing_key=unique_name)
        first = await asyncio.create_subprocess_exec(*command, stdout=subprocess.PIPE, env=env)
        assert await asyncio.to_thread(_wait_failed, marks, 30) == COUNT  # every message failed once
        await asyncio.sleep(0.3)  # the early redeliveries come back and are held
        first.send_signal(signal.SIGKILL)
        out, _ = await first.communicate()
        assert first.returncode == -9
        assert b"processed" not in out  # killed before any retry time came
        again = await asyncio.to_thread(
            subprocess.run, command, check=False, capture_output=True, text=True, timeout=90, env=env
        )
        assert again.returncode == 0, again.stderr
        assert sorted(again.stdout.split()[1::2]) == sorted(f"m-{n}" for n in range(COUNT))
        with sqlite3.connect(db) as conn:
            bodies = sorted(row[0] for row in conn.execute("SELECT body FROM invoices"))
        assert bodies == sorted(f"inv-{n}" for n in range(COUNT))  # nothing lost, nothing doubled
        async with AsyncInbox(f"sqlite:///{db}", consumer="accounting") as inbox:
            records = await inbox.records(limit=100)
        assert len(records) == COUNT
        assert {(r.status, r.attempts) for r in records} == {(Status.PROCESSED, 2)}  # no attempt lost or added
        with sqlite3.connect(marks) as conn:
            failed_at = {f"m-{body[4:]}": at for body, at in conn.execute("SELECT body, at FROM failed")}
        early = [
            r.message_id
            for r in records
            if r.settled_at is None or r.settled_at.timestamp() < failed_at[r.message_id] + 1.95
        ]
        assert early == []  # none ran again before its retry time
        declared = await channel.declare_queue(unique_name, passive=True)
        assert declared.declaration_result.message_count == 0
    finally:
        await queue.delete(if_unused=False, if_empty=False)
        await connection.close()


def _wait_failed(marks: Path, timeout: float) -> int:
    """How many messages failed their first run, once all COUNT did or after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        with sqlite3.connect(marks) as conn:
            failed = int(conn.execute("SELECT count(*) FROM failed").fetchone()[0])
        if failed >= COUNT or time.monotonic() > deadline:
            return failed
        time.sleep(0.05)
