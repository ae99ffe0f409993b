"""`process()` latency while the journal is purged, side by side in one run: no purge, an unthrottled purge, a
throttled one, taking turns.

    .venv/bin/python -m bench.purge [--url postgresql://...] [--rows 1000000] [--max-rate 10000] [--stream 0]
        [--turns 20] [--window SECONDS]

The journal (schema `bench_purge_<random>`, dropped at the end) is filled with generate_series: `--rows` processed
rows for each of two purging consumers (`old-a`, `old-b`), interleaved, settled 90 to 60 days ago (oldest first, as
a journal grows), the unique index built afterwards, then VACUUM ANALYZE and a checkpoint. A steady stream of
`Inbox.process` calls (consumer `bench`, a business row inserted in the handler, one connection; back to back, or
`--stream` calls per second) runs throughout, and each call's latency is recorded by phase. The machine is shared,
so the phases take turns (order rotated each turn) instead of running one after the other; in each of the
`--turns` turns:

- `no purge`: `--window` seconds (by default as long as a throttled slice should take);
- `unthrottled`: `Inbox.purge` of `old-a` (batches of 1,000, no `max_rate`), in a thread with its own connection,
  with a cut-off that deletes the next 1/turns of its rows (the oldest first, as the real purge of 1M rows);
- `throttled`: the same slice of `old-b` at `--max-rate` rows per second.

So the whole of each 1M-row purge is measured, in slices. It prints p50 / p99 / max and the stream's achieved rate
per phase, each purge's rows per second, the ratios p99 during / p99 with no purge, pooled over the run and as the
median over the turns of each turn's own ratio (robust to a burst of load from elsewhere in one turn), and the
calls per second during / with no purge.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg

from edinbox import Inbox, Message, Tx

STREAM = "bench"
OLD = ("old-a", "old-b")
OLDEST = timedelta(days=90)
NEWEST = timedelta(days=60)


def fill(url: str, table: str, *, rows: int) -> None:
    """Create the journal through the API and fill it with `rows` old settled rows per purging consumer."""
    with Inbox(url, consumer=STREAM, table=table) as inbox:
        inbox.create_schema()
    schema, name = table.split(".")
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"DROP INDEX {schema}.{name}_key".encode())
        connection.execute(
            f"INSERT INTO {table} (consumer, source, message_id, fingerprint, received_at, status, attempts, "
            "settled_at) SELECT CASE WHEN i %% 2 = 0 THEN %(a)s ELSE %(b)s END, "
            "'X12:ZZ:P' || lpad((i / 2 %% 1000)::text, 4, '0') || '>ZZ:HUB', lpad((i / 2000)::text, 9, '0'), "
            "md5(i::text) || md5((-i)::text), t, 'processed', 1, t FROM generate_series(0, 2 * %(rows)s - 1) AS i, "
            "LATERAL (SELECT now() - %(oldest)s + (%(span)s * i) / (2 * %(rows)s)) AS v (t)".encode(),
            {"a": OLD[0], "b": OLD[1], "rows": rows, "oldest": OLDEST, "span": OLDEST - NEWEST},
        )
        connection.execute(f"CREATE TABLE {table}_business (message_id text NOT NULL, body bytea)".encode())
    with Inbox(url, consumer=STREAM, table=table) as inbox:
        inbox.create_schema()  # the unique index again, built in one sorted pass
    vacuum(url, table)


def vacuum(url: str, table: str) -> None:
    """VACUUM ANALYZE the journal (the shared server runs no autovacuum), then a checkpoint."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"VACUUM ANALYZE {table}".encode())
        connection.execute(b"CHECKPOINT")


class Stream:
    """`Inbox.process` at a steady rate on one connection; latencies in milliseconds, by phase."""

    def __init__(self, url: str, table: str, *, rate: float) -> None:
        """Open the inbox the stream settles through."""
        self.inbox = Inbox(url, consumer=STREAM, table=table)
        self.table = table
        self.interval = 1.0 / rate if rate else 0.0
        self.prefix = uuid.uuid4().hex[:8]
        self.sent = 0

    def handler(self, tx: Tx, message: Message) -> None:
        """The business effect: one row in the caller's transaction."""
        tx.connection.execute(
            f"INSERT INTO {self.table}_business VALUES (%s, %s)".encode(), (message.message_id, message.payload)
        )

    def run(self, until: threading.Event | float) -> tuple[list[float], float]:
        """Settle messages on schedule until the event is set (or for that many seconds); the latencies and the
        calls per second achieved."""
        started = time.perf_counter()
        latencies: list[float] = []
        due = started
        while not (until.is_set() if isinstance(until, threading.Event) else time.perf_counter() - started >= until):
            self.sent += 1
            message = Message(f"{self.prefix}-{self.sent}", "X12:ZZ:STREAM>ZZ:HUB", b"x" * 200)
            t0 = time.perf_counter()
            self.inbox.process(message, self.handler)
            latencies.append((time.perf_counter() - t0) * 1000)
            due += self.interval
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            else:
                due = time.perf_counter()  # behind schedule: no burst to catch up
        return latencies, len(latencies) / (time.perf_counter() - started)


def purge_while(
    stream: Stream, url: str, table: str, consumer: str, *, older_than: timedelta, max_rate: float | None
) -> tuple[list[float], int, float]:
    """Run one purge of `consumer` in a thread (its own connection) and the stream until the purge ends; the
    stream's latencies, the rows deleted and the purge's seconds."""
    done = threading.Event()
    result: dict[str, Any] = {}

    def purge() -> None:
        started = time.perf_counter()
        try:
            with Inbox(url, consumer=consumer, table=table) as inbox:
                result["rows"] = inbox.purge(older_than, batch_size=1000, max_rate=max_rate)
        finally:
            result["seconds"] = time.perf_counter() - started
            done.set()

    worker = threading.Thread(target=purge, daemon=True)
    worker.start()
    latencies, _ = stream.run(done)
    worker.join()
    return latencies, int(result["rows"]), float(result["seconds"])


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def line(name: str, latencies: list[float], rate: float) -> str:
    """One phase: calls, p50, p99, max, calls per second."""
    return (
        f"  {name:<24} {len(latencies):>6} calls  p50 {statistics.median(latencies):6.2f} ms  "
        f"p99 {percentile(latencies, 99):7.2f} ms  max {max(latencies):8.2f} ms  {rate:6.1f} calls/s"
    )


def main() -> None:
    """Fill, then let the three phases take turns; print each phase and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--url", default=os.environ.get("EDINBOX_TEST_POSTGRES", "postgresql://postgres@127.0.0.1/test")
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="old rows per purge")
    parser.add_argument("--max-rate", type=float, default=10_000, help="the throttled purge's rows per second")
    parser.add_argument("--stream", type=float, default=0, help="process() calls per second (0: back to back)")
    parser.add_argument("--turns", type=int, default=20, help="slices of each purge, taking turns")
    parser.add_argument(
        "--window", type=float, default=0, help="seconds of each turn's `no purge` phase (0: a throttled slice's)"
    )
    args = parser.parse_args()
    schema = f"bench_purge_{uuid.uuid4().hex[:8]}"
    table = f"{schema}.inbox"
    with psycopg.connect(args.url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}".encode())
    try:
        started = time.perf_counter()
        fill(args.url, table, rows=args.rows)
        elapsed = time.perf_counter() - started
        print(f"filled {2 * args.rows} old rows ({args.rows} per purging consumer) in {elapsed:.0f} s")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        stream = Stream(args.url, table, rate=args.stream)
        stream.run(3.0)  # warm-up: connection, prepared statements
        phases = ["no purge", "unthrottled", "throttled"]
        latencies: dict[str, list[float]] = {name: [] for name in phases}
        per_turn: dict[str, list[float]] = {name: [] for name in phases}
        seconds = dict.fromkeys(phases, 0.0)
        rows = dict.fromkeys(phases, 0)
        window = args.window or args.rows / args.turns / args.max_rate  # as long as a throttled slice
        for turn in range(args.turns):
            cutoff = OLDEST - (OLDEST - NEWEST) * (turn + 1) / args.turns + timedelta(seconds=1)
            for name in phases[turn % 3 :] + phases[: turn % 3]:
                if name == "no purge":
                    began = time.perf_counter()
                    found, _ = stream.run(window)
                    seconds[name] += time.perf_counter() - began
                else:
                    consumer, rate = (OLD[0], None) if name == "unthrottled" else (OLD[1], args.max_rate)
                    found, deleted, took = purge_while(
                        stream, args.url, table, consumer, older_than=cutoff, max_rate=rate
                    )
                    rows[name] += deleted
                    seconds[name] += took
                latencies[name] += found
                per_turn[name].append(percentile(found, 99))
        stream.inbox.close()
        pace = f"{args.stream:g} calls/s" if args.stream else "back to back"
        print(f"\n`Inbox.process` latency, one connection, {pace}, {args.turns} turns:")
        for name in phases:
            label = f"purge at {args.max_rate:g} rows/s" if name == "throttled" else name
            print(line(label, latencies[name], len(latencies[name]) / seconds[name]))
        for name in phases[1:]:
            print(
                f"{name} purge: {rows[name]} rows in {seconds[name]:.1f} s = {rows[name] / seconds[name]:,.0f} rows/s"
            )
        base = percentile(latencies["no purge"], 99)
        print(
            f"\np99 during / p99 with no purge: unthrottled x{percentile(latencies['unthrottled'], 99) / base:.2f}, "
            f"throttled x{percentile(latencies['throttled'], 99) / base:.2f}"
        )
        turns = {
            name: statistics.median(p / q for p, q in zip(per_turn[name], per_turn["no purge"], strict=True))
            for name in phases[1:]
        }
        print(
            f"median over the turns of (p99 during / p99 with no purge in the same turn): "
            f"unthrottled x{turns['unthrottled']:.2f}, throttled x{turns['throttled']:.2f}"
        )
        calls = {name: len(latencies[name]) / seconds[name] for name in phases}
        print(
            f"calls/s during / with no purge: unthrottled x{calls['unthrottled'] / calls['no purge']:.2f}, "
            f"throttled x{calls['throttled'] / calls['no purge']:.2f}"
        )
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        with psycopg.connect(args.url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE".encode())


if __name__ == "__main__":
    main()
