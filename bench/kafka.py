"""Kafka throughput with and without the inbox, side by side in one run, on librdkafka's mock cluster.

Each run consumes the same N records from its own topic the way the hub does (batches of `--batch-size`, ack after
the commit), writing one effect row per record into SQLite: "plain" in one transaction per batch, "inbox" through
`AsyncInbox.process_batch` (journal rows and effects in one transaction). Both run with each offset commit mode of
the source: `commit=ack` (a synchronous commit per record) and `commit=receive` (one per batch).

With `--hub`, the same side by side through the hub itself (parse, invoices, journal; `bench.brokers.through_hub`)
on partner interchanges, for each commit mode. With `--reject`, also the records rejected instead of acked (each
produced to the dead-letter topic, then settled) without the inbox, beside the acked ones.

    .venv/bin/python -m bench.kafka [--messages 5000] [--batch-size 20] [--rounds 3] [--hub] [--reject]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import aiosqlite

from edinbox import AsyncInbox, Message, Tx
from edinbox.sources.kafka import KafkaSource, MockCluster, publish

PAYLOAD = b"UNB+UNOC:3+ACME:14+HUB:14+261130:1200+IC1'" * 20  # about 1 KB, like a small interchange
EFFECT = "CREATE TABLE IF NOT EXISTS effects (message_id TEXT NOT NULL, size INTEGER NOT NULL)"


async def consume(url: str, count: int, batch_size: int, settle: object, *, reject: bool = False) -> float:
    """Consume `count` records, settle each batch with `settle(deliveries)`, ack (or reject) each; return records
    per second."""
    source = KafkaSource.from_url(url, consumer="bench")
    await source.open()
    try:
        done = 0
        started = None
        while done < count:
            deliveries = await source.receive(max_messages=batch_size, timeout=1.0)
            if not deliveries:
                continue
            started = started or time.perf_counter()
            await settle(deliveries)  # type: ignore[operator]
            for delivery in deliveries:
                await (source.reject(delivery, reason="bench") if reject else source.ack(delivery))
            done += len(deliveries)
        assert started is not None
        return done / (time.perf_counter() - started)
    finally:
        await source.aclose()


async def plain(url: str, db: Path, count: int, batch_size: int, *, reject: bool = False) -> float:
    """The effect rows only, one SQLite transaction per batch."""
    async with aiosqlite.connect(db) as conn:
        await conn.execute(EFFECT)

        async def settle(deliveries: list) -> None:  # type: ignore[type-arg]
            await conn.executemany("INSERT INTO effects VALUES (?, ?)", [(d.key, len(d.payload)) for d in deliveries])
            await conn.commit()

        return await consume(url, count, batch_size, settle, reject=reject)


async def rejected(url: str, db: Path, count: int, batch_size: int) -> float:
    """The effect rows, one SQLite transaction per batch, each record then rejected (a dead letter) instead of
    acked."""
    return await plain(url, db, count, batch_size, reject=True)


async def inboxed(url: str, db: Path, count: int, batch_size: int) -> float:
    """The same effect rows, through the inbox: journal and effects in one transaction per batch."""
    async with aiosqlite.connect(db) as conn:
        await conn.execute(EFFECT)
        await conn.commit()
    inbox = AsyncInbox(f"sqlite:///{db}", consumer="bench")
    await inbox.create_schema()

    async def handler(tx: Tx, messages: list[Message]) -> None:
        await tx.connection.executemany(
            "INSERT INTO effects VALUES (?, ?)", [(m.message_id, len(m.payload)) for m in messages]
        )

    async def settle(deliveries: list) -> None:  # type: ignore[type-arg]
        messages = [Message(d.key, d.source, d.payload) for d in deliveries]
        await inbox.process_batch(messages, handler)

    try:
        return await consume(url, count, batch_size, settle)
    finally:
        await inbox.aclose()


async def hub_table(cluster: MockCluster, messages: int, rounds: int) -> None:
    """Messages per second through the hub with and without the inbox (best of the rounds, as bench.brokers)."""
    from bench.brokers import through_hub, traffic

    payloads = traffic(messages)
    print(f"\nKafka through the hub (SQLite), {len(payloads)} interchanges, best of {rounds} rounds:")
    print("| offset commit | without inbox | with inbox | inbox cost |")
    print("|---|---|---|---|")
    for commit in ("ack", "receive"):
        rates: dict[bool, list[float]] = {False: [], True: []}
        for n in range(rounds):
            for inbox in (False, True) if n % 2 == 0 else (True, False):
                topic = f"bench-{uuid.uuid4().hex[:8]}"
                url = cluster.url(topic=topic, group=topic, commit=commit, **{"group.protocol": "consumer"})
                await publish(url, payloads)
                with tempfile.TemporaryDirectory() as tmp:
                    elapsed = await through_hub(url, f"sqlite:///{tmp}/hub.db", "inbox", len(payloads), inbox=inbox)
                rates[inbox].append(len(payloads) / elapsed)
        without, with_ = max(rates[False]), max(rates[True])
        print(f"| commit={commit} | {without:.0f} msg/s | {with_:.0f} msg/s | {100 * (1 - with_ / without):.1f} % |")


async def main() -> None:
    """Run every mode in alternation, print the medians and the inbox's cost per commit mode."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=20, help="the hub's default is 20")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hub", action="store_true", help="also measure through the hub (needs edinbox.hub)")
    parser.add_argument("--reject", action="store_true", help="also reject every record instead of acking it")
    args = parser.parse_args()
    cluster = MockCluster()
    names = ("plain", "inbox", "reject") if args.reject else ("plain", "inbox")
    modes = [(commit, name) for commit in ("ack", "receive") for name in names]
    runs = {"plain": plain, "inbox": inboxed, "reject": rejected}
    results: dict[tuple[str, str], list[float]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds):
            for commit, name in modes if n % 2 == 0 else reversed(modes):
                topic = f"bench-{uuid.uuid4().hex[:8]}"
                url = cluster.url(topic=topic, group=topic, commit=commit, **{"group.protocol": "consumer"})
                await publish(url, [(f"m-{i}", PAYLOAD) for i in range(args.messages)])
                rate = await runs[name](url, Path(tmp) / f"{name}-{commit}-{n}.db", args.messages, args.batch_size)
                results[(commit, name)].append(rate)
                print(f"round {n + 1} commit={commit:7} {name:5} {rate:8.0f} msg/s")
    print(f"\nKafka (mock cluster), {args.messages} messages, batch {args.batch_size}, median of {args.rounds} rounds:")
    print("| offset commit | without inbox | with inbox | inbox cost |")
    print("|---|---|---|---|")
    for commit in ("ack", "receive"):
        plain_rate, inbox_rate = (statistics.median(results[(commit, k)]) for k in ("plain", "inbox"))
        cost = 100 * (1 - inbox_rate / plain_rate)
        print(f"| commit={commit} | {plain_rate:.0f} msg/s | {inbox_rate:.0f} msg/s | {cost:.1f} % |")
    if args.reject:
        print("\n| offset commit | acked | rejected | reject / ack |")
        print("|---|---|---|---|")
        for commit in ("ack", "receive"):
            acked, rejects = (statistics.median(results[(commit, k)]) for k in ("plain", "reject"))
            print(f"| commit={commit} | {acked:.0f} msg/s | {rejects:.0f} msg/s | x{rejects / acked:.2f} |")
    if args.hub:
        await hub_table(cluster, args.messages, args.rounds)
    cluster.close()


if __name__ == "__main__":
    asyncio.run(main())
