"""The FastStream inbox middleware against real brokers: producer keys, duplicates, a crash between commit and ack."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from faststream import Context
from faststream.middlewares import AckPolicy

from edinbox import AsyncInbox, Message, Outcome, Tx
from edinbox.integrations.faststream import inbox_middleware
from services import require_service

AMQP = "amqp://guest:guest@127.0.0.1:5672/"
NATS = "nats://127.0.0.1:4222"
REDIS = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def inbox(tmp_path: Path) -> AsyncIterator[AsyncInbox]:
    """A SQLite inbox with an `invoices` table for the handlers' effects, in the same database."""
    db = tmp_path / "hub.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE invoices (body TEXT NOT NULL)")
    inbox = AsyncInbox(f"sqlite:///{db}", consumer="accounting")
    await inbox.create_schema()
    yield inbox
    await inbox.aclose()


def invoices(inbox_db: Path) -> list[str]:
    """The invoices the handlers created."""
    with sqlite3.connect(inbox_db) as conn:
        return sorted(row[0] for row in conn.execute("SELECT body FROM invoices"))


class Seen:
    """Collects (message id, source, outcome) of every settled message and wakes up once `expected` arrived."""

    def __init__(self, expected: int) -> None:
        """Wait for `expected` settlements."""
        self.expected = expected
        self.items: list[tuple[str, str, Outcome]] = []
        self.done = asyncio.Event()

    def __call__(self, _msg: Any, message: Message, outcome: Outcome) -> None:
        """The middleware's `on_outcome` hook."""
        self.items.append((message.message_id, message.source, outcome))
        if len(self.items) >= self.expected:
            self.done.set()

    async def wait(self) -> list[tuple[str, str, Outcome]]:
        """The settlements, sorted, once all arrived (30 s at most: a Kafka consumer group forms in a few seconds on
        an idle machine, several times that with the suite's other workers busy)."""
        await asyncio.wait_for(self.done.wait(), timeout=30)
        return sorted(self.items, key=lambda item: (item[0], item[2].value))


async def create_invoice(body: bytes, tx: Tx = Context("inbox_tx")) -> None:  # noqa: B008 - FastStream's injection
    """The handler: one invoice row, written inside the inbox transaction."""
    await tx.connection.execute("INSERT INTO invoices (body) VALUES (?)", (body.decode(),))


async def test_rabbitmq_duplicate_publish_runs_the_handler_once(
    inbox: AsyncInbox, tmp_path: Path, unique_name: str
) -> None:
    """Two publishes with one AMQP message_id run the handler once; FastStream's random message_id is not the key."""
    require_service("rabbitmq")
    from faststream.rabbit import RabbitBroker, RabbitQueue

    seen = Seen(3)
    broker = RabbitBroker(AMQP, middlewares=[inbox_middleware(inbox, on_outcome=seen)], logger=None)
    queue = RabbitQueue(unique_name, auto_delete=True)
    broker.subscriber(queue, ack_policy=AckPolicy.NACK_ON_ERROR)(create_invoice)
    async with broker:
        await broker.start()
        for message_id, body in [("m-1", b"inv-1"), ("m-1", b"inv-1"), ("m-2", b"inv-2")]:
            await broker.publish(body, queue=unique_name, message_id=message_id)
        outcomes = await seen.wait()
    assert [(i, o) for i, _, o in outcomes] == [
        ("m-1", Outcome.DUPLICATE),
        ("m-1", Outcome.PROCESSED),
        ("m-2", Outcome.PROCESSED),
    ]
    assert {source for _, source, _ in outcomes} == {f"amqp:{unique_name}"}
    assert invoices(tmp_path / "hub.db") == ["inv-1", "inv-2"]


async def test_redis_keys_from_faststream_header_and_foreign_entry_field(
    inbox: AsyncInbox, tmp_path: Path, unique_name: str
) -> None:
    """On Redis Streams the key is the `message_id` header of a FastStream publish or the field of a foreign XADD."""
    require_service("redis")
    import redis.asyncio as redis_asyncio
    from faststream.redis import RedisBroker, StreamSub

    seen = Seen(4)
    broker = RedisBroker(REDIS, middlewares=[inbox_middleware(inbox, on_outcome=seen)], logger=None)
    sub = StreamSub(unique_name, group="hub", consumer="w1", last_id="0")

    @broker.subscriber(stream=sub, ack_policy=AckPolicy.NACK_ON_ERROR)
    async def create_any_invoice(body: Any, tx: Tx = Context("inbox_tx")) -> None:  # noqa: B008
        """A foreign entry's fields arrive as a dict, a FastStream publish as bytes."""
        await tx.connection.execute("INSERT INTO invoices (body) VALUES (?)", (str(body),))

    client = redis_asyncio.Redis.from_url(REDIS)
    try:
        async with broker:
            await broker.start()
            for _ in range(2):
                await broker.publish(b"inv-1", stream=unique_name, headers={"message_id": "r-1"})
                await client.xadd(unique_name, {"message_id": "r-2", "payload": "inv-2"})
            outcomes = await seen.wait()
    finally:
        await client.delete(unique_name)
        await client.aclose()
    assert [(i, o) for i, _, o in outcomes] == [
        ("r-1", Outcome.DUPLICATE),
        ("r-1", Outcome.PROCESSED),
        ("r-2", Outcome.DUPLICATE),
        ("r-2", Outcome.PROCESSED),
    ]
    assert {source for _, source, _ in outcomes} == {f"redis:{unique_name}"}
    assert len(invoices(tmp_path / "hub.db")) == 2


async def test_nats_key_is_the_nats_msg_id_header(inbox: AsyncInbox, tmp_path: Path, unique_name: str) -> None:
    """On NATS JetStream the key is the Nats-Msg-Id header, and the source names the stream."""
    require_service("nats")
    from faststream.nats import JStream, NatsBroker, PullSub

    seen = Seen(2)
    broker = NatsBroker(NATS, middlewares=[inbox_middleware(inbox, on_outcome=seen)], logger=None)
    stream = JStream(unique_name, subjects=[f"{unique_name}.in"])
    broker.subscriber(
        f"{unique_name}.in",
        stream=stream,
        durable="hub",
        pull_sub=PullSub(batch_size=1, timeout=0.5),
        ack_policy=AckPolicy.NACK_ON_ERROR,
    )(create_invoice)
    async with broker:
        await broker.start()
        try:
            for message_id in ("n-1", "n-2"):
                await broker.publish(
                    message_id.encode(), f"{unique_name}.in", headers={"Nats-Msg-Id": message_id}, stream=unique_name
                )
            outcomes = await seen.wait()
        finally:
            import nats

            client = await nats.connect(NATS)
            await client.jetstream().delete_stream(unique_name)
            await client.close()
    assert outcomes == [
        ("n-1", f"nats:{unique_name}", Outcome.PROCESSED),
        ("n-2", f"nats:{unique_name}", Outcome.PROCESSED),
    ]
    assert invoices(tmp_path / "hub.db") == ["n-1", "n-2"]


async def test_kafka_key_is_the_record_header_not_faststream_offset_id(
    inbox: AsyncInbox, tmp_path: Path, unique_name: str
) -> None:
    """On Kafka (FastStream confluent broker, mock cluster) the key is the `message_id` header: a copy runs nothing."""
    from faststream.confluent import KafkaBroker

    from edinbox.sources.kafka import MockCluster

    cluster = MockCluster()
    seen = Seen(3)
    try:
        broker = KafkaBroker(cluster.bootstrap, middlewares=[inbox_middleware(inbox, on_outcome=seen)], logger=None)
        # publish first: the topic then exists when the group forms
        async with broker:
            for message_id, body in [("k-1", b"inv-1"), ("k-1", b"inv-1"), ("k-2", b"inv-2")]:
                await broker.publish(
                    body, topic=unique_name, key=message_id.encode(), headers={"message_id": message_id}
                )
        broker = KafkaBroker(  # the mock has no controller for FastStream's CreateTopics: the topic exists already
            cluster.bootstrap,
            middlewares=[inbox_middleware(inbox, on_outcome=seen)],
            logger=None,
            allow_auto_create_topics=False,
        )
        broker.subscriber(unique_name, group_id=unique_name, auto_offset_reset="earliest", ack_policy=AckPolicy.ACK)(
            create_invoice
        )
        async with broker:
            await broker.start()
            outcomes = await seen.wait()
    finally:
        cluster.close()
    assert [(i, o) for i, _, o in outcomes] == [
        ("k-1", Outcome.DUPLICATE),
        ("k-1", Outcome.PROCESSED),
        ("k-2", Outcome.PROCESSED),
    ]
    assert {source for _, source, _ in outcomes} == {f"kafka:{unique_name}"}
    assert invoices(tmp_path / "hub.db") == ["inv-1", "inv-2"]


_APP = """
import asyncio, os, signal, sys
from faststream import BaseMiddleware, Context
from faststream.middlewares import AckPolicy
from faststream.rabbit import RabbitBroker, RabbitQueue
from edinbox import AsyncInbox
from edinbox.integrations.faststream import inbox_middleware

URL, QUEUE, DB, CRASH = sys.argv[1:5]


class CrashAfterCommit(BaseMiddleware):
    async def consume_scope(self, call_next, msg):
        result = await call_next(msg)  # the inbox middleware inside has committed
        if CRASH == "1":
            os.kill(os.getpid(), signal.SIGKILL)  # after the commit, before FastStream acks
        return result


async def main():
    inbox = AsyncInbox(f"sqlite:///{DB}", consumer="accounting")
    done = asyncio.Event()

    def seen(msg, message, outcome):
        print(outcome.value, message.message_id, msg.raw_message.redelivered, flush=True)
        done.set()

    broker = RabbitBroker(URL, middlewares=[CrashAfterCommit, inbox_middleware(inbox, on_outcome=seen)], logger=None)

    @broker.subscriber(RabbitQueue(QUEUE, durable=True), ack_policy=AckPolicy.NACK_ON_ERROR)
    async def create_invoice(body: bytes, tx=Context("inbox_tx")):
        await tx.connection.execute("INSERT INTO invoices (body) VALUES (?)", (body.decode(),))

    async with broker:
        await broker.start()
        await asyncio.wait_for(done.wait(), 20)
        await asyncio.sleep(0.3)  # the ack goes out after the middlewares return
    await inbox.aclose()

asyncio.run(main())
"""


async def test_crash_between_commit_and_ack_then_redelivery_runs_the_handler_once(
    inbox: AsyncInbox, tmp_path: Path, unique_name: str
) -> None:
    """A FastStream consumer SIGKILLed after the commit gets the message again (redelivered) and skips the handler."""
    require_service("rabbitmq")
    db = tmp_path / "hub.db"
    connection = await aio_pika.connect(AMQP)
    channel = await connection.channel()
    queue = await channel.declare_queue(unique_name, durable=True)
    try:
        await channel.default_exchange.publish(aio_pika.Message(b"inv-9", message_id="m-9"), routing_key=unique_name)

        def run(crash: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-c", _APP, AMQP, unique_name, str(db), crash],
                check=False,
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

        crashed = await asyncio.to_thread(run, "1")
        assert crashed.returncode == -9, crashed.stderr
        assert crashed.stdout.split() == ["processed", "m-9", "False"]
        again = await asyncio.to_thread(run, "0")
        assert again.returncode == 0, again.stderr
        assert again.stdout.split() == ["duplicate", "m-9", "True"]  # the broker really redelivered it
        assert invoices(db) == ["inv-9"]
        assert (await inbox.stats()).processed == 1
        declared = await channel.declare_queue(unique_name, passive=True)
        assert declared.declaration_result.message_count == 0  # acked the second time
    finally:
        await queue.delete(if_unused=False, if_empty=False)
        await connection.close()


async def test_rabbitmq_return_value_goes_through_the_outbox(
    inbox: AsyncInbox, tmp_path: Path, unique_name: str
) -> None:
    """With outbox=, a handler's return value is stored in the inbox transaction, once per key (a duplicate stores
    nothing), and the relay sends it keyed by the message it answers."""
    require_service("rabbitmq")
    from faststream.rabbit import RabbitBroker, RabbitQueue

    replies = tmp_path / "replies"
    seen = Seen(3)
    middleware = inbox_middleware(inbox, on_outcome=seen, outbox=f"dir://{replies}")
    broker = RabbitBroker(AMQP, middlewares=[middleware], logger=None)
    queue = RabbitQueue(unique_name, auto_delete=True)

    @broker.subscriber(queue, ack_policy=AckPolicy.NACK_ON_ERROR)
    async def answer(body: bytes) -> bytes:
        """Reply to every message."""
        return b"ack:" + body

    async with broker:
        await broker.start()
        for message_id, body in [("m-1", b"inv-1"), ("m-1", b"inv-1"), ("m-2", b"inv-2")]:
            await broker.publish(body, queue=unique_name, message_id=message_id)
        await seen.wait()

    async def collect(destination: str, messages: Any) -> None:
        sent.extend((m.message_id, m.payload) for m in messages)

    sent: list[tuple[str, bytes]] = []
    assert (await inbox.relay(collect)).sent == 2
    assert sorted(sent) == [(f"amqp:{unique_name}/m-1", b"ack:inv-1"), (f"amqp:{unique_name}/m-2", b"ack:inv-2")]


def test_the_operator_commands_read_a_faststream_journal(tmp_path: Path, unique_name: str) -> None:
    """A FastStream app's journal (SQLite, where its AsyncInbox put it): doctor, stats, show, relay and the console's
    data layer work on it with no hub tables, and the relay sends each reply its handler returned once, under the
    key of the message it answers, to a password-protected broker."""
    require_service("rabbitmq")
    from faststream.rabbit import RabbitBroker, RabbitQueue

    from cli.library_views import check_views
    from edinbox.hub.config._model import HubConfig
    from sources.test_rabbitmq import drop

    db = f"sqlite:///{tmp_path / 'app.db'}"

    async def app() -> None:
        async with AsyncInbox(db, consumer="accounting") as inbox:
            await inbox.create_schema()
            seen = Seen(3)
            middleware = inbox_middleware(inbox, on_outcome=seen, outbox=f"{AMQP}?queue={unique_name}-replies")
            broker = RabbitBroker(AMQP, middlewares=[middleware], logger=None)

            @broker.subscriber(RabbitQueue(unique_name, auto_delete=True), ack_policy=AckPolicy.NACK_ON_ERROR)
            async def answer(body: bytes) -> bytes:
                """Reply to every message."""
                return b"ack:" + body

            async with broker:
                await broker.start()
                for message_id, body in [("m-1", b"inv-1"), ("m-1", b"inv-1"), ("m-2", b"inv-2")]:
                    await broker.publish(body, queue=unique_name, message_id=message_id)
                await seen.wait()

    published = [(f"amqp:{unique_name}/m-1", b"ack:inv-1"), (f"amqp:{unique_name}/m-2", b"ack:inv-2")]
    try:
        asyncio.run(app())
        config = HubConfig(db=db, consumer="accounting")
        check_views(config, key=f"amqp:{unique_name}/m-1", queue=f"{unique_name}-replies", published=published)
    finally:
        asyncio.run(drop(f"{unique_name}-replies"))
