"""The hub's dead letters: a message it parks DEAD is also published once, through the outbox, to the error queue
its `dead_letters` setting names, and a letter sent back is a delivery of the same key."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aio_pika

from edinbox import Message, Status
from edinbox._message import Outgoing
from edinbox.hub import Accounting, Created, HubConfig, SqlAccounting, open_hub
from edinbox.sources import publisher
from edinbox.sources.rabbitmq import publish
from hub.test_hub import doc, render
from hub_ops import init, stats
from sources.test_rabbitmq import BROKER, drop


class DownAccounting(Accounting):
    """A sink that refuses every invoice while `down`."""

    def __init__(self, inner: SqlAccounting) -> None:
        self.inner = inner
        self.down = True

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Refuse while down, else create."""
        if self.down:
            raise RuntimeError("accounting refused the invoice")
        return await self.inner.create(tx, message, invoices)


async def _until(step: Callable[[], Awaitable[object]], done: Callable[[], Awaitable[bool]]) -> None:
    """Run the hub's steps until `done()` holds (at most 20 s)."""
    deadline = time.monotonic() + 20
    while not await done():
        assert time.monotonic() < deadline, "the hub did not get there in 20 s"
        await step()


async def _take(queue: str) -> list[aio_pika.abc.AbstractIncomingMessage]:
    """Every message waiting in `queue`, consumed."""
    connection = await aio_pika.connect(BROKER)
    taken = []
    async with connection:
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, passive=True)
        while (message := await declared.get(no_ack=True, fail=False)) is not None:
            taken.append(message)
    return taken


async def test_a_dead_interchange_lands_once_in_the_error_queue_and_comes_back_as_its_key(
    tmp_path: Path, queue: str
) -> None:
    """max_attempts=2: the interchange the sink refuses twice is parked DEAD and its letter reaches the error queue
    once (relayed twice), under its control number, with the delivery's header, the exception type and message and
    the attempts; after `requeue`, the letter sent back to the hub's queue is processed once as that same key."""
    source, errors = f"{BROKER}?queue={queue}", f"{BROKER}?queue={queue}err"
    config = HubConfig(
        db=f"sqlite:///{tmp_path / 'hub.db'}",
        source=source,
        max_attempts=2,
        retry_immediate=5,
        poll_timeout=0.2,
        dead_letters=errors,
    )
    await init(config)
    payload = render(doc(control="000000901", number="DEAD-1"))
    await publish(source, [Outgoing("d-1", payload, {"X-Partner-Ref": "po-77"})])

    async def relay(inbox: Any) -> int:
        async def send(destination: str, messages: Any) -> None:
            await publisher(destination)(destination, messages)

        return int((await inbox.relay(send, destinations=config.credentials)).sent)

    try:
        async with open_hub(config) as hub:
            sink = DownAccounting(hub.accounting)  # type: ignore[arg-type]
            hub.accounting = sink

            async def status() -> Status | None:
                rows = await hub.inbox.records(limit=5)
                return rows[0].status if rows else None

            await _until(hub.step, lambda: _is(status(), Status.DEAD))
            assert (await relay(hub.inbox), await relay(hub.inbox)) == (1, 0)
            [letter] = await _take(f"{queue}err")
            [row] = await hub.inbox.records(limit=5)
            assert letter.message_id == row.message_id == "000000901"
            assert letter.body == payload
            headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in (letter.headers or {}).items()}
            assert {k: headers.get(k) for k in ("X-Partner-Ref", "Edinbox-Error-Type", "Edinbox-Attempts")} == {
                "X-Partner-Ref": "po-77",
                "Edinbox-Error-Type": "RuntimeError",
                "Edinbox-Attempts": "2",
            }
            assert headers["Edinbox-Error"] == "accounting refused the invoice"
            assert headers["Edinbox-Source"] == row.source
            assert await hub.inbox.requeue(row.source, row.message_id) is True
            sink.down = False
            await publish(source, [Outgoing(str(letter.message_id), letter.body, headers)])  # re-driven
            await _until(hub.step, lambda: _is(status(), Status.PROCESSED))
            [row] = await hub.inbox.records(limit=5)
        counts = await stats(config)
        assert (counts["invoices"], counts["dead"], row.attempts) == (1, 0, 1)
    finally:
        await drop(f"{queue}err")


async def _is(value: Awaitable[object], expected: object) -> bool:
    """Whether `value` comes to `expected`."""
    return await value == expected
