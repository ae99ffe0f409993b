"""`process()` latency while the journal is purged, side by side in one run: before, during an unthrottled purge,
during a throttled one.

    .venv/bin/python -m bench.purge [--url postgresql://...] [--rows 1000000] [--max-rate 5000] [--stream 100]
        [--window 30]

The journal (schema `bench_purge_<random>`, dropped at the end) is filled with generate_series: `--rows` settled
rows 60 days old for each of two purging consumers (`old-a`, `old-b`), the unique index built afterwards, then
VACUUM ANALYZE. A steady stream of `Inbox.process` calls (consumer `bench`, a business row inserted in the handler,
`--stream` calls per second, one connection) runs throughout; each call's latency is recorded by phase:

1. `before`: `--window` seconds, no purge;
2. `unthrottled`: while `Inbox.purge` of `old-a` (batches of 1,000, no `max_rate`) runs to the end in a thread
   with its own connection;
3. `before (2)`: `--window` seconds again, after a VACUUM of the purged rows (not measured);
4. `throttled`: while the purge of `old-b` at `--max-rate` rows per second runs to the end.

It prints p50 / p99 / max and the stream's achieved rate per phase, the rows per second of each purge, and the
ratios p99 during / p99 before (the throttled one against the second `before`, measured just ahead of it).
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
AGE = timedelta(days=30)


def fill(url: str, table: str, *, rows: int) -> None:
    """Create the journal through the API and fill it with `rows` old settled rows per purging consumer."""
    with Inbox(url, consumer=STREAM, table=table) as inbox:
        inbox.create_schema()
    schema, name = table.split(".")
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"DROP INDEX {schema}.{name}_key".encode())
        for consumer in OLD:
            connection.execute(
                f"INSERT INTO {table} (consumer, source, message_id, fingerprint, received_at, status, attempts, "
                "settled_at) SELECT %(consumer)s, 'X12:ZZ:P' || lpad((i %% 1000)::text, 4, '0') || '>ZZ:HUB', "
                "lpad((i / 1000)::text, 9, '0'), md5(i::text) || md5((-i)::text), now() - interval '60 days', "
                "'processed', 1, now() - interval '60 days' FROM generate_series(1, %(rows)s) AS i".encode(),
                {"consumer": consumer, "rows": rows},
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
        self.interval = 1.0 / rate
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
    stream: Stream, url: str, table: str, consumer: str, *, max_rate: float | None
) -> tuple[list[float], float, int, float]:
    """Run the purge of `consumer` in a thread (its own connection) and the stream until the purge ends; the
    stream's latencies and rate, the rows deleted and the purge's seconds."""
    done = threading.Event()
    result: dict[str, Any] = {}

    def purge() -> None:
        started = time.perf_counter()
        try:
            with Inbox(url, consumer=consumer, table=table) as inbox:
                result["rows"] = inbox.purge(AGE, batch_size=1000, max_rate=max_rate)
        finally:
            result["seconds"] = time.perf_counter() - started
            done.set()

    worker = threading.Thread(target=purge, daemon=True)
    worker.start()
    latencies, rate = stream.run(done)
    worker.join()
    return latencies, rate, int(result["rows"]), float(result["seconds"])


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
    """Fill, then measure the four phases and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--url", default=os.environ.get("EDINBOX_TEST_POSTGRES", "postgresql://postgres@127.0.0.1/test")
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="old rows per purge")
    parser.add_argument("--max-rate", type=float, default=5000, help="the throttled purge's rows per second")
    parser.add_argument("--stream", type=float, default=100, help="process() calls per second")
    parser.add_argument("--window", type=float, default=30, help="seconds of each `before` phase")
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
        before, before_rate = stream.run(args.window)
        free, free_rate, free_rows, free_s = purge_while(stream, args.url, table, OLD[0], max_rate=None)
        vacuum(args.url, table)
        before2, before2_rate = stream.run(args.window)
        slow, slow_rate, slow_rows, slow_s = purge_while(stream, args.url, table, OLD[1], max_rate=args.max_rate)
        stream.inbox.close()
        print(f"\n`Inbox.process` latency, steady stream of {args.stream:g}/s, journal of {2 * args.rows} old rows:")
        print(line("before", before, before_rate))
        print(line("unthrottled purge", free, free_rate))
        print(line("before (2)", before2, before2_rate))
        print(line(f"purge at {args.max_rate:g} rows/s", slow, slow_rate))
        print(f"\nunthrottled purge: {free_rows} rows in {free_s:.1f} s = {free_rows / free_s:,.0f} rows/s")
        print(f"throttled purge:   {slow_rows} rows in {slow_s:.1f} s = {slow_rows / slow_s:,.0f} rows/s")
        p99 = percentile(before, 99)
        p99_2 = percentile(before2, 99)
        print(f"\np99 during / p99 before: unthrottled x{percentile(free, 99) / p99:.2f}, ", end="")
        print(f"throttled x{percentile(slow, 99) / p99_2:.2f} (x{percentile(slow, 99) / p99:.2f} of the first before)")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        with psycopg.connect(args.url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE".encode())


if __name__ == "__main__":
    main()
