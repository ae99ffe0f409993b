"""Message store benchmark: the hub with `keep_payloads` on vs off side by side, the storage the kept payloads take,
and the search's latency over many kept interchanges.

Hub: generated invoice traffic (no duplicates) settled by the hub from a spool, batches of 20, on an SQLite file and
on PostgreSQL (a schema of its own), and with `--mariadb` on MariaDB (a database of its own), with the store off and
on; the modes take turns round by round so the load of other processes hits them alike; deliveries per second, best
and median round, and the store's cost as 1 - on / off. On SQLite a kept payload's words are indexed
after its settling transaction; `run(once=True)` indexes what is left before it returns, timed apart: "on, settling"
is the hub's rate while it settles (the index batches it ran on the way included), "on, index catch-up counted" adds
that last catch-up's time, and its cost per interchange is printed; the round then checks that nothing waits for the
index.

Storage: the bytes of the kept payloads' table with its indexes (SQLite: `dbstat` over `<journal>_payloads*`, the
FTS5 tables included; PostgreSQL: `pg_total_relation_size`, TOAST and indexes included) after the last "on" round,
per interchange, extrapolated to a million.

Search: `--search-rows` kept payloads written straight through the store's own statement (`payloads_keep`, 2,000 per
transaction) from the generated interchanges, each with a purchase order number of its own (`BEG`/`BGM` style
reference `PO<n>`); then `AsyncInbox.search` for `--searches` random PO numbers that exist and for one that does
not, median and worst, and for a word every kept interchange holds (the newest 20 of a million, not all of them).

The machine this runs on is shared: wall-clock rates of one mode move by 2x between rounds, so the hub process's CPU
time per delivery is given too (on PostgreSQL the server's own work is not in it).

`--keep-search NAME` keeps the filled search tables (PostgreSQL schema and MariaDB database NAME, SQLite file
NAME.db in the temporary folder's parent) and reuses them in the next run with that option: a million rows take
5-13 minutes to fill. Drop them by hand afterwards.

Run: .venv/bin/python -m bench.message_store [--messages 2000] [--rounds 3] [--search-rows 200000] [--searches 20]
     [--no-postgres] [--no-sqlite] [--mariadb] [--no-hub] [--no-search] [--keep-search NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import psycopg

from edinbox import AsyncInbox, Message
from edinbox._payloads import keep_params, search_text
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.database import on_inbox
from edinbox.hub.demo._traffic import generate
from edinbox.hub.ops import init
from edinbox.sources.spool import publish

POSTGRES = os.environ.get("EDINBOX_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
MARIADB = os.environ.get("EDINBOX_TEST_MARIADB", "mysql://root@127.0.0.1:3306/test")


def _config(root: Path, db: str, table: str, *, keep: bool) -> HubConfig:
    """The hub's settings for one round: a spool of its own, the store on or off."""
    return HubConfig(
        db=db, table=table, source=f"dir://{root / 'spool'}", batch_size=20, idle_timeout=0.2, keep_payloads=keep
    )


@dataclass(frozen=True, slots=True)
class Round:
    """One round's figures: the hub's time settling and its CPU, then the index catch-up's (the words of the
    payloads kept, indexed after their settling transactions: `run(once=True)` finishes it before it returns)."""

    settled: int
    seconds: float
    cpu: float
    index_seconds: float
    index_cpu: float

    def rate(self, *, with_index: bool) -> float:
        """Deliveries per second while settling, or with the catch-up's time counted too."""
        return self.settled / (self.seconds + (self.index_seconds if with_index else 0.0))

    def cpu_per(self, *, with_index: bool) -> float:
        """The hub process's CPU microseconds per delivery (what other processes on a shared machine change
        least), without or with the catch-up's."""
        return (self.cpu + (self.index_cpu if with_index else 0.0)) / self.settled * 1e6


async def hub_round(root: Path, db: str, table: str, files: list[tuple[str, bytes]], *, keep: bool) -> Round:
    """Settle `files` through the hub, the index catch-up at the end timed apart; check nothing waits for it."""
    config = _config(root, db, table, keep=keep)
    await on_inbox(config, lambda inbox: init(inbox, config=config))
    await publish(config.source, files)
    timed = [0.0, 0.0]
    started, cpu = time.perf_counter(), time.process_time()
    async with open_hub(config) as hub:
        finish = hub.indexer.finish

        async def timed_finish(stop: asyncio.Event) -> int:
            wall, used = time.perf_counter(), time.process_time()
            indexed = await finish(stop)
            timed[0], timed[1] = time.perf_counter() - wall, time.process_time() - used
            return indexed

        hub.indexer.finish = timed_finish  # type: ignore[method-assign]
        totals = await hub.run(once=True)
        assert await hub.inbox.index_payloads() == 0  # every kept payload is searchable when `run` returns
    cpu = time.process_time() - cpu - timed[1]
    elapsed = time.perf_counter() - started - config.idle_timeout - timed[0]  # the idle wait that ends `once`
    return Round(sum(totals.values()), elapsed, cpu, timed[0], timed[1])


async def kept_bytes(db: str, table: str) -> tuple[int, int]:
    """The kept payloads' rows and their table's bytes, indexes included."""
    async with AsyncInbox(db, consumer="accounting", table=table) as inbox:

        async def read(tx: Any) -> tuple[int, int]:
            name = f"{table}_payloads"
            if inbox.dialect == "mysql":
                cursor = await tx.connection.cursor()
                await cursor.execute(
                    "SELECT (SELECT count(*) FROM " + name + "), (SELECT data_length + index_length FROM "
                    "information_schema.tables WHERE table_schema = %s AND table_name = %s)",
                    tuple(name.split(".")),
                )
                count, size = await cursor.fetchone()
                return int(count), int(size)
            if inbox.dialect == "sqlite":
                cursor = await tx.connection.execute(
                    "SELECT (SELECT count(*) FROM " + f'"{name}"' + "), "
                    "(SELECT sum(pgsize) FROM dbstat WHERE name LIKE ? || '%')",
                    (name,),
                )
                count, size = await cursor.fetchone()
                return int(count), int(size)
            cursor = await tx.connection.execute(
                f"SELECT (SELECT count(*) FROM {name}), pg_total_relation_size(%s::regclass)", (name,)
            )
            count, size = await cursor.fetchone()
            return int(count), int(size)

        return await inbox.transaction(read)  # committed: MariaDB keeps no metadata lock behind


async def _analyze(name: str, tx: Any) -> None:
    """ANALYZE the table `name` (PostgreSQL or MariaDB) in `tx`."""
    if tx.dialect == "postgresql":
        await tx.connection.execute(f"ANALYZE {name}")
        return
    cursor = tx.connection.cursor()
    await cursor.execute(f"ANALYZE TABLE {name}")
    await cursor.fetchall()


def _po(payload: bytes, number: int) -> bytes:
    """The interchange with a purchase order reference of its own before its trailer (a value to search for), written
    with the interchange's own element separator and segment terminator."""
    for trailer in (b"IEA", b"UNZ"):
        at = payload.rfind(trailer)
        if at > 0:
            element, segment = payload[at + 3 : at + 4], payload[at - 1 : at]
            return payload[:at] + b"REF" + element + b"PO" + element + b"PO%09d" % number + segment + payload[at:]
    return payload + b" PO%09d" % number


async def fill(inbox: AsyncInbox, templates: list[bytes], rows: int, *, chunk: int = 2000) -> float:
    """Write `rows` kept payloads through `payloads_keep`, then index what waits (SQLite); seconds taken."""
    started = time.perf_counter()
    for start in range(0, rows, chunk):
        batch = [
            keep_params(
                inbox.consumer, Message(f"{i:09d}", "bench", _po(templates[i % len(templates)], i)), cap=1 << 22
            )
            for i in range(start, min(rows, start + chunk))
        ]
        await inbox.transaction(lambda tx, batch=batch: tx.unit.run_many("payloads_keep", batch))
    while await inbox.index_payloads():  # SQLite: the words indexed after the settling transactions
        pass
    return time.perf_counter() - started


async def search_latency(
    inbox: AsyncInbox, rows: int, searches: int, common: str
) -> tuple[list[float], float, int, float]:
    """Milliseconds of each search for an existing PO number, of one for a missing one, the hits found, and the
    milliseconds of a search for `common`, a word every kept interchange holds (the newest 20 of them)."""
    rng = random.Random(7)
    times, hits = [], 0
    for _ in range(searches):
        wanted = f"PO{rng.randrange(rows):09d}"
        started = time.perf_counter()
        found = await inbox.search(wanted)
        times.append((time.perf_counter() - started) * 1000)
        hits += len(found)
    started = time.perf_counter()
    assert await inbox.search("PO999999999") == []
    missing = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    newest = await inbox.search(common)
    assert len(newest) == 20  # from the last transaction of `fill` (its rows may share one kept_at)
    assert all(int(hit.message_id) >= rows - 2000 for hit in newest)
    return times, missing, hits, (time.perf_counter() - started) * 1000


def _schema(dialect: str = "postgresql") -> tuple[str, Callable[[], None]]:
    """A fresh PostgreSQL schema (or MariaDB database) and its drop."""
    schema = "bench_" + uuid.uuid4().hex[:10]
    if dialect == "mysql":
        import pymysql

        def mariadb(statement: str) -> None:
            connection = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)
            with connection, connection.cursor() as cursor:
                cursor.execute(statement)

        mariadb(f"CREATE DATABASE `{schema}`")
        return schema, lambda: mariadb(f"DROP DATABASE `{schema}`")
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"'.encode())

    def drop() -> None:
        with psycopg.connect(POSTGRES, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE'.encode())

    return schema, drop


def _paired(rounds: dict[bool, list[Round]]) -> str:
    """Each round with the store on against the round off of the same turn (run next to it, so under much the same
    load): the median and range of those ratios, the catch-up counted; less moved by a busy minute than the ratio of
    two medians."""
    pairs = zip(rounds[True], rounds[False], strict=True)
    ratios = sorted(on.rate(with_index=True) / off.rate(with_index=False) for on, off in pairs)
    if not ratios:
        return "paired: no rounds"
    return (
        f"paired rounds (on, index catch-up counted, against off in the same turn): "
        f"median x{statistics.median(ratios):.2f}, range x{ratios[0]:.2f}-x{ratios[-1]:.2f} over {len(ratios)} turns"
    )


async def measure_hub(args: argparse.Namespace, name: str, root: Path, files: list[tuple[str, bytes]]) -> None:
    """The hub's rate with the store off and on, rounds alternating; storage after the last round on."""
    rounds: dict[bool, list[Round]] = {False: [], True: []}
    drops: list[Callable[[], None]] = []
    last = ("", "")
    try:
        for turn in range(args.rounds):
            for keep in (False, True) if turn % 2 == 0 else (True, False):
                folder = Path(tempfile.mkdtemp(dir=root))
                if name == "sqlite":
                    db, table = f"sqlite:///{folder / 'hub.db'}", "inbox"
                else:
                    schema, drop = _schema()
                    drops.append(drop)
                    db, table = POSTGRES, f"{schema}.inbox"
                rounds[keep].append(await hub_round(folder, db, table, files, keep=keep))
                if keep:
                    last = (db, table)
        count, size = await kept_bytes(*last)
    finally:
        for drop in drops:
            drop()
    print(f"\nHub ({name}, spool, batch 20), {len(files)} interchanges, store off vs on, {args.rounds} rounds:")
    print("| store | best | median | ratio to off (best, median) | hub CPU per delivery (median) |")
    print("|---|---|---|---|---|")
    rows = ((False, False, "off"), (True, False, "on, settling"), (True, True, "on, index catch-up counted"))
    off = [r.rate(with_index=False) for r in rounds[False]]
    off_cpu = statistics.median(r.cpu_per(with_index=False) for r in rounds[False])
    costs = []
    for keep, with_index, label in rows:
        rates = [r.rate(with_index=with_index) for r in rounds[keep]]
        best, median = max(rates), statistics.median(rates)
        cpu = statistics.median(r.cpu_per(with_index=with_index) for r in rounds[keep])
        ratio = f"x{best / max(off):.2f}, x{median / statistics.median(off):.2f}"
        print(f"| {label} | {best:,.0f} deliveries/s | {median:,.0f} deliveries/s | {ratio} | {cpu:,.0f} us |")
        if keep:
            costs.append(
                f"{label}: {1 - best / max(off):.1%} (best), {1 - median / statistics.median(off):.1%} "
                f"(median), CPU {cpu / off_cpu - 1:+.1%}"
            )
    print("store cost of the hub's throughput (target <= 10 %) " + "; ".join(costs))
    print(_paired(rounds))
    catch_up = statistics.median(r.index_seconds / r.settled * 1e6 for r in rounds[True])
    catch_up_cpu = statistics.median(r.index_cpu / r.settled * 1e6 for r in rounds[True])
    print(
        f"index catch-up (after the run, outside the settling transactions): {catch_up:,.0f} us per interchange, "
        f"{catch_up_cpu:,.0f} us of the hub's CPU (median)"
    )
    raw = sum(len(p) for _, p in files) / len(files)
    print(
        f"storage: {count} kept, {size:,} bytes with indexes = {size / count:,.0f} bytes per interchange "
        f"(raw {raw:,.0f} bytes) -> {size / count * 1e6 / 2**30:,.2f} GiB per 1M interchanges"
    )


def _search_tables(args: argparse.Namespace, name: str, root: Path) -> tuple[str, str, Callable[[], None] | None]:
    """The search's database URL and journal table, and their drop (None: none, or kept: `--keep-search`)."""
    kept = args.keep_search
    if name == "sqlite":
        file = root.parent / f"{kept}.db" if kept else root / "search.db"
        return f"sqlite:///{file}", "inbox", None
    url = POSTGRES if name == "postgresql" else MARIADB
    if not kept:
        schema, drop = _schema(name)
        return url, f"{schema}.inbox", drop
    if name == "postgresql":
        with psycopg.connect(POSTGRES, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA IF NOT EXISTS "{kept}"'.encode())
    else:
        import pymysql

        connection = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)
        with connection, connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{kept}`")
    return url, f"{kept}.inbox", None


async def measure_search(args: argparse.Namespace, name: str, root: Path, templates: list[bytes]) -> None:
    """Fill `--search-rows` kept payloads (unless `--keep-search` kept them), then time the searches."""
    db, table, drop = _search_tables(args, name, root)
    try:
        async with AsyncInbox(db, consumer="accounting", table=table, keep_payloads=True) as inbox:
            await inbox.create_schema()
            filled = (await kept_bytes(db, table))[0]
            took = 0.0 if filled >= args.search_rows else await fill(inbox, templates, args.search_rows)
            if inbox.dialect != "sqlite":  # PostgreSQL: the planner's statistics; MariaDB: the table's size too
                analyze = partial(_analyze, f"{table}_payloads")  # MariaDB's commits: outside a transaction
                await (inbox.transaction(analyze) if inbox.dialect == "postgresql" else inbox.read(analyze))
            common = sorted(set.intersection(*(set(search_text(t).split()) for t in templates)))[0]
            times, missing, hits, frequent = await search_latency(inbox, args.search_rows, args.searches, common)
        count, size = await kept_bytes(db, table)
    finally:
        if drop is not None:
            drop()
    print(
        f"\nSearch ({name}): {count:,} kept interchanges ({f'filled in {took:,.0f} s' if took else 'reused'}, "
        f"{size / 2**20:,.0f} MiB with "
        f"indexes: {size / count:,.0f} bytes each, {size / count * 1e6 / 2**30:,.2f} GiB per 1M); "
        f"{args.searches} searches for a PO number: median {statistics.median(times):.1f} ms, worst "
        f"{max(times):.1f} ms, {hits} found; a value found nowhere: {missing:.1f} ms; a word every one holds "
        f"({common!r}, the newest 20): {frequent:.1f} ms (target < 100 ms)"
    )


def main() -> int:
    """Parse the options, run the measures, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--search-rows", type=int, default=200_000)
    parser.add_argument("--searches", type=int, default=20)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--mariadb", action="store_true", help="the hub and the search on MariaDB too (FULLTEXT)")
    parser.add_argument("--no-hub", action="store_true", help="the search only")
    parser.add_argument("--no-search", action="store_true", help="the hub only")
    parser.add_argument("--keep-search", metavar="NAME", help="keep the filled search tables under NAME, reuse them")
    args = parser.parse_args()
    traffic = generate(args.messages, duplicate_rate=0.0, seed=11, mixed=False)
    files = traffic.files
    templates = [payload for _, payload in files[:2000]]
    root = Path(tempfile.mkdtemp(prefix="bench-store-"))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Message store ({os.cpu_count()} CPUs, load average {load})")
    try:
        names = [] if args.no_sqlite else ["sqlite"]
        names += ([] if args.no_postgres else ["postgresql"]) + (["mysql"] if args.mariadb else [])
        for name in names:
            if not args.no_hub:
                asyncio.run(measure_hub(args, name, root, files))
            if not args.no_search:
                asyncio.run(measure_search(args, name, root, templates))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
