"""Scaling out: 1 hub process against 4 on one RabbitMQ queue and one PostgreSQL journal, side by side in one run.

    .venv/bin/python -m bench.hubs [--messages 3000] [--rounds 2] [--hubs 1,4] [--batch-size 20]

Each round starts the hub processes (`edinbox run --once`) on a fresh quorum queue and a fresh journal schema, waits
until all of them consume, then publishes the same fresh invoice interchanges; so start-up is left out. The rate is
the journal's own clock: messages over the span from the first row received to the last one settled. Variants
alternate round by round; the best round of each is compared. Also printed: the CPU seconds the hub processes used
per 1,000 messages (less what a hub that starts and idles uses, measured once), the machine's CPU use during the
round (hubs, PostgreSQL and RabbitMQ share its cores), and what the hubs' database sessions were doing (sampled from
pg_stat_activity every 20 ms: on CPU, waiting for a lock or the WAL flush, or idle while the hub parses and talks
to the broker).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from datetime import date, timedelta
from decimal import Decimal

import aio_pika
import psycopg
from psycopg import sql

from edinbox.hub._generate import PARTNERS, Doc, render
from edinbox.sources.rabbitmq import publish

BROKER = "amqp://guest:guest@127.0.0.1/"
CLI = [sys.executable, "-c", "from edinbox.cli import main; main()"]


def traffic(count: int, *, seed: int) -> list[tuple[str, bytes]]:
    """`count` distinct invoice interchanges of the demo partners, with rising control numbers per partner."""
    rng = random.Random(seed)
    payloads = []
    for n in range(count):
        partner = PARTNERS[n % len(PARTNERS)]
        control = f"{100000 + n:09d}" if partner.standard == "X12" else f"IC{100000 + n}"
        lines = tuple((rng.randint(1, 9), Decimal(rng.randint(100, 9999)) / 100) for _ in range(rng.randint(1, 4)))
        doc = Doc(partner, control, "invoice", f"S{n:06d}", date(2026, 11, 1) + timedelta(days=n % 28), lines=lines)
        payloads.append((f"bench-{n}", render(doc)))
    return payloads


def busy() -> tuple[float, float]:
    """The machine's (busy, total) CPU jiffies so far, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [float(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


class Waits(threading.Thread):
    """Samples what the hubs' PostgreSQL sessions are doing (state and wait event) until stopped."""

    def __init__(self, url: str, schema: str) -> None:
        """Watch the sessions whose last statement names `schema`."""
        super().__init__(daemon=True)
        self.url = url
        self.pattern = f"%{schema}%"
        self.seen: Counter[str] = Counter()
        self.done = threading.Event()

    def run(self) -> None:
        """Sample every 20 ms."""
        with psycopg.connect(self.url, autocommit=True) as connection:
            while not self.done.wait(0.02):
                for state, kind, event in connection.execute(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
                    "WHERE query LIKE %s AND pid <> pg_backend_pid()",
                    [self.pattern],
                ):
                    self.seen[f"{state}: {kind}/{event}" if event else f"{state}: on CPU"] += 1

    def top(self) -> str:
        """The commonest states, as shares of all samples."""
        total = sum(self.seen.values()) or 1
        return ", ".join(f"{what} {n / total:.0%}" for what, n in self.seen.most_common(4))


def one_round(
    url: str, payloads: list[tuple[str, bytes]], *, hubs: int, batch_size: int
) -> tuple[float, float, float, str]:
    """Start `hubs` processes, publish once all consume, wait until they drained the queue; return (msg/s, hub CPU
    seconds, machine CPU use, what the hubs' database sessions were doing)."""
    name = "scale" + uuid.uuid4().hex[:10]
    source = f"{BROKER}?queue={name}&queue_type=quorum"
    db = ["--db", url, "--table", f"{name}.inbox", "--consumer", "hub"]
    subprocess.run([*CLI, "init", *db], check=True, capture_output=True)
    args = [*CLI, "run", "--source", source, *db, "--once", "--idle-timeout", "5", "--batch-size", str(batch_size)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    before = busy()
    waits = Waits(url, name)
    waits.start()
    cpu = 0.0
    with tempfile.TemporaryFile() as log:  # a pipe left unread would fill up and stop the hub
        processes = [subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=log) for _ in range(hubs)]
        while asyncio.run(_consumers(name)) < hubs:  # every hub started and consuming: start-up is left out
            if any(process.poll() is not None for process in processes):
                break
            time.sleep(0.1)
        asyncio.run(publish(source, payloads))
        for process in processes:
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            cpu += usage.ru_utime + usage.ru_stime
        if any(process.returncode != 0 for process in processes):
            log.seek(0)
            raise RuntimeError(f"a hub failed: {log.read().decode()[-2000:]}")
    after = busy()
    waits.done.set()
    waits.join()
    try:
        with psycopg.connect(url, autocommit=True) as connection:
            row = connection.execute(
                sql.SQL("SELECT count(*), extract(epoch FROM max(settled_at) - min(received_at)) FROM {}").format(
                    sql.Identifier(name, "inbox")
                )
            ).fetchone()
            connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    finally:
        asyncio.run(drop_queue(name))
    assert row is not None
    done, span = int(row[0]), float(row[1])
    if done != len(payloads):
        raise RuntimeError(f"{done} of {len(payloads)} messages in the journal")
    use = (after[0] - before[0]) / (after[1] - before[1])
    return done / span, cpu, use, waits.top()


async def _consumers(queue: str) -> int:
    """Consumers subscribed to a queue (0 while it does not exist yet)."""
    connection = await aio_pika.connect(BROKER)
    async with connection:
        channel = await connection.channel()
        try:
            declared = await channel.declare_queue(queue, passive=True)
        except aio_pika.exceptions.ChannelClosed:
            return 0
        return declared.declaration_result.consumer_count or 0


def idle_cpu(url: str) -> float:
    """The CPU seconds of one hub that starts, finds its queue empty and exits (start-up, and the idle wait)."""
    name = "scale" + uuid.uuid4().hex[:10]
    db = ["--db", url, "--table", f"{name}.inbox", "--consumer", "hub"]
    subprocess.run([*CLI, "init", *db], check=True, capture_output=True)
    source = f"{BROKER}?queue={name}&queue_type=quorum"
    process = subprocess.Popen(
        [*CLI, "run", "--source", source, *db, "--once", "--idle-timeout", "5"], stderr=subprocess.DEVNULL
    )
    _, _, usage = os.wait4(process.pid, 0)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    asyncio.run(drop_queue(name))
    return usage.ru_utime + usage.ru_stime


async def drop_queue(name: str) -> None:
    """Delete a benchmark's queue, its dead-letter queue and exchange."""
    connection = await aio_pika.connect(BROKER)
    async with connection:
        channel = await connection.channel()
        for each in (name, f"{name}.dead"):
            await channel.queue_delete(each)
        await channel.exchange_delete(f"{name}.dead")


def main() -> int:
    """Alternate the variants round by round and print the best rate of each and its ratio to the first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", default=os.environ.get("EDINBOX_TEST_POSTGRES", "postgresql://postgres@127.0.0.1/test")
    )
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hubs", default="1,4")
    parser.add_argument("--batch-size", type=int, default=20)
    args = parser.parse_args()
    counts = [int(h) for h in args.hubs.split(",")]
    payloads = traffic(args.messages, seed=1)
    idle = idle_cpu(args.url)
    best: dict[int, tuple[float, float, float, str]] = {}
    for _ in range(args.rounds):
        for hubs in counts:
            rate, cpu, use, sessions = one_round(args.url, payloads, hubs=hubs, batch_size=args.batch_size)
            result = (rate, 1000 * max(cpu - hubs * idle, 0.0) / args.messages, use, sessions)
            print(
                f"  {hubs} hub(s): {result[0]:,.0f} msg/s, {result[1]:.2f} hub CPU s per 1,000 msgs, "
                f"machine {result[2]:.0%} busy; sessions: {result[3]}",
                flush=True,
            )
            if hubs not in best or result[0] > best[hubs][0]:
                best[hubs] = result
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{args.messages:,} invoices on one RabbitMQ queue, one PostgreSQL journal, batch {args.batch_size}, ")
    print(f"best of {args.rounds} alternating rounds ({os.cpu_count()} CPUs, load average {load}):")
    print("| hubs | rate | ratio to 1 hub | hub CPU s per 1,000 msgs | machine CPU busy |")
    print("|---|---|---|---|---|")
    for hubs in counts:
        rate, cpu, use, _ = best[hubs]
        print(f"| {hubs} | {rate:,.0f} msg/s | x{rate / best[counts[0]][0]:.2f} | {cpu:.2f} | {use:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
