"""Spool source benchmark: does the backlog slow the spool down? Measured side by side in one run.

For each backlog (1,000 and 20,000 files waiting in `inbound/`), a fresh spool is filled, then `SpoolSource` receives
batches (of the hub's default size, unless `--batch` sets one) and acks each file (the moves to `archive/`) until the
first 1,000 files are settled (first table), and until the whole backlog is settled (second table); no database, so the
spool's own cost is all that is measured. Backlogs take turns round by round, so the load of other processes on a shared
machine hits them alike; the best round of each is compared. A spool whose cost per file does not grow with the backlog
shows ratios near 1. With `--hub`, a third table: the hub itself (parse, journal, invoices on an SQLite file) settling
its first 1,000 deliveries of generated invoice traffic with 1,000 and with 20,000 files waiting. With `--vs-parse`, the
hub on 1,000 waiting files against the parser alone (parse, key and invoice extraction of the same files, no I/O): each
round measures both side by side, the one first that went second the round before, and gives one ratio; the table shows
the median and the range of the rounds' ratios, and a last line the same for their CPU time per file (the hub's process,
every thread, against parsing alone: less moved by other processes than rates on a busy machine). `--db` runs that hub
on PostgreSQL (a fresh schema per round, dropped after it) instead of an SQLite file; `--no-keep-payloads` runs it
with the hub's `keep_payloads` off (no message store).

`--cpu` adds the spool's least CPU time per file (this process, receive + ack) for each backlog.

Run: .venv/bin/python -m bench.spool [--rounds 3] [--measure 1000] [--backlogs 1000,20000] [--no-whole] [--cpu] [--hub]
    [--vs-parse [--db postgresql://postgres@127.0.0.1:5432/test] [--no-keep-payloads]]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from edinbox import edi
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.database import open_inbox
from edinbox.hub.demo._traffic import generate
from edinbox.hub.ops import init
from edinbox.sources.spool import SpoolSource, file_name

HUB_BATCH = HubConfig.model_fields["batch_size"].default
"""The hub's default batch size: what the spool and the hub are measured with unless `--batch` says otherwise."""
PAYLOAD = b"UNA:+.? 'UNB+UNOC:3+SENDER:14+RECEIVER:14+261130:1200+1'" + b"x" * 900 + b"UNZ+1+1'"


def fill(root: Path, count: int) -> None:
    """Write `count` files into `inbound/` the way `publish` names them (without its fsync, to set up quickly)."""
    inbound = root / "inbound"
    inbound.mkdir(parents=True)
    for i in range(count):
        (inbound / file_name(f"m{i:06d}")).write_bytes(PAYLOAD)


async def drain(root: Path, measure: int, batch: int, *, cpu: list[float] | None = None) -> float:
    """Receive and ack the first `measure` files; return files per second (and append the CPU seconds per file of
    this process to `cpu`)."""
    async with SpoolSource(root, consumer="bench") as source:
        done = 0
        started, used = time.perf_counter(), time.process_time()
        while done < measure:
            got = await source.receive(max_messages=min(batch, measure - done), timeout=1.0)
            if not got:
                raise RuntimeError(f"the spool ran dry after {done} files")
            for delivery in got:
                await source.ack(delivery)
            done += len(got)
        if cpu is not None:
            cpu.append((time.process_time() - used) / done)
        return done / (time.perf_counter() - started)


async def through_hub(
    root: Path,
    measure: int,
    batch: int,
    *,
    db: str = "",
    schema: str = "",
    cpu: list[float] | None = None,
    keep_payloads: bool = True,
) -> float:
    """Run the hub on the spool (an SQLite file beside it, or `db` with its tables in `schema`) until `measure`
    deliveries are settled; return their rate (and append the process's CPU seconds for them to `cpu`)."""
    if db:
        config = HubConfig(
            db=db, table=f"{schema}.inbox", source=f"dir://{root}", batch_size=batch, keep_payloads=keep_payloads
        )
    else:
        url = f"sqlite:///{root / 'hub.db'}"
        config = HubConfig(db=url, source=f"dir://{root}", batch_size=batch, keep_payloads=keep_payloads)
    async with open_inbox(config) as inbox:
        await init(inbox, config=config)  # the operator's `edinbox init`: the hub runs no DDL
    async with open_hub(config) as hub:
        done = 0
        started, used = time.perf_counter(), time.process_time()
        while done < measure:
            done += await hub.step()
        if cpu is not None:
            cpu.append(time.process_time() - used)
        return done / (time.perf_counter() - started)


def fill_traffic(root: Path, count: int, traffic: list[tuple[str, bytes]]) -> None:
    """Write `count` files of generated invoice traffic into `inbound/` (each a distinct delivery)."""
    inbound = root / "inbound"
    inbound.mkdir(parents=True)
    for i in range(count):
        message_id, payload = traffic[i % len(traffic)]
        (inbound / file_name(f"{message_id}-{i}")).write_bytes(payload)


def parse_rate(traffic: list[tuple[str, bytes]], measure: int) -> float:
    """Parse, key and extract the invoices of the first `measure` files of the traffic; return files per second."""
    payloads = [traffic[i % len(traffic)][1] for i in range(measure)]
    started = time.perf_counter()
    for payload in payloads:
        with contextlib.suppress(edi.EdiSyntaxError):  # the traffic's broken files, as the hub parks them
            for interchange in edi.parse(payload):
                if interchange.keyable:
                    interchange.message()
                    interchange.invoices()
    return measure / (time.perf_counter() - started)


def vs_parse(
    traffic: list[tuple[str, bytes]], rounds: int, measure: int, batch: int, *, db: str = "", keep_payloads: bool = True
) -> list[tuple[float, float, float]]:
    """Each round's hub rate (1,000 files waiting), parse-alone rate, and the ratio of their CPU time per file
    (parse alone over hub, all the process's threads), measured side by side in alternating order (the hub first
    in even rounds, parsing first in odd ones)."""
    results = []
    workdir = Path(tempfile.mkdtemp(prefix="bench-spool-"))
    try:
        for round_ in range(rounds):
            root = workdir / f"r{round_}"
            fill_traffic(root, max(measure, 1000), traffic)
            schema = f"bench_spool_{os.getpid()}_{round_}"
            cpu: list[float] = []
            if round_ % 2:
                parser, parse_cpu = _timed_parse(traffic, measure)
            try:
                hub = asyncio.run(
                    through_hub(root, measure, batch, db=db, schema=schema, cpu=cpu, keep_payloads=keep_payloads)
                )
            finally:
                if db:
                    _drop_schema(db, schema)
            if not round_ % 2:
                parser, parse_cpu = _timed_parse(traffic, measure)
            results.append((hub, parser, parse_cpu / cpu[0]))
            shutil.rmtree(root)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def _timed_parse(traffic: list[tuple[str, bytes]], measure: int) -> tuple[float, float]:
    """`parse_rate`, and the CPU seconds it took."""
    used = time.process_time()
    rate = parse_rate(traffic, measure)
    return rate, time.process_time() - used


def _drop_schema(url: str, schema: str) -> None:
    """Drop a round's PostgreSQL schema and the journal and hub tables in it."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> int:
    """Run the rounds and print one table of rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--measure", type=int, default=1000, help="files settled per round [1000]")
    parser.add_argument(
        "--batch", type=int, default=None, help=f"deliveries per receive [the hub's default, {HUB_BATCH}]"
    )
    parser.add_argument("--backlogs", default="1000,20000")
    parser.add_argument("--no-whole", dest="whole", action="store_false", help="skip draining whole backlogs")
    parser.add_argument("--hub", action="store_true", help="also measure the hub itself on an SQLite file")
    parser.add_argument("--vs-parse", action="store_true", help="the hub against parsing alone, same files")
    parser.add_argument("--db", default="", help="with --vs-parse: a PostgreSQL URL for the hub [an SQLite file]")
    parser.add_argument("--cpu", action="store_true", help="also print the spool's least CPU time per file")
    parser.add_argument(
        "--no-keep-payloads", dest="keep_payloads", action="store_false", help="with --vs-parse: the hub keeps none"
    )
    args = parser.parse_args()
    backlogs = [int(b) for b in args.backlogs.split(",")]
    batch = args.batch or HUB_BATCH
    cpu: dict[int, list[float]] = {b: [] for b in backlogs}
    first = _measure(backlogs, args.rounds, batch, lambda _: args.measure, cpu=cpu if args.cpu else None)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Spool receive + ack, batch {batch}, best of {args.rounds} alternating rounds")
    print(f"({os.cpu_count()} CPUs, load average {load}); the first {args.measure:,} files of each backlog:")
    _table(backlogs, first)
    if args.cpu:  # the process's own CPU time: less moved than rates by other processes on a shared machine
        least = ", ".join(f"{b:,} waiting {min(cpu[b]) * 1e6:.0f} us" for b in backlogs)
        print(f"CPU time per file (receive + ack, least of the rounds): {least}")
    if args.whole:
        whole = _measure(backlogs, args.rounds, batch, lambda backlog: backlog)
        print("\nthe whole backlog, drained to empty:")
        _table(backlogs, whole)
    if args.hub:
        traffic = list(generate(2000, duplicate_rate=0.0, seed=1).files)
        hub = _measure(backlogs, args.rounds, batch, lambda _: args.measure, traffic=traffic)
        print(f"\nthrough the hub (SQLite file), the first {args.measure:,} deliveries:")
        _table(backlogs, hub, unit="msg/s")
    if args.vs_parse:
        traffic = list(generate(2000, duplicate_rate=0.0, seed=1).files)
        turns = vs_parse(traffic, args.rounds, args.measure, batch, db=args.db, keep_payloads=args.keep_payloads)
        hubs, parsers = [h for h, _, _ in turns], [p for _, p, _ in turns]
        ratios = sorted(h / p for h, p, _ in turns)
        cpu = sorted(c for _, _, c in turns)
        where = ("PostgreSQL" if args.db else "SQLite file") + ("" if args.keep_payloads else ", keep_payloads off")
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"\nthe hub (batch {batch}) against parsing alone, the first {args.measure:,} files of the same traffic,")
        print(f"{len(turns)} rounds side by side in alternating order (load average {load}); medians [range]:")
        print("| what | rate | ratio to parsing alone |")
        print("|---|---|---|")
        print(f"| parse + key + invoice extraction | {_spread(parsers)} files/s | x1.00 |")
        print(
            f"| hub (spool, {where}) | {_spread(hubs)} msg/s "
            f"| x{statistics.median(ratios):.2f} [{ratios[0]:.2f}-{ratios[-1]:.2f}] |"
        )
        print(
            f"CPU time per file, parsing alone over the hub (all its threads): x{statistics.median(cpu):.2f} "
            f"[{cpu[0]:.2f}-{cpu[-1]:.2f}]"
        )
    return 0


def _spread(rates: list[float]) -> str:
    """A rate's median and range over the rounds."""
    return f"{statistics.median(rates):,.0f} [{min(rates):,.0f}-{max(rates):,.0f}]"


def _table(backlogs: list[int], best: dict[int, float], *, unit: str = "files/s") -> None:
    print(f"| files waiting | rate | ratio to {backlogs[0]:,} waiting |")
    print("|---|---|---|")
    for backlog in backlogs:
        print(f"| {backlog:,} | {best[backlog]:,.0f} {unit} | x{best[backlog] / best[backlogs[0]]:.2f} |")


def _measure(
    backlogs: list[int],
    rounds: int,
    batch: int,
    settle: Callable[[int], int],
    *,
    traffic: list[tuple[str, bytes]] | None = None,
    cpu: dict[int, list[float]] | None = None,
) -> dict[int, float]:
    """The best rate of each backlog over alternating rounds, settling `settle(backlog)` files per round (through
    the hub when `traffic` is given)."""
    best = dict.fromkeys(backlogs, 0.0)
    workdir = Path(tempfile.mkdtemp(prefix="bench-spool-"))
    try:
        for round_ in range(rounds):
            order = backlogs if round_ % 2 == 0 else backlogs[::-1]
            for backlog in order:
                root = workdir / f"r{round_}-{backlog}"
                if traffic is None:
                    fill(root, backlog)
                    rate = asyncio.run(drain(root, settle(backlog), batch, cpu=None if cpu is None else cpu[backlog]))
                else:
                    fill_traffic(root, backlog, traffic)
                    rate = asyncio.run(through_hub(root, settle(backlog), batch))
                best[backlog] = max(best[backlog], rate)
                shutil.rmtree(root)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return best


if __name__ == "__main__":
    sys.exit(main())
