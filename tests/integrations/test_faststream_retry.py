"""Retries that wait, through the FastStream middleware on real brokers: a failed message's redeliveries before its
retry time run nothing and cost no attempt, and a message failing for ever is parked only after the policy's waits."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from faststream import Context
from faststream.middlewares import AckPolicy

from edinbox import AsyncInbox, Message, Outcome, Retry, RetryLater, Status, Tx
from edinbox.integrations.faststream import inbox_middleware
from services import require_service

AMQP = "amqp://guest:guest@127.0.0.1:5672/"
NATS = "nats://127.0.0.1:4222"


class CountingInbox(AsyncInbox):
    """An inbox that counts the deliveries it handed back to wait (RetryLater) and signals the first one."""

    waits = 0
    waiting: asyncio.Event

    async def process(self, message: Message, handler: Any, **options: Any) -> Outcome:
        """Process as AsyncInbox does, counting a RetryLater."""
        try:
            return await super().process(message, handler, **options)
        except RetryLater:
            self.waits += 1
            self.waiting.set()
            raise


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A SQLite file with an `invoices` table for the handlers' effects."""
    path = tmp_path / "hub.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (body TEXT NOT NULL)")
    return path


async def open_inbox(db: Path, *, retry: Retry, max_attempts: int) -> CountingInbox:
    """A counting inbox on `db` with its schema."""
    inbox = CountingInbox(f"sqlite:///{db}", consumer="accounting", retry=retry, max_attempts=max_attempts)
    inbox.waiting = asyncio.Event()
    await inbox.create_schema()
    return inbox


def invoices(db: Path) -> list[str]:
    """The invoices the handlers created."""
    with sqlite3.connect(db) as conn:
        return sorted(row[0] for row in conn.execute("SELECT body FROM invoices"))


class Flaky:
    """A handler that fails the first `failures` runs of the message `flaky` (every run when None), noting when each
    run of it started; other messages succeed."""

    def __init__(self, failures: int | None) -> None:
        """Fail `failures` times (None: for ever)."""
        self.failures = failures
        self.runs: list[float] = []

    async def __call__(self, body: bytes, tx: Tx = Context("inbox_tx")) -> None:  # noqa: B008 - FastStream's injection
        """Write the invoice, then fail while failures remain (the invoice rolls back with the journal row)."""
        await tx.connection.execute("INSERT INTO invoices (body) VALUES (?)", (body.decode(),))
        if body != b"flaky":
            return
        self.runs.append(time.monotonic())
        if self.failures is None or len(self.runs) <= self.failures:
            raise RuntimeError(f"accounting is down (run {len(self.runs)})")


class Settled:
    """The middleware's `on_outcome`: when each message id settled, and how."""

    def __init__(self) -> None:
        """Nothing settled yet."""
        self.at: dict[str, tuple[float, Outcome]] = {}
        self.changed = asyncio.Event()

    def __call__(self, _msg: Any, message: Message, outcome: Outcome) -> None:
        """Note the settlement."""
        self.at.setdefault(message.message_id, (time.monotonic(), outcome))
        self.changed.set()

    async def wait_for(self, *message_ids: str, timeout: float = 30) -> None:
        """Return once every one of `message_ids` settled."""
        async with asyncio.timeout(timeout):
            while not all(m in self.at for m in message_ids):
                self.changed.clear()
                await self.changed.wait()


async def test_rabbitmq_three_failures_then_success_make_one_effect_after_the_backoff(
    db: Path, unique_name: str
) -> None:
    """On RabbitMQ (NACK_ON_ERROR requeues at once) a handler failing three times then succeeding runs four times,
    the third and fourth runs after the 0.5 s and 1 s waits; the early redeliveries are held, run nothing and cost no
    attempt (four attempts recorded), another message is settled meanwhile, and one invoice is made."""
    require_service("rabbitmq")
    from faststream.rabbit import RabbitBroker, RabbitQueue

    retry = Retry(immediate=1, first=timedelta(seconds=0.5), factor=2, jitter=0)
    inbox = await open_inbox(db, retry=retry, max_attempts=5)
    handler, settled = Flaky(failures=3), Settled()
    broker = RabbitBroker(AMQP, middlewares=[inbox_middleware(inbox, on_outcome=settled)], logger=None)
    queue = RabbitQueue(unique_name, auto_delete=True)
    broker.subscriber(queue, ack_policy=AckPolicy.NACK_ON_ERROR)(handler)
    try:
        async with broker:
            await broker.start()
            await broker.publish(b"flaky", queue=unique_name, message_id="flaky")
            await asyncio.wait_for(inbox.waiting.wait(), timeout=30)  # held until its retry time
            await broker.publish(b"other", queue=unique_name, message_id="other")
            await settled.wait_for("flaky", "other")
        record = await inbox.get(f"amqp:{unique_name}", "flaky")
    finally:
        await inbox.aclose()
    runs = handler.runs
    assert len(runs) == 4
    assert runs[2] - runs[1] >= 0.5 - 0.01
    assert runs[3] - runs[2] >= 1.0 - 0.01
    assert inbox.waits >= 2  # the redeliveries after the second and third failures came early
    assert record is not None
    assert (record.status, record.attempts, record.retry_at) == (Status.PROCESSED, 4, None)
    assert settled.at["flaky"][1] is Outcome.PROCESSED
    assert settled.at["other"][0] < runs[3]  # settled while the flaky one was held
    assert invoices(db) == ["flaky", "other"]


async def test_rabbitmq_a_handler_failing_for_ever_is_dead_only_after_the_policy_total(
    db: Path, unique_name: str
) -> None:
    """A handler failing for ever, max_attempts=4 and waits 0, 0.3 and 0.6 s: the message is parked DEAD after four
    runs, no sooner than 0.9 s after the first, with no invoice."""
    require_service("rabbitmq")
    from faststream.rabbit import RabbitBroker, RabbitQueue

    retry = Retry(immediate=1, first=timedelta(seconds=0.3), factor=2, jitter=0)
    assert retry.total(4) == timedelta(seconds=0.9)
    inbox = await open_inbox(db, retry=retry, max_attempts=4)
    handler, settled = Flaky(failures=None), Settled()
    broker = RabbitBroker(AMQP, middlewares=[inbox_middleware(inbox, on_outcome=settled)], logger=None)
    queue = RabbitQueue(unique_name, auto_delete=True)
    broker.subscriber(queue, ack_policy=AckPolicy.NACK_ON_ERROR)(handler)
    try:
        async with broker:
            await broker.start()
            await broker.publish(b"flaky", queue=unique_name, message_id="flaky")
            await settled.wait_for("flaky")
        record = await inbox.get(f"amqp:{unique_name}", "flaky")
    finally:
        await inbox.aclose()
    assert settled.at["flaky"][1] is Outcome.DEAD
    assert len(handler.runs) == 4
    assert handler.runs[-1] - handler.runs[0] >= 0.9 - 0.01
    assert record is not None
    assert (record.status, record.attempts) == (Status.DEAD, 4)
    assert invoices(db) == []


async def test_nats_an_early_redelivery_is_naked_with_the_time_left(db: Path, unique_name: str) -> None:
    """On NATS JetStream, the redelivery that follows a failure comes before the 1 s wait: the middleware naks it with
    the time left, and the server's next delivery, about a second later, runs the handler (two attempts, three
    deliveries)."""
    require_service("nats")
    import nats
    from faststream.nats import JStream, NatsBroker, PullSub

    retry = Retry(immediate=0, first=timedelta(seconds=1), jitter=0)
    inbox = await open_inbox(db, retry=retry, max_attempts=5)
    handler, settled = Flaky(failures=1), Settled()
    deliveries: list[int] = []

    def count(msg: Any, message: Message, outcome: Outcome) -> None:
        deliveries.append(msg.raw_message.metadata.num_delivered)
        settled(msg, message, outcome)

    broker = NatsBroker(NATS, middlewares=[inbox_middleware(inbox, on_outcome=count)], logger=None)
    stream = JStream(unique_name, subjects=[f"{unique_name}.in"])
    broker.subscriber(
        f"{unique_name}.in",
        stream=stream,
        durable="hub",
        # one long pull: a redelivery that comes due as a short pull expires is counted as a first delivery by
        # nats-server before 2.10.14 (nats-server#5305), and the count is what this test reads
        pull_sub=PullSub(batch_size=1, timeout=5),
        ack_policy=AckPolicy.NACK_ON_ERROR,
    )(handler)
    try:
        async with broker:
            await broker.start()
            try:
                await broker.publish(
                    b"flaky", f"{unique_name}.in", headers={"Nats-Msg-Id": "flaky"}, stream=unique_name
                )
                await settled.wait_for("flaky")
            finally:
                client = await nats.connect(NATS)
                await client.jetstream().delete_stream(unique_name)
                await client.close()
        record = await inbox.get(f"nats:{unique_name}", "flaky")
    finally:
        await inbox.aclose()
    assert len(handler.runs) == 2
    assert handler.runs[1] - handler.runs[0] >= 1.0 - 0.01
    assert inbox.waits >= 1
    assert deliveries == [inbox.waits + 2]  # the first run, the early ones naked with a delay, the run that settled
    assert record is not None
    assert (record.status, record.attempts) == (Status.PROCESSED, 2)
    assert invoices(db) == ["flaky"]


async def test_rabbitmq_a_message_failing_for_ever_lands_once_in_the_error_queue(db: Path, unique_name: str) -> None:
    """With dead_letters on a RabbitMQ queue, the message parked DEAD after the policy's waits is relayed once to
    that queue, its payload and original message id kept, with the exception's type, message and attempts in its
    headers; a second relay pass sends nothing more."""
    require_service("rabbitmq")
    import aio_pika
    from faststream.rabbit import RabbitBroker, RabbitQueue

    from edinbox.sources import publisher

    errors = f"{unique_name}-errors"
    retry = Retry(immediate=1, first=timedelta(seconds=0.2), factor=2, jitter=0)
    inbox = CountingInbox(
        f"sqlite:///{db}", consumer="accounting", retry=retry, max_attempts=3, dead_letters=f"{AMQP}?queue={errors}"
    )
    inbox.waiting = asyncio.Event()
    await inbox.create_schema()
    handler, settled = Flaky(failures=None), Settled()
    broker = RabbitBroker(AMQP, middlewares=[inbox_middleware(inbox, on_outcome=settled)], logger=None)
    broker.subscriber(RabbitQueue(unique_name, auto_delete=True), ack_policy=AckPolicy.NACK_ON_ERROR)(handler)

    async def send(destination: str, messages: Any) -> None:
        await publisher(destination)(destination, messages)

    connection = await aio_pika.connect(AMQP)
    try:
        async with broker:
            await broker.start()
            await broker.publish(b"flaky", queue=unique_name, message_id="flaky", headers={"partner": "ACME"})
            await settled.wait_for("flaky")
        errors_url = f"{AMQP}?queue={errors}"
        assert (await inbox.relay(send, destinations=[errors_url])).sent == 1
        assert (await inbox.relay(send, destinations=[errors_url])).sent == 0
        channel = await connection.channel()
        queue = await channel.declare_queue(errors, passive=True)
        letter = await queue.get(timeout=5)
        assert await queue.get(fail=False) is None  # once
        await letter.ack()
        await queue.delete(if_unused=False, if_empty=False)
    finally:
        await connection.close()
        await inbox.aclose()
    assert settled.at["flaky"][1] is Outcome.DEAD
    assert (letter.body, letter.message_id) == (b"flaky", "flaky")
    headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in (letter.headers or {}).items()}
    assert headers["Edinbox-Error-Type"] == "RuntimeError"
    assert headers["Edinbox-Error"] == "accounting is down (run 3)"
    assert headers["Edinbox-Attempts"] == "3"
    assert headers["Edinbox-Source"] == f"amqp:{unique_name}"
    assert headers["partner"] == "ACME"
