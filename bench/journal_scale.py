"""process_batch of 1,000 on a full journal (10M rows) against an empty one, side by side in one run.

    .venv/bin/python -m bench.journal_scale [--url postgresql://...] [--rows 10000000] [--turns 20]
        [--keys random,rising] [--layouts flat,digest,ring,hash,generations,filtered,collate] [--partitions 16]
        [--hot ROWS] [--rate 0.01] [--refill] [--wal-compression] [--sorted] [--former] [--redelivered]
        [--steady BATCHES] [--explain BATCHES]
        [--private FOLDER [--server sized|default] [-c NAME=VALUE ...] [--compare NAME=VALUE[,...] ...] [--remove]]

With `--private FOLDER` the journals live in a PostgreSQL cluster of their own in FOLDER (initdb on the first run,
reused after: the filled journals stay there), started for the run with the `--server` settings (`sized`: the
sizing rule of docs/scaling.md, `shared_buffers` holding the unique index and checkpoints spaced; `default`:
PostgreSQL's defaults) plus any `-c NAME=VALUE`, stopped at the end, and deleted with `--remove`. With
`--compare SETTINGS` (repeatable), the whole run is repeated once per SETTINGS, the cluster restarted with them
added (`--compare huge_pages=off --compare huge_pages=on`), the huge page counters of /proc/meminfo printed after
each start and each run, and at the end every rate and ratio side by side, one column per SETTINGS.

Journals are filled with generate_series (not through the API) into schema `bench_scale` and kept between runs
(`--refill` rebuilds them). Two key shapes: `random` (a UUID per message, one source) and `rising` (1,000
partners, each with rising 9-digit control numbers, as X12 ISA13). Seven layouts:

- `flat`: today's journal (one table, unique index on consumer, source, message_id), through `Inbox.process_batch`;
- `digest`: the flat journal keyed by a 16-byte digest of (consumer, source, message_id)
  (`bench/experiments/digest.sql`): the same one insert per batch into an index about half as big;
- `ring`: the journal as a ring of slot partitions (docs/scaling.md): inserts go to the current slot, whose
  index is small and hot; the older slots inside the horizon are only probed (read, never written), so a batch
  dirties a few pages instead of one leaf per key. Run with the statements of `bench/experiments/ring.sql` (a
  candidate measured here, not adopted: docs/scaling.md);
- `hash`: the journal hash-partitioned on message_id (`--partitions`, 16 by default; `bench/experiments/hash.sql`)
  under the same unique key, which holds the partition key: each partition's index holds 1/N of the rows and is a level
  shallower, and an INSERT routes each row to its one partition. Inbox.create_schema() and verify() accept the
  partitioned table, so it runs through `Inbox.process_batch` like `flat`;
- `generations`: two generations (`bench/experiments/generations.sql`): a hot table of its own takes the inserts (a
  plain INSERT of the keys that no cold row holds), the cold one (an empty table, or the full flat journal) is only
  probed, read-only;
- `filtered`: the two generations with a Bloom filter of the cold one's keys in the process's memory
  (`bench/experiments/bloom.py`, `bench/experiments/filtered.sql`; false-positive rate `--rate`, 1 % by default): built
  from the cold table and stored as a bytea in table `filters` (once: later runs load it), checked in Python per key;
  only the keys it may hold probe the cold table, the others go straight to the hot table's plain INSERT, after the
  shared rotation lock. The cold one is empty or the full flat journal; the full one's hot table is empty, or with
  `--hot ROWS` a kept table of ROWS older keys (a generation near its rotation); the filter's size, build, store and
  load times are printed, and after each measurement its Python time and the keys it sent to a probe;
- `collate`: the flat journal with its key columns `COLLATE "C"` (bytewise comparisons), through
  `Inbox.process_batch`.

Each turn runs one batch of 1,000 fresh messages on every variant (order rotated), right after a CHECKPOINT: the
first change of each index leaf pays a full-page image, which for random keys is nearly every key. With
`--steady N`, N untimed batches then go into each full journal and the turns run again: a busy journal deep into
its checkpoint cycle, whose leaves have mostly had their image already. The ratio is full / empty of the same
layout, of the totals and as the median of each turn's own ratio; beside it the WAL written per batch, the CPU
time per batch of the benchmark's process and (for the flat variants, when the server runs on this machine) of the
variant's server process: on a loaded machine the wall-clock ratio moves with the load, the CPU times much less.
With `--wal-compression`, another flat variant: the full journal with `wal_compression=lz4` on its connections;
with `--sorted`, two more: the same batches sorted by key before `process_batch`; with `--former`, two more: the flat
journals through process_batch's former insert (ON CONFLICT DO NOTHING for every batch, not a plain INSERT first);
with `--redelivered`, two more on empty journals, today's insert and the former one, whose batches each end with a
key of the batch before (the plain INSERT's worst case: rolled back at its last row, then ON CONFLICT). A layout
other than flat is also compared with the flat empty journal (today's). With `--explain N`, N more batches per
flat, hash or collate journal go through `EXPLAIN (ANALYZE, BUFFERS)` of the store's ON CONFLICT insert (rolled
back): the buffer visits (shared hits and reads) per batch, and the level of the unique index's root (the deepest
partition's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from tests.servers import PrivatePostgres

from bench._journal_layouts import (
    APPLICATION,
    BATCH,
    CONSUMER,
    HASH,
    INSERT,
    PARTNERS,
    SCHEMA,
    SERVERS,
    SHOWN,
    TEMPLATE,
    Checked,
    Keys,
    Variants,
    application,
    batch_params,
    create_collated,
    create_hash,
    full_name,
    hot_name,
    reset,
)
from bench._journal_variants import (
    digest_or_ring_variants,
    drop_empty,
    fill_journals,
    filtered_variants,
    flat_variants,
    generations_variants,
)
from edinbox import Inbox


def wal_position(probe: psycopg.Connection[Any]) -> int:
    """The server's current WAL insert position in bytes (the benchmark is the only writer)."""
    row = probe.execute(b"SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone()
    return int(row[0]) if row else 0


def server_cpu(probe: psycopg.Connection[Any]) -> dict[str, int]:
    """CPU time so far (ns) of each flat variant's server process, by its application_name, when the server runs
    on this machine (/proc/<pid>/schedstat); empty otherwise."""
    rows = probe.execute(
        b"SELECT application_name, pid FROM pg_stat_activity WHERE application_name LIKE %s", [f"{APPLICATION}%"]
    ).fetchall()
    spent = {}
    for name, pid in rows:
        stat = Path(f"/proc/{pid}/schedstat")
        if stat.exists():
            spent[name] = int(stat.read_text().split()[0])
    return spent


def measure(title: str, variants: Variants, *, turns: int, probe: psycopg.Connection[Any]) -> dict[str, str]:
    """Run the variants turn by turn (order rotated), one batch each per turn; print rates, ratios (of the totals,
    and the median of each turn's ratio, which a burst of load on the shared machine moves less) and the WAL each
    batch wrote (read from `probe` between batches, outside the timed part). Return each variant's rate and, for a
    full one, its ratios, for the side-by-side summary of `--compare`."""
    elapsed = dict.fromkeys(variants, 0.0)
    wal = dict.fromkeys(variants, 0)
    paired: dict[str, list[float]] = {name: [] for name in variants}  # each turn's batch time of each variant
    cpu = dict.fromkeys(variants, 0)
    client = dict.fromkeys(variants, 0.0)
    for keys, run in variants.values():  # warm-up: connections, plans, caches
        run(keys.batch())
    order = list(variants)
    for _ in range(turns):
        order = order[1:] + order[:1]
        for name in order:
            keys, run = variants[name]
            messages = keys.batch()
            before, cpu_before = wal_position(probe), server_cpu(probe)
            started, client_before = time.perf_counter(), time.process_time()
            run(messages)
            paired[name].append(time.perf_counter() - started)
            client[name] += time.process_time() - client_before
            elapsed[name] += paired[name][-1]
            wal[name] += wal_position(probe) - before
            cpu[name] += server_cpu(probe).get(application(name), 0) - cpu_before.get(application(name), 0)
    rates = {name: turns * BATCH / seconds for name, seconds in elapsed.items()}
    print(f"\n## {title}  ({turns} interleaved turns of {BATCH} messages per variant)")
    summary = {}
    for name, value in rates.items():
        summary[name] = f"{value:,.0f} msg/s"
        line = f"  {name:<16} {value:>9,.0f} msg/s  {wal[name] / turns / 1e6:5.2f} MB WAL/batch"
        line += f"  CPU ms/batch: client {client[name] / turns * 1e3:4.1f}"
        line += f", server {cpu[name] / turns / 1e6:4.1f}" if cpu[name] else ""
        if name.endswith("full"):
            empty = name.split()[0] + " empty"
            turn = statistics.median(e / f for e, f in zip(paired[empty], paired[name], strict=True))
            summary[name] = f"x{value / rates[empty]:.2f} (median x{turn:.2f})"
            line += f"  x{value / rates[empty]:.2f} of {empty} (median of the turns x{turn:.2f})"
            if empty != "flat empty" and "flat empty" in rates:
                line += f", x{value / rates['flat empty']:.2f} of flat empty"
        print(line, flush=True)
    return summary


def measured(
    title: str, variants: Variants, checked: dict[str, Checked], *, turns: int, probe: psycopg.Connection[Any]
) -> dict[str, str]:
    """`measure`, then what each filtered variant's filter did during it."""
    for filtered in checked.values():
        filtered.clear()
    summary = measure(title, variants, turns=turns, probe=probe)
    for name, filtered in checked.items():
        print(filtered.line(name), flush=True)
    return summary


def huge_pages() -> str:
    """The huge page counters of /proc/meminfo (Total, Free, Rsvd): a server whose shared memory uses huge pages
    has them reserved (Rsvd) or touched (Total - Free)."""
    lines = Path("/proc/meminfo").read_text().splitlines()
    counters = dict(line.replace(":", "").split()[:2] for line in lines if line.startswith("HugePages_"))
    return ", ".join(f"{name}={counters.get(f'HugePages_{name}', '?')}" for name in ("Total", "Free", "Rsvd"))


def explain(
    connection: psycopg.Connection[Any], tables: dict[str, str], keys: dict[str, Keys], *, batches: int
) -> None:
    """Print, per journal, the buffer visits (shared hits + reads) of the store's insert of a fresh batch under
    EXPLAIN (ANALYZE, BUFFERS), rolled back (range and median over `batches`), and its unique index's root level."""
    print(f"\n## EXPLAIN (ANALYZE, BUFFERS) of the store's insert, {batches} batches of {BATCH} each, rolled back")
    connection.execute(b"CREATE EXTENSION IF NOT EXISTS pageinspect")
    for name, table in tables.items():
        visits, reads, times = [], [], []
        statement = b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + INSERT.format(table=f"{SCHEMA}.{table}").encode()
        for _ in range(batches):
            messages = keys[name].batch()
            with connection.transaction(force_rollback=True):
                row = connection.execute(statement, batch_params(messages)).fetchone()
            plan = row[0][0] if row else {}
            top = plan.get("Plan", {})
            visits.append(int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0)))
            reads.append(int(top.get("Shared Read Blocks", 0)))
            times.append(float(plan.get("Execution Time", 0.0)))
        level = connection.execute(HASH["index_level"].encode(), {"index": f"{SCHEMA}.{table}_key"}).fetchone()
        print(
            f"  {name:<16} buffer visits/batch {min(visits):,}-{max(visits):,}"
            f" (median {statistics.median(visits):,.0f}),"
            f" reads {statistics.median(reads):,.0f}, execution {statistics.median(times):.1f} ms,"
            f" root level {level[0] if level else '?'}",
            flush=True,
        )


def advance(variants: Variants, batches: int) -> None:
    """Run `batches` untimed batches on every full variant: the traffic a busy journal takes between two
    checkpoints, after which most leaves it writes already had their full-page image in this checkpoint cycle."""
    for name, (keys, run) in variants.items():
        if name.endswith("full"):
            for _ in range(batches):
                run(keys.batch())


def main() -> None:
    """Run on the given server, or on a private cluster started (and stopped) here."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--url", default=os.environ.get("EDINBOX_TEST_POSTGRES", "postgresql://postgres@127.0.0.1/test")
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--keys", default="random,rising")
    parser.add_argument("--layouts", default="flat,digest,ring")
    parser.add_argument("--partitions", type=int, default=16, help="the hash layout's partitions")
    parser.add_argument("--hot", type=int, default=0, help="rows in the filtered full journal's hot table")
    parser.add_argument("--rate", type=float, default=0.01, help="the filtered layout's false-positive rate")
    parser.add_argument("--explain", type=int, default=0, help="then EXPLAIN this many batches per flat/hash journal")
    parser.add_argument("--refill", action="store_true")
    parser.add_argument("--wal-compression", action="store_true", help="also the full flat journal with lz4 WAL")
    parser.add_argument(
        "--steady", type=int, default=0, help="then measure again after this many untimed batches on the full journals"
    )
    parser.add_argument("--former", action="store_true", help="also the flat journals with ON CONFLICT every batch")
    parser.add_argument(
        "--redelivered", action="store_true", help="also empty journals whose batches each repeat one earlier key"
    )
    parser.add_argument("--sorted", action="store_true", help="also the flat batches sorted by key")
    parser.add_argument("--private", type=Path, help="run a PostgreSQL cluster of its own, kept in this folder")
    parser.add_argument("--server", choices=sorted(SERVERS), default="sized", help="the private cluster's settings")
    parser.add_argument("-c", dest="settings", action="append", default=[], help="NAME=VALUE for the private cluster")
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        help="NAME=VALUE[,NAME=VALUE]: run again on the private cluster restarted with these settings added",
    )
    parser.add_argument("--remove", action="store_true", help="delete the private cluster at the end")
    args = parser.parse_args()
    if args.private is None:
        run(args)
        return
    base = SERVERS[args.server] | dict(setting.split("=", 1) for setting in args.settings)
    runs = [dict(setting.split("=", 1) for setting in compared.split(",")) for compared in args.compare] or [{}]
    server = PrivatePostgres(args.private.resolve(), settings=base)
    results: list[tuple[str, dict[str, dict[str, str]]]] = []  # (settings, title -> variant -> rate or ratio)
    try:
        for extra in runs:
            server.settings = base | extra
            server.start()
            named = ",".join(f"{name}={value}" for name, value in extra.items()) or "as given"
            print(f"\n# server started with {named}; huge pages: {huge_pages()}", flush=True)
            args.url = server.url
            results.append((named, run(args)))
            print(f"# huge pages at the end of the run: {huge_pages()}", flush=True)
            server.stop()
    finally:
        if server.running():
            server.stop()
        if args.remove:
            server.remove()
    if len(results) > 1:
        side_by_side(results)


def side_by_side(results: list[tuple[str, dict[str, dict[str, str]]]]) -> None:
    """Print each measurement's rate (empty) or ratio (full) per run, one column per run's settings, in run order."""
    print("\n## side by side: " + " | ".join(named for named, _ in results))
    for title, variants in results[0][1].items():
        print(f"  {title}")
        for name in variants:
            cells = [measured.get(title, {}).get(name, "-") for _, measured in results]
            print(f"    {name:<16} " + " | ".join(f"{cell:>22}" for cell in cells), flush=True)


def run(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """Fill (or reuse) the journals at `args.url`, then compare full and empty per key shape and layout; return
    each measurement's rates and ratios by title."""
    shapes = args.keys.split(",")
    layouts = args.layouts.split(",")
    connection = psycopg.connect(args.url, autocommit=True)
    shown = ", ".join(f"{name}={connection.execute(f'SHOW {name}'.encode()).fetchall()[0][0]}" for name in SHOWN)
    print(f"PostgreSQL {connection.info.server_version}: {shown}")
    connection.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}".encode())
    with Inbox(args.url, consumer=CONSUMER, table=TEMPLATE) as template:
        template.create_schema()
    print(f"journal at scale, {os.cpu_count()} CPUs, load average {os.getloadavg()} (the machine is shared)")
    fill_journals(args, connection)
    suffix = uuid.uuid4().hex[:8]
    results: dict[str, dict[str, str]] = {}
    work = psycopg.connect(args.url, autocommit=True)
    inboxes: list[Inbox] = []
    closing: list[psycopg.Connection[Any]] = []
    try:
        for shape in shapes:
            start = args.rows // PARTNERS + 1
            variants: Variants = {}
            tables: dict[str, str] = {}  # the flat and hash journals, for EXPLAIN
            checked: dict[str, Checked] = {}  # the filtered variants' filters at work
            for layout in layouts:
                empty = f"empty_{layout}_{shape}_{suffix}"
                if layout == "hash":
                    create_hash(connection, empty, partitions=args.partitions)
                if layout == "collate":
                    create_collated(connection, empty)
                if layout in ("flat", "hash", "collate"):
                    made, found = flat_variants(args, layout, shape=shape, empty=empty, start=start, inboxes=inboxes)
                    variants.update(made)
                    tables.update(found)
                elif layout == "generations":  # hot tables of their own; the full one's cold is the flat journal
                    variants.update(
                        generations_variants(args, connection, shape=shape, empty=empty, start=start, closing=closing)
                    )
                elif layout == "filtered":  # the full one's cold is the flat journal, its hot empty or kept
                    variants.update(
                        filtered_variants(
                            args, connection, shape=shape, empty=empty, start=start, checked=checked, closing=closing
                        )
                    )
                else:
                    variants.update(digest_or_ring_variants(args, connection, work, layout, shape, empty, start))
            for layout in {"flat" if layout in ("generations", "filtered") else layout for layout in layouts}:
                reset(connection, full_name(layout, shape, args.rows, partitions=args.partitions), layout=layout)
            if "filtered" in layouts and args.hot:
                reset(connection, hot_name(shape, args.hot), layout="flat")
            connection.execute(b"CHECKPOINT")
            title = f"{shape} keys, {args.rows:,} rows in the full journals"
            if "filtered" in layouts:
                title += f" (filtered full: {args.hot:,} rows in its hot table)"
            checkpointed = f"{title}, right after a checkpoint"
            results[checkpointed] = measured(checkpointed, variants, checked, turns=args.turns, probe=connection)
            if args.steady:
                advance(variants, args.steady)
                steady = f"{title}, {args.steady:,} more batches into the checkpoint cycle"
                results[steady] = measured(steady, variants, checked, turns=args.turns, probe=connection)
            if args.explain:
                # rising numbers of their own, above every variant's: the statement is rolled back
                keys = {name: Keys(shape, start=start + 10**7) for name in tables}
                explain(work, tables, keys, batches=args.explain)
    finally:
        for inbox in inboxes:
            inbox.close()
        for direct in closing:
            direct.close()
        drop_empty(connection, shapes, layouts, suffix)
        connection.close()
        work.close()
    return results


if __name__ == "__main__":
    main()
