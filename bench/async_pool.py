"""AsyncInbox with 8 concurrent tasks on its default pool against a bare psycopg pool of 8, side by side in one run.

    .venv/bin/python -m bench.async_pool [--url postgresql://...] [--tasks 8] [--turns 30] [--chunk 10]

Each variant runs `--tasks` asyncio tasks at once, each settling `--chunk` fresh messages one transaction at a time:
"bare pool of 8" is a hand-written inbox on `psycopg_pool.AsyncConnectionPool(min_size=8, max_size=8)` (journal
INSERT ... ON CONFLICT DO NOTHING, the business INSERT, COMMIT); "AsyncInbox, defaults" is `AsyncInbox(url)` with
the same business INSERT in its handler; "AsyncInbox, pool_size=4" is the former default. The variants take turns
(order rotated every turn) so the load of other processes on a shared machine hits them alike. Target: the defaults
at 0.9x or more of the bare pool.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import psycopg_pool

from edinbox import AsyncInbox, Message

CONSUMER = "bench"
Variant = Callable[[list[Message]], Awaitable[None]]


async def main(url: str, *, tasks: int, turns: int, chunk: int) -> None:
    """Create the tables, run the variants turn by turn, print the rates and their ratios to the bare pool."""
    schema = f"bench_pool_{uuid.uuid4().hex[:8]}"  # every table of the run in one fresh schema, dropped after
    table = f"{schema}.inbox"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as setup:
        await setup.execute(f"CREATE SCHEMA {schema}".encode())
        await setup.execute(f"CREATE TABLE {schema}.business (message_id text NOT NULL, body bytea)".encode())
        await setup.execute(
            f"CREATE TABLE {schema}.naive (consumer text NOT NULL, source text NOT NULL, message_id text NOT NULL, "
            f"received_at timestamptz NOT NULL DEFAULT now(), UNIQUE (consumer, source, message_id))".encode()
        )
    business = f"INSERT INTO {schema}.business (message_id, body) VALUES (%s, %s)".encode()
    journal = f"INSERT INTO {schema}.naive (consumer, source, message_id) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
    bare_pool = psycopg_pool.AsyncConnectionPool(url, min_size=8, max_size=8, open=False)
    await bare_pool.open(wait=True)
    defaults = AsyncInbox(url, consumer=CONSUMER, table=table)
    await defaults.create_schema()
    four = AsyncInbox(url, consumer=CONSUMER, table=table, pool_size=4)

    async def bare(messages: list[Message]) -> None:
        for m in messages:
            async with bare_pool.connection() as conn, conn.transaction():
                cursor = await conn.execute(journal.encode(), (CONSUMER, m.source, m.message_id))
                if cursor.rowcount == 1:
                    await conn.execute(business, (m.message_id, m.payload))

    async def handler(tx: Any, m: Message) -> None:
        await tx.connection.execute(business, (m.message_id, m.payload))

    def through(inbox: AsyncInbox) -> Variant:
        async def run(messages: list[Message]) -> None:
            for m in messages:
                await inbox.process(m, handler)

        return run

    variants: dict[str, Variant] = {
        "bare pool of 8": bare,
        "AsyncInbox, defaults": through(defaults),
        "AsyncInbox, pool_size=4": through(four),
    }
    elapsed = dict.fromkeys(variants, 0.0)
    try:
        order = list(variants)
        for turn in range(turns + 1):  # turn 0 warms connections and prepared statements up, untimed
            order = order[1:] + order[:1]
            for name in order:
                work = [
                    [
                        Message(f"{name}-{turn}-{t}-{i}-{uuid.uuid4().hex[:6]}", "bench:pool", b"x" * 200)
                        for i in range(chunk)
                    ]
                    for t in range(tasks)
                ]
                started = time.perf_counter()
                await asyncio.gather(*(variants[name](messages) for messages in work))
                if turn:
                    elapsed[name] += time.perf_counter() - started
    finally:
        await bare_pool.close()
        await defaults.aclose()
        await four.aclose()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as setup:
            await setup.execute(f"DROP SCHEMA {schema} CASCADE".encode())
    total = turns * tasks * chunk
    first = next(iter(variants))
    print(f"{tasks} concurrent tasks, {total} messages per variant in {turns} interleaved turns, PostgreSQL (fsync on)")
    print(
        f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} (the machine is shared)"
    )
    for name, seconds in elapsed.items():
        rate = total / seconds
        print(f"  {name:<26} {rate:>8,.0f} msg/s  x{rate / (total / elapsed[first]):.2f} of {first}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.async_pool")
    parser.add_argument(
        "--url", default=os.environ.get("EDINBOX_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    )
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--chunk", type=int, default=10)
    options = parser.parse_args()
    asyncio.run(main(options.url, tasks=options.tasks, turns=options.turns, chunk=options.chunk))
