"""Scaling out: 1 hub process against 2 and 4 on one RabbitMQ queue and one PostgreSQL journal, side by side in one run.

    .venv/bin/python -m bench.hubs [--messages 6000] [--turns 3] [--hubs 1,4] [--batch-size N] [--prefetch N]

Without `--batch-size` and `--prefetch` the hubs run with their defaults (what users get).

Each round fills a fresh quorum queue with the same fresh invoice interchanges, then starts the hub processes
(`edinbox run --once`) on it and on a fresh journal schema. The measured window opens when every hub consumes (so
start-up and publishing are left out) and closes when the journal holds every message; the rate is the messages
settled inside the window over its length. Variants alternate turn by turn; the median and range of each are
printed, and the ratio of each turn to the 1-hub round of the same turn.

Where the time goes, over the same window:
- CPU seconds per 1,000 messages of the hub processes, of their PostgreSQL sessions, of PostgreSQL's background
  processes (WAL writer, checkpointer, ...), of RabbitMQ (beam.smp, shared with whatever else uses the broker), of
  this process, and of everything else on the machine (other work sharing the cores), from /proc;
- what the hubs' database sessions were doing, sampled from pg_stat_activity every 50 ms, as session-milliseconds
  per message: on CPU, waiting for a lock (and on which statement: the counters, the journal, ...), in COMMIT
  (the WAL flush), or idle in or out of their transaction while the hub parses and talks to the broker;
- the WAL flushes (`pg_stat_wal.wal_sync`, server-wide) per 1,000 messages.
From the 1-hub rounds it prints the ceiling two cores allow: 2 cores over the CPU a message costs (hub, its
sessions, PostgreSQL's background work and RabbitMQ), as a rate and as a ratio to one hub.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import aio_pika
import psycopg
from psycopg import sql

from edinbox.hub.demo._traffic import PARTNERS, Doc, render
from edinbox.sources.rabbitmq import publish

BROKER = "amqp://guest:guest@127.0.0.1/"
CLI = [sys.executable, "-c", "from edinbox.cli import main; main()"]
TICK = os.sysconf("SC_CLK_TCK")
SAMPLE = 0.05
"""Seconds between two samples of the sessions."""
FMT = "{:.2f}"
PARTS = ("hubs", "sessions", "pg background", "rabbitmq", "bench", "others")


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


def machine() -> float:
    """The machine's busy CPU seconds so far (all cores), from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [float(x) for x in stat.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / TICK


def processes() -> dict[int, tuple[str, float]]:
    """Every process's (command, CPU seconds so far), from /proc/<pid>/stat."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        found[int(entry.name)] = (comm, (float(fields[11]) + float(fields[12])) / TICK)
    return found


def what(query: str) -> str:
    """The statement a session runs, by the table it names (or COMMIT)."""
    text = query.lstrip()
    if text.upper().startswith("COMMIT"):
        return "COMMIT"
    for table in ("edinbox_hub_counters", "edinbox_hub_invoices", "edinbox_hub_rejected", "edinbox_hub_", "inbox"):
        if f'"{table}' in text or f".{table}" in text:
            return "journal" if table == "inbox" else table
    return text.split(None, 1)[0].upper() if text else "?"


class Sessions(threading.Thread):
    """Samples what the hubs' PostgreSQL sessions are doing until stopped; also finds their server processes."""

    def __init__(self, url: str, schema: str) -> None:
        """Watch the sessions that ran a statement naming `schema`."""
        super().__init__(daemon=True)
        self.url = url
        self.pattern = f"%{schema}%"
        self.seen: Counter[str] = Counter()
        self.samples = 0
        self.pids: set[int] = set()
        self.exclude: set[int] = set()
        """Sessions of this process (its own reads name the schema too)."""
        self.background: set[int] = set()
        self.recording = threading.Event()
        self.done = threading.Event()

    def run(self) -> None:
        """Sample every SAMPLE seconds; count only while recording."""
        with psycopg.connect(self.url, autocommit=True) as connection:
            self.background = {
                int(pid)
                for (pid,) in connection.execute(
                    "SELECT pid FROM pg_stat_activity WHERE backend_type NOT IN ('client backend', 'walsender')"
                )
            }
            while not self.done.wait(SAMPLE):
                rows = connection.execute(
                    "SELECT pid, state, wait_event_type, wait_event, query, query LIKE %s FROM pg_stat_activity "
                    "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
                    [self.pattern],
                ).fetchall()
                # a session is the hubs' once a statement of it named the schema (its COMMIT does not)
                self.pids.update(int(row[0]) for row in rows if row[5] and row[0] not in self.exclude)
                rows = [row[:5] for row in rows if row[0] in self.pids]
                if not self.recording.is_set():
                    continue
                self.samples += 1
                for _, state, kind, event, query in rows:
                    doing = "on CPU" if event is None else f"{kind}/{event}"
                    if state == "active":
                        self.seen[f"{what(query)}: {doing}"] += 1
                    else:
                        self.seen[f"{state}: {doing}"] += 1

    def per_message(self, window: float, messages: int) -> dict[str, float]:
        """Session-milliseconds per message of each activity seen while recording."""
        each = window / max(self.samples, 1)
        return {k: 1000 * n * each / messages for k, n in self.seen.most_common()}


@dataclass
class Round:
    """What one round measured."""

    hubs: int
    rate: float
    window: float
    messages: int
    cpu: dict[str, float]
    """CPU seconds per 1,000 messages of each part (PARTS)."""
    busy: float
    """The machine's CPU use over the window (1.0: every core busy)."""
    sessions: dict[str, float]
    syncs: float
    """WAL flushes per 1,000 messages, server-wide."""
    per_hub: list[float] = field(default_factory=list)
    """Cores each hub process used over the window."""


def one_round(
    url: str, payloads: list[tuple[str, bytes]], *, hubs: int, batch_size: int | None, prefetch: int | None
) -> Round:
    """Fill a queue, start `hubs` processes on it, measure from the moment all consume until the journal holds
    every message, wait for the hubs to exit."""
    name = "scale" + uuid.uuid4().hex[:10]
    source = f"{BROKER}?queue={name}&queue_type=quorum" + (f"&prefetch={prefetch}" if prefetch else "")
    db = ["--db", url, "--table", f"{name}.inbox", "--consumer", "hub"]
    subprocess.run([*CLI, "init", *db], check=True, capture_output=True)
    asyncio.run(publish(source, payloads))
    args = [*CLI, "run", "--source", source, *db, "--once", "--idle-timeout", "5"]
    args += ["--batch-size", str(batch_size)] if batch_size else []
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    sessions = Sessions(url, name)
    sessions.start()
    journal = sql.Identifier(name, "inbox")
    try:
        with psycopg.connect(url, autocommit=True) as connection:
            sessions.exclude.add(connection.info.backend_pid)
            log = open(os.devnull, "wb")  # noqa: SIM115 - closed below, after the hubs exit
            started = [subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=log) for _ in range(hubs)]
            while asyncio.run(_consumers(name)) < hubs:  # every hub started and consuming: start-up is left out
                if any(process.poll() is not None for process in started):
                    raise RuntimeError("a hub exited before consuming")
                time.sleep(0.05)
            first, before, wal, opened = _snapshot(connection, journal)
            sessions.recording.set()
            while True:
                time.sleep(0.1)
                last, after, wal_after, closed = _snapshot(connection, journal)
                if last >= len(payloads):
                    break
                if any(process.poll() is not None for process in started):
                    raise RuntimeError("a hub exited before the queue was drained")
            sessions.recording.clear()
            for process in started:
                process.wait()
            log.close()
            if any(process.returncode != 0 for process in started):
                raise RuntimeError("a hub failed")
            connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    finally:
        sessions.done.set()
        sessions.join()
        asyncio.run(drop_queue(name))
    window, messages = closed[0] - opened[0], last - first
    cpu = _split(before, after, hubs=[p.pid for p in started], sessions=sessions)
    cpu["others"] = (closed[1] - opened[1]) - sum(cpu.values())
    return Round(
        hubs=hubs,
        rate=messages / window,
        window=window,
        messages=messages,
        cpu={part: 1000 * seconds / messages for part, seconds in cpu.items()},
        busy=(closed[1] - opened[1]) / window / (os.cpu_count() or 1),
        sessions=sessions.per_message(window, messages),
        syncs=1000 * (wal_after - wal) / messages,
        per_hub=[(after[p.pid][1] - before.get(p.pid, ("", 0.0))[1]) / window for p in started if p.pid in after],
    )


def _snapshot(
    connection: psycopg.Connection[tuple[object, ...]], journal: sql.Identifier
) -> tuple[int, dict[int, tuple[str, float]], int, tuple[float, float]]:
    """(rows in the journal, every process's CPU, WAL flushes so far, (wall clock, machine busy CPU seconds))."""
    row = connection.execute(
        sql.SQL("SELECT (SELECT count(*) FROM {}), (SELECT wal_sync FROM pg_stat_wal)").format(journal)
    ).fetchone()
    assert row is not None
    return int(str(row[0])), processes(), int(str(row[1])), (time.monotonic(), machine())


def _split(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], *, hubs: list[int], sessions: Sessions
) -> dict[str, float]:
    """CPU seconds each part used between two snapshots (a process absent before counts from zero)."""
    used = {part: 0.0 for part in PARTS if part != "others"}
    for pid, (comm, seconds) in after.items():
        earlier = before.get(pid)
        spent = seconds - earlier[1] if earlier is not None and earlier[0] == comm else seconds
        if pid in hubs:
            used["hubs"] += spent
        elif pid in sessions.pids:
            used["sessions"] += spent
        elif pid in sessions.background:
            used["pg background"] += spent
        elif comm == "beam.smp":
            used["rabbitmq"] += spent
        elif pid == os.getpid():
            used["bench"] += spent
    return used


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


async def drop_queue(name: str) -> None:
    """Delete a benchmark's queue, its dead-letter queue and exchange."""
    connection = await aio_pika.connect(BROKER)
    async with connection:
        channel = await connection.channel()
        for each in (name, f"{name}.dead"):
            await channel.queue_delete(each)
        await channel.exchange_delete(f"{name}.dead")


def _spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    """Median and range of `values`."""
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def _print_round(result: Round) -> None:
    cpu = ", ".join(f"{part} {seconds:.2f}" for part, seconds in result.cpu.items())
    hubs = "+".join(f"{core:.2f}" for core in result.per_hub)
    # a session idle outside a transaction is the hub's pool holding a spare connection: left out
    busy = [(k, v) for k, v in result.sessions.items() if not k.startswith("idle:")]
    waits = ", ".join(f"{k} {v:.2f}" for k, v in busy[:7])
    print(
        f"  {result.hubs} hub(s): {result.rate:,.0f} msg/s ({result.messages} in {result.window:.1f} s), machine "
        f"{result.busy:.0%} busy, hub cores {hubs}\n    CPU s per 1,000 msgs: {cpu}\n"
        f"    session ms per msg: {waits}; WAL flushes per 1,000 msgs {result.syncs:.0f}",
        flush=True,
    )


def report(rounds: list[Round], counts: list[int], args: argparse.Namespace) -> None:
    """Print the table of medians and ranges, the ratios to 1 hub turn by turn, and the 2-core ceiling."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    by = {h: [r for r in rounds if r.hubs == h] for h in counts}
    base = by[counts[0]]
    print(
        f"\n{args.messages:,} invoices on one RabbitMQ queue (quorum, prefetch {args.prefetch or 'default'}), one "
        f"PostgreSQL journal, batch {args.batch_size or 'default'}; {args.turns} alternating turns, median (range)"
    )
    print(f"({os.cpu_count()} CPUs, load average {load}):")
    parts = " | ".join(f"{p} CPU s/1k" for p in PARTS)
    print(f"| hubs | rate | ratio to 1 hub | {parts} | machine busy |")
    print("|---|---|---|" + "---|" * len(PARTS) + "---|")
    for hubs in counts:
        mine = by[hubs]
        ratios = [r.rate / b.rate for r, b in zip(mine, base, strict=True)]
        cpu = " | ".join(_spread([r.cpu[p] for r in mine], "{:.2f}") for p in PARTS)
        busy = _spread([100 * r.busy for r in mine], "{:.0f}") + " %"
        rate = _spread([r.rate for r in mine])
        print(f"| {hubs} | {rate} msg/s | x{_spread(ratios, '{:.2f}')} | {cpu} | {busy} |")
    pipeline = ("hubs", "sessions", "pg background", "rabbitmq")
    total = [sum(r.cpu[p] for p in pipeline) / 1000 for r in base]
    serial = [(r.cpu["hubs"] + r.cpu["sessions"]) / 1000 + _commit(r) / 1000 for r in base]
    alone = [1 / t for t in serial]
    shared = [len(os.sched_getaffinity(0)) / t for t in total]
    most = by[counts[-1]]
    crowded = [len(os.sched_getaffinity(0)) / (sum(r.cpu[p] for p in pipeline) / 1000) for r in most]
    print(
        f"\nCPU per message with 1 hub: {_spread([1000 * t for t in total], '{:.2f}')} ms "
        f"(hub {_spread([r.cpu['hubs'] for r in base], '{:.2f}')}, its sessions "
        f"{_spread([r.cpu['sessions'] for r in base], '{:.2f}')}, PostgreSQL background "
        f"{_spread([r.cpu['pg background'] for r in base], '{:.2f}')}, RabbitMQ "
        f"{_spread([r.cpu['rabbitmq'] for r in base], '{:.2f}')}); its commits waited "
        f"{_spread([_commit(r) for r in base], '{:.2f}')} ms per message.\n"
        f"Ceiling on free cores: one hub waits for its session's statements and commits, so it settles at most "
        f"1 / (hub + sessions + commit waits) = {_spread(alone)} msg/s; any number of hubs share the "
        f"{len(os.sched_getaffinity(0))} cores with the database and the broker: at most cores / total = "
        f"{_spread(shared)} msg/s; ratio at most x{_spread([b / a for a, b in zip(alone, shared, strict=True)], FMT)}."
        f"\nWith the CPU a message cost in the {counts[-1]}-hub rounds, the cores allow {_spread(crowded)} msg/s, "
        f"x{_spread([c / a for a, c in zip(alone, crowded, strict=True)], FMT)} one hub."
        f"\nHere one hub got {_spread([r.per_hub[0] for r in base], '{:.2f}')} of a core, and the hub, its database "
        f"and the broker {_spread([t * r.rate for t, r in zip(total, base, strict=True)], '{:.2f}')} of the "
        f"{os.cpu_count()} cores: the rest went to other work on the machine."
    )


def _commit(result: Round) -> float:
    """Session-milliseconds per message spent in COMMIT (the WAL flush and waits for it)."""
    return sum(v for k, v in result.sessions.items() if k.startswith("COMMIT:"))


def main() -> int:
    """Alternate the variants turn by turn and print each round, then medians, ranges and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", default=os.environ.get("EDINBOX_TEST_POSTGRES", "postgresql://postgres@127.0.0.1/test")
    )
    parser.add_argument("--messages", type=int, default=6000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--hubs", default="1,4")
    parser.add_argument("--batch-size", type=int, default=None, help="the hubs' batch_size [their default]")
    parser.add_argument("--prefetch", type=int, default=None, help="the source URL's prefetch [the default]")
    args = parser.parse_args()
    counts = [int(h) for h in args.hubs.split(",")]
    payloads = traffic(args.messages, seed=1)
    rounds = []
    for turn in range(args.turns):
        print(f"turn {turn + 1} (load average {os.getloadavg()[0]:.2f}):", flush=True)
        for hubs in counts:
            result = one_round(args.url, payloads, hubs=hubs, batch_size=args.batch_size, prefetch=args.prefetch)
            _print_round(result)
            rounds.append(result)
    report(rounds, counts, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
