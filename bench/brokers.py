"""Messages per second through the hub for each broker, with and without the inbox, side by side in one run.

    .venv/bin/python -m bench.brokers [--messages 2000] [--rounds 3] [--brokers rabbitmq,nats,redis] [--db sqlite]

Both variants run the same hub (receive a batch, parse, create the invoices in one transaction, commit, ack) at its
default batch settings, each on its own fresh queue and database. "with inbox" is the hub as shipped: the batch is
recorded in the journal (`AsyncInbox.process_batch`) in the invoices' transaction. "without inbox" hands the same
batch to the same handler in a plain transaction of the same store, without the journal: what the hub would cost
if exactly-once were not needed. The two hubs run side by side in one process and take turns, one batch each per
turn (order rotated), each turn timed per hub, so load from other processes on a shared machine hits both alike.
The rate is all messages over all time spent per variant; the cost of each round is printed beside it.

Without the hub (before it is installed) the benchmark falls back to the sources alone: receive, then a batch
insert of one row per message in a transaction, with or without `process_batch`, then ack.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from edinbox import AsyncInbox, Message, Outcome
from edinbox._records import Tx
from edinbox.sources import open_source, publisher

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
URLS: dict[str, Callable[[str], str]] = {
    "rabbitmq": lambda n: f"amqp://guest:guest@127.0.0.1/?queue={n}",
    "nats": lambda n: f"nats://127.0.0.1:4222?stream={n}&subject={n}.in",
    "redis": lambda n: f"redis://127.0.0.1:6379/0?stream={n}",
}
HUB = importlib.util.find_spec("edinbox.hub") is not None and importlib.util.find_spec("edinbox.edi") is not None


class NoInbox:
    """The hub's inbox replaced by a plain transaction of the same store: same handler, no journal."""

    def __init__(self, inbox: AsyncInbox) -> None:
        """Borrow the real inbox's store, so connections and settings are identical."""
        self._inbox = inbox

    async def process_batch(
        self, messages: Sequence[Message], handler: Any, *, before_commit: Any = None
    ) -> list[Outcome]:
        """Run the handler on every message in one transaction and commit: what the hub did before the inbox."""
        outcomes = [Outcome.PROCESSED] * len(messages)
        async with self._inbox._store.unit() as unit:  # the same store as the inbox: same connection settings
            await unit.begin()
            tx = Tx(unit.connection, self._inbox.dialect, unit=unit)
            await handler(tx, list(messages))
            if before_commit is not None:
                await before_commit(tx, outcomes)
            await unit.commit()
        return outcomes

    async def transaction(self, work: Any) -> Any:
        """The real inbox's own transaction (the hub's bookkeeping when nothing goes through the inbox)."""
        return await self._inbox.transaction(work)


def traffic(count: int) -> list[tuple[str, bytes]]:
    """`count` distinct partner invoices (X12 810 and EDIFACT INVOIC), keyed as `edinbox publish` keys them."""
    if not HUB:
        return [(f"m{n}", b"payload %d" % n) for n in range(count)]
    from edinbox.hub.demo._traffic import PARTNERS, Doc, render
    from edinbox.hub.ops._publish import split_payload

    messages = []
    for n in range(count):
        partner = PARTNERS[n % len(PARTNERS)]
        control = f"{100000 + n:09d}" if partner.standard == "X12" else f"IC{100000 + n}"
        doc = Doc(partner, control, "invoice", f"B{n:07d}", lines=((1 + n % 5, Decimal(n % 900 + 1) / 10),))
        messages.extend(split_payload(render(doc), name=f"{n}.edi"))
    return messages


async def drop(url: str, name: str) -> None:
    """Remove the queue, stream or subject the run created."""
    if url.startswith("amqp"):
        import aio_pika

        connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1/")
        async with connection:
            channel = await connection.channel()
            await channel.queue_delete(name)
            await channel.queue_delete(f"{name}.dead")
            await channel.exchange_delete(f"{name}.dead")
    elif url.startswith("nats"):
        import nats

        nc = await nats.connect("nats://127.0.0.1:4222")
        await nc.jetstream().delete_stream(name)
        await nc.close()
    else:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url("redis://127.0.0.1:6379/0")
        await client.delete(name, f"{name}.dead")
        await client.aclose()


async def through_hub(url: str, db: str, table: str, count: int, *, inbox: bool) -> float:
    """Seconds the hub (default batch settings) takes to settle `count` waiting interchanges."""
    from edinbox.hub.config._model import HubConfig
    from edinbox.hub.database import on_inbox
    from edinbox.hub.deliveries._open import open_hub
    from edinbox.hub.ops import init

    config = HubConfig(db=db, source=url, consumer="bench", table=table)
    await on_inbox(
        config, lambda inbox: init(inbox, config=config)
    )  # the operator's `edinbox init`: the hub itself runs no DDL
    async with open_hub(config) as hub:
        if not inbox:
            hub.inbox = NoInbox(hub.inbox)
        settled = 0
        started = time.perf_counter()
        while settled < count:
            settled += await hub.step()
        elapsed = time.perf_counter() - started
        created = await hub.db.value("SELECT count(*) FROM {invoices}")
    assert int(created) == count, f"{created} invoices for {count} interchanges"
    return elapsed


async def through_source(url: str, db: str, table: str, count: int, *, inbox: bool) -> float:
    """Seconds to receive, record (one row per message, in batches of 20) and ack `count` waiting messages."""
    journal = AsyncInbox(db, consumer="bench", table=table)
    await journal.create_schema()
    baseline = NoInbox(journal)

    async def handler(tx: Tx, messages: list[Message]) -> None:
        rows = [(m.message_id,) for m in messages]
        if tx.dialect == "sqlite":
            await tx.connection.executemany("INSERT INTO effects (id) VALUES (?)", rows)
        else:
            async with tx.connection.cursor() as cursor:
                await cursor.executemany("INSERT INTO effects (id) VALUES (%s)", rows)

    async with journal._store.unit() as unit:  # the effects table lives beside the journal
        await unit.begin()
        await unit.connection.execute("CREATE TABLE IF NOT EXISTS effects (id TEXT NOT NULL)")
        await unit.commit()
    settle = journal.process_batch if inbox else baseline.process_batch
    async with open_source(url, consumer="bench") as source:
        settled = 0
        started = time.perf_counter()
        while settled < count:
            deliveries = await source.receive(max_messages=20, timeout=0.5)
            messages = [Message(d.key, d.source, d.payload) for d in deliveries]
            await settle(messages, handler)
            for delivery in deliveries:
                await source.ack(delivery)
            settled += len(deliveries)
        elapsed = time.perf_counter() - started
    await journal.aclose()
    return elapsed


def _database(kind: str, name: str, folder: Path) -> tuple[str, str]:
    """The (db URL, journal table) of a fresh database: a SQLite file, or a PostgreSQL schema."""
    if kind == "sqlite":
        return f"sqlite:///{folder / (name + '.db')}", "inbox"
    return POSTGRES, f"{name}.inbox"


async def side_by_side(broker: str, messages: list[tuple[str, bytes]], *, db_kind: str) -> dict[bool, float]:
    """Seconds each variant spent settling the same traffic, two hubs stepped in turns (one batch each per turn).

    Each hub has its own queue and database; a turn times one `step()` (receive, settle, ack) of each, in rotating
    order, so a burst of load from other processes hits both variants alike.
    """
    from edinbox.hub.config._model import HubConfig
    from edinbox.hub.database import on_inbox
    from edinbox.hub.deliveries._open import open_hub
    from edinbox.hub.ops import init

    names = {inbox: "b" + uuid.uuid4().hex[:12] for inbox in (False, True)}
    folder = Path(tempfile.mkdtemp(prefix="edinbox-bench-"))
    try:
        async with contextlib.AsyncExitStack() as stack:
            hubs = {}
            for inbox, name in names.items():
                url = URLS[broker](name)
                await publisher(url)(url, messages)
                db, table = _database(db_kind, name, folder)
                config = HubConfig(db=db, source=url, consumer="bench", table=table)
                await on_inbox(config, lambda opened, config=config: init(opened, config=config))
                hub = await stack.enter_async_context(open_hub(config))
                if not inbox:
                    hub.inbox = NoInbox(hub.inbox)
                hubs[inbox] = hub
            spent = dict.fromkeys(hubs, 0.0)
            settled = dict.fromkeys(hubs, 0)
            turn = 0
            while any(n < len(messages) for n in settled.values()):
                for inbox in (False, True) if turn % 2 == 0 else (True, False):
                    if settled[inbox] < len(messages):
                        started = time.perf_counter()
                        settled[inbox] += await hubs[inbox].step()
                        spent[inbox] += time.perf_counter() - started
                turn += 1
            for hub in hubs.values():
                created = int(await hub.db.value("SELECT count(*) FROM {invoices}"))
                assert created == len(messages), f"{created} invoices for {len(messages)} interchanges"
        return spent
    finally:
        for name in names.values():
            await drop(URLS[broker](name), name)
            if db_kind == "postgres":
                await _drop_schema(name)
        shutil.rmtree(folder, ignore_errors=True)


async def one_run(broker: str, messages: list[tuple[str, bytes]], *, db_kind: str, inbox: bool) -> float:
    """Messages per second of one variant on a fresh queue and database (the path without the hub)."""
    name = "b" + uuid.uuid4().hex[:12]
    url = URLS[broker](name)
    folder = Path(tempfile.mkdtemp(prefix="edinbox-bench-"))
    db, table = _database(db_kind, name, folder)
    try:
        await publisher(url)(url, messages)
        elapsed = await through_source(url, db, table, len(messages), inbox=inbox)
        return len(messages) / elapsed
    finally:
        await drop(url, name)
        shutil.rmtree(folder, ignore_errors=True)
        if db_kind == "postgres":
            await _drop_schema(name)


async def _drop_schema(name: str) -> None:
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


async def main(args: argparse.Namespace) -> None:
    """Run every broker, both variants side by side, and print the table."""
    messages = traffic(args.messages)
    mode = "hub (parse + invoices + journal)" if HUB else "source receive + batch insert + ack (no hub installed)"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"edinbox broker benchmark: {len(messages)} messages per variant and round, {args.rounds} rounds, db={args.db}"
    )
    print(f"path: {mode}; batch size 20 (the hub's default)")
    print(f"{os.cpu_count()} CPUs, load average {load} (the machine is shared)")
    print(f"{'broker':<10} {'without inbox msg/s':>20} {'with inbox msg/s':>17} {'inbox cost':>11}   (cost per round)")
    for broker in args.brokers.split(","):
        spent: dict[bool, list[float]] = {False: [], True: []}
        for round_ in range(args.rounds):
            if HUB:
                times = await side_by_side(broker, messages, db_kind=args.db)
            else:
                order = [False, True] if round_ % 2 == 0 else [True, False]
                times = {v: len(messages) / await one_run(broker, messages, db_kind=args.db, inbox=v) for v in order}
            for inbox, seconds in times.items():
                spent[inbox].append(seconds)
        without = len(messages) * args.rounds / sum(spent[False])
        with_ = len(messages) * args.rounds / sum(spent[True])
        rounds = " ".join(f"{1 - a / b:.0%}" for a, b in zip(spent[False], spent[True], strict=True))
        print(f"{broker:<10} {without:>20.0f} {with_:>17.0f} {1 - with_ / without:>10.1%}   ({rounds})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2000, help="messages per run (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per variant; the best is reported")
    parser.add_argument("--brokers", default="rabbitmq,nats,redis", help="comma-separated subset")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite", help="the hub's database")
    asyncio.run(main(parser.parse_args()))
