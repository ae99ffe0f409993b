"""The hub's counters under concurrent batches: one row per outcome against rows spread over shards, side by side.

    .venv/bin/python -m bench.counters [--writers 4] [--seconds 8] [--turns 3] [--batch 20]

What one hub batch does in PostgreSQL, without the hub's parsing: `process_batch` of `--batch` fresh messages (the
journal rows, one statement), the counters added just before the commit (as the hub's `record` does), then COMMIT
with its WAL flush. Variants, turn by turn on one fresh journal: 1 writer; `--writers` concurrent writers all adding
to shard 0 (one row per outcome, as before schema version 4: each batch holds that row from its update to the end
of its commit, so the writers' commits queue one after the other); the same writers on random shards of
`_tables.SHARDS` (what the hub does now: their commits overlap and share WAL flushes). Printed: batches per second,
median and range over the turns, each variant's ratio to one writer, and the share of the writers' busy session
samples (pg_stat_activity, every 50 ms) spent waiting for a row lock.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import secrets
import statistics
import sys
import time
import uuid
from collections.abc import Callable

import psycopg
from psycopg import sql

from edinbox import Message, Tx
from edinbox._async_inbox import AsyncInbox
from edinbox.hub import HubConfig
from edinbox.hub.database import on_inbox
from edinbox.hub.database._journal import open_inbox
from edinbox.hub.database._tables import SHARDS, count, counts
from edinbox.hub.ops import init

from .hubs import Sessions

SOURCE = "X12:ZZ:ACME>ZZ:HUB"


async def writers(
    inbox: AsyncInbox, *, n: int, seconds: float, batch: int, shard: Callable[[], int], ids: itertools.count[int]
) -> float:
    """`n` concurrent writers settling batches for `seconds`; batches per second."""
    done = 0
    stop = time.monotonic() + seconds

    async def nothing(tx: Tx, messages: object) -> None:
        """The business effect is left out: the journal rows and the counters are what is measured."""

    async def writer() -> None:
        nonlocal done
        while time.monotonic() < stop:
            messages = [Message(f"m{next(ids)}", SOURCE) for _ in range(batch)]
            chosen = shard()

            async def record(tx: Tx, outcomes: object, chosen: int = chosen) -> None:
                await count(tx, consumer="hub", counts={"processed": batch}, shard=chosen)

            await inbox.process_batch(messages, nothing, before_commit=record)
            done += 1

    started = time.monotonic()
    await asyncio.gather(*(writer() for _ in range(n)))
    return done / (time.monotonic() - started)


async def run(args: argparse.Namespace) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Alternate the variants turn by turn on one fresh journal; check the counters add up; drop the schema."""
    name = "counters" + uuid.uuid4().hex[:8]
    config = HubConfig(db=args.url, table=f"{name}.inbox", consumer="hub")
    await on_inbox(config, lambda inbox: init(inbox, config=config))
    ids = itertools.count()
    variants: dict[str, tuple[int, Callable[[], int]]] = {
        "1 writer": (1, lambda: 0),
        f"{args.writers} writers, one row": (args.writers, lambda: 0),
        f"{args.writers} writers, {SHARDS} shards": (args.writers, lambda: secrets.randbelow(SHARDS)),
    }
    rates: dict[str, list[float]] = {v: [] for v in variants}
    locks: dict[str, list[float]] = {v: [] for v in variants}
    try:
        async with open_inbox(config) as inbox:
            for _ in range(args.turns):
                for variant, (n, shard) in variants.items():
                    sessions = Sessions(args.url, name)
                    sessions.start()
                    sessions.recording.set()
                    rate = await writers(inbox, n=n, seconds=args.seconds, batch=args.batch, shard=shard, ids=ids)
                    sessions.done.set()
                    sessions.join()
                    share, seen = _waits(sessions)
                    rates[variant].append(rate)
                    locks[variant].append(share)
                    print(f"  {variant}: {rate:,.0f} batches/s; sessions: {seen}", flush=True)
            found = await inbox.read(lambda tx: counts(tx, consumer="hub"))
            stats = await inbox.stats()
            if found["processed"] != next(ids) or stats.processed != found["processed"]:
                raise RuntimeError(f"counters {found['processed']} against {stats.processed} journal rows")
    finally:
        with psycopg.connect(args.url, autocommit=True) as connection:
            connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    return rates, locks


def _waits(sessions: Sessions) -> tuple[float, str]:
    """The writers' sessions: the share of their busy samples spent waiting for a lock, and the commonest states."""
    busy = {k: n for k, n in sessions.seen.items() if not k.startswith("idle:")}
    total = sum(busy.values()) or 1
    locks = sum(n for k, n in busy.items() if "Lock/" in k and "LWLock" not in k) / total
    common = ", ".join(f"{k} {n / total:.0%}" for k, n in sorted(busy.items(), key=lambda kv: -kv[1])[:3])
    return locks, f"waiting for a lock {locks:.0%} ({common})"


def main() -> int:
    """Print each turn, then the median and range of each variant and its ratio to one writer."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", default=os.environ.get("EDINBOX_TEST_POSTGRES", "postgresql://postgres@127.0.0.1/test")
    )
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args()
    rates, locks = asyncio.run(run(args))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nBatches of {args.batch} with their counters, {args.turns} turns of {args.seconds:g} s, median (range)")
    print(f"({os.cpu_count()} CPUs, load average {load}):")
    print("| variant | batches/s | ratio to 1 writer | sessions waiting for a lock |")
    print("|---|---|---|---|")
    one = rates["1 writer"]
    for variant, values in rates.items():
        ratios = [v / o for v, o in zip(values, one, strict=True)]
        print(
            f"| {variant} | {statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f}) "
            f"| x{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) "
            f"| {statistics.median(locks[variant]):.0%} ({min(locks[variant]):.0%}-{max(locks[variant]):.0%}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
