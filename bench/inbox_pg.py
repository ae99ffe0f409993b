"""Inbox cost per message, side by side in one run: bare transaction, naive hand-written inbox, Inbox.process.

    .venv/bin/python -m bench.inbox_pg [--url postgresql://...] [--messages 4000] [--skip-sqlite]

PostgreSQL first, then the same three on an SQLite file; then process_batch of 1,000 messages against a
set-based hand-written batch; then statements and round trips per message (from the libpq trace), and a profile
of where Inbox.process spends its time. The variants take turns on small chunks, so load from other processes
hits them alike.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import re
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool

from edinbox import Inbox, Message, Tx

CONSUMER = "bench"


def rate(run: Callable[[list[Message]], None], messages: list[Message]) -> float:
    """Messages per second for one call of `run` over `messages`."""
    started = time.perf_counter()
    run(messages)
    return len(messages) / (time.perf_counter() - started)


def batches(prefix: str, count: int, size: int) -> list[list[Message]]:
    """`count` lists of `size` fresh messages (fingerprints computed before any timing)."""
    return [[Message(f"{prefix}{r}-{i}", "bench:source", b"x" * 200) for i in range(size)] for r in range(count)]


def compare(title: str, variants: dict[str, Callable[[list[Message]], None]], *, size: int, chunk: int) -> None:
    """Run the variants turn by turn on `chunk` fresh messages each (order rotated every turn) until each has
    handled `size` messages; print each variant's overall rate and its ratios. Fine-grained interleaving puts
    the variants under the same load, which on a shared machine matters more than the number of messages."""
    elapsed = dict.fromkeys(variants, 0.0)
    for warm_name, warm in variants.items():  # warm-up: connections, prepared statements, caches
        warm(batches(f"warm-{warm_name}-{uuid.uuid4().hex[:6]}-", 1, min(chunk, 100))[0])
    order = list(variants)
    for turn in range(max(1, size // chunk)):
        order = order[1:] + order[:1]
        for name in order:
            messages = batches(f"{name}-{turn}-{uuid.uuid4().hex[:6]}-", 1, chunk)[0]
            started = time.perf_counter()
            variants[name](messages)
            elapsed[name] += time.perf_counter() - started
    turns = max(1, size // chunk)
    rates = {name: turns * chunk / seconds for name, seconds in elapsed.items()}
    names = list(variants)
    print(f"\n## {title}\n   ({turns} interleaved turns of {chunk} messages per variant)")
    for name in names:
        line = f"  {name:<30} {rates[name]:>9,.0f} msg/s  x{rates[name] / rates[names[0]]:.2f} of {names[0]}"
        if len(names) > 2 and name != names[1]:
            line += f", x{rates[name] / rates[names[1]]:.2f} of {names[1]}"
        print(line)


def postgres(url: str, table: str, *, size: int) -> None:
    """Bare vs naive vs Inbox.process on PostgreSQL, then batches."""
    connection = psycopg.connect(url)
    connection.execute(f"CREATE TABLE {table}_business (message_id text NOT NULL, body bytea)".encode())
    connection.execute(
        f"CREATE TABLE {table}_naive (consumer text NOT NULL, source text NOT NULL, message_id text NOT NULL, "
        f"received_at timestamptz NOT NULL DEFAULT now(), UNIQUE (consumer, source, message_id))".encode()
    )
    connection.commit()
    business = f"INSERT INTO {table}_business (message_id, body) VALUES (%s, %s)".encode()
    naive_insert = (
        f"INSERT INTO {table}_naive (consumer, source, message_id) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
    )
    inbox = Inbox(url, consumer=CONSUMER, table=table)
    inbox.create_schema()

    def bare(messages: list[Message]) -> None:
        for m in messages:
            connection.execute(business, (m.message_id, m.payload))
            connection.commit()

    def naive(messages: list[Message]) -> None:
        for m in messages:
            cursor = connection.execute(naive_insert.encode(), (CONSUMER, m.source, m.message_id))
            if cursor.rowcount == 1:
                connection.execute(business, (m.message_id, m.payload))
            connection.commit()

    def handler(tx: Tx, m: Message) -> None:
        tx.connection.execute(business, (m.message_id, m.payload))

    def process(messages: list[Message]) -> None:
        for m in messages:
            inbox.process(m, handler)

    try:
        compare(
            "PostgreSQL, one message per transaction",
            {"bare transaction": bare, "naive inbox": naive, "Inbox.process": process},
            size=size,
            chunk=20,
        )
        # The same without waiting for the WAL flush (synchronous_commit=off on both sides): what remains is the
        # client's work and the round trips, without the fsync noise of a disk shared with other test runs.
        fast = psycopg.connect(url, options="-c synchronous_commit=off")
        fast_inbox = Inbox(_with_options(url, "-c synchronous_commit=off"), consumer=CONSUMER, table=table)

        def fast_naive(messages: list[Message]) -> None:
            for m in messages:
                cursor = fast.execute(naive_insert.encode(), (CONSUMER, m.source, m.message_id))
                if cursor.rowcount == 1:
                    fast.execute(business, (m.message_id, m.payload))
                fast.commit()

        def fast_process(messages: list[Message]) -> None:
            for m in messages:
                fast_inbox.process(m, handler)

        try:
            compare(
                "PostgreSQL, one message per transaction, synchronous_commit=off (no fsync wait)",
                {"naive inbox": fast_naive, "Inbox.process": fast_process},
                size=size,
                chunk=20,
            )
        finally:
            fast_inbox.close()
            fast.close()
        postgres_batches(connection, inbox, table, business_table=f"{table}_business", naive_table=f"{table}_naive")
        trace_round_trips(url, table, business)
        profile(process, size)
    finally:
        inbox.close()
        connection.rollback()
        for suffix in ("", "_version", "_business", "_naive"):
            connection.execute(f"DROP TABLE IF EXISTS {table}{suffix}".encode())
        connection.commit()
        connection.close()


def _with_options(url: str, options: str) -> str:
    """`url` with a libpq `options` parameter added."""
    return url + ("&" if "?" in url else "?") + "options=" + options.replace(" ", "%20").replace("=", "%3D")


def postgres_batches(
    connection: psycopg.Connection[Any], inbox: Inbox, table: str, *, business_table: str, naive_table: str
) -> None:
    """process_batch of 1,000 messages against a hand-written set-based batch (same business insert)."""
    business = f"INSERT INTO {business_table} (message_id, body) SELECT * FROM unnest(%b::text[], %b::bytea[])"
    naive_keys = (
        f"INSERT INTO {naive_table} (consumer, source, message_id) "
        "SELECT %s, * FROM unnest(%b::text[], %b::text[]) ON CONFLICT DO NOTHING RETURNING message_id"
    )

    def insert_business(conn: Any, messages: list[Message]) -> None:
        conn.execute(business.encode(), ([m.message_id for m in messages], [m.payload for m in messages]))

    def naive(messages: list[Message]) -> None:
        for start in range(0, len(messages), 1000):
            chunk = messages[start : start + 1000]
            cursor = connection.execute(
                naive_keys.encode(), (CONSUMER, [m.source for m in chunk], [m.message_id for m in chunk])
            )
            new = {row[0] for row in cursor.fetchall()}
            insert_business(connection, [m for m in chunk if m.message_id in new])
            connection.commit()

    def batch(messages: list[Message]) -> None:
        for start in range(0, len(messages), 1000):
            inbox.process_batch(messages[start : start + 1000], lambda tx, new: insert_business(tx.connection, new))

    def batch_only(messages: list[Message]) -> None:
        for start in range(0, len(messages), 1000):
            inbox.process_batch(messages[start : start + 1000], lambda tx, new: None)

    compare(
        "PostgreSQL, batches of 1,000 messages per transaction (journal keys + business rows, one statement each)",
        {"naive set-based batch": naive, "Inbox.process_batch": batch, "process_batch, no-op handler": batch_only},
        size=20_000,
        chunk=1000,
    )


def trace_round_trips(url: str, table: str, business: bytes) -> None:
    """Statements and round trips per message, counted from the libpq protocol trace of the inbox's connection."""
    path = Path(tempfile.mkstemp(suffix=".trace")[1])
    handle = path.open("w")

    def traced(conn: psycopg.Connection[Any]) -> None:
        conn.pgconn.trace(handle.fileno())

    def handler(tx: Tx, m: Message) -> None:
        tx.connection.execute(business, (m.message_id, m.payload))

    def count(run: Callable[[], None]) -> dict[str, int]:
        handle.flush()
        start = path.stat().st_size
        run()
        handle.flush()
        with path.open() as text:
            text.seek(start)
            kinds = [line.split("\t")[3].split()[0] for line in text if "\tF\t" in line]
        return {kind: kinds.count(kind) for kind in ("Query", "Parse", "Bind", "Execute", "Sync")}

    messages = batches("trace-", 1, 100)[0]
    # Same connection settings as a URL inbox (autocommit; the inbox sends BEGIN and COMMIT itself).
    with psycopg_pool.ConnectionPool(
        url, min_size=1, max_size=1, configure=traced, kwargs={"autocommit": True}
    ) as pool:
        inbox = Inbox(pool, consumer=CONSUMER, table=table)
        for m in batches("trace-warm-", 1, 10)[0]:
            inbox.process(m, handler)

        def deliver() -> None:
            for m in messages:
                inbox.process(m, handler)

        new = count(deliver)
        again = count(deliver)
    handle.close()
    path.unlink()
    print("\n## Protocol trace of the inbox connection, per message (100 messages each)")
    for title, counts in (("new message", new), ("duplicate", again)):
        trips = (counts["Sync"] + counts["Query"]) / 100
        statements = (counts["Execute"] + counts["Query"]) / 100
        print(f"  {title:<12} {trips:.2f} round trips, frontend messages {counts}")
        del statements
    print(
        "  new: 'BEGIN; EXECUTE <prepared journal INSERT>' (1 simple query), business INSERT (1), COMMIT (1);\n"
        "  naive: BEGIN (psycopg, 1), journal INSERT (1), business INSERT (1), COMMIT (1).\n"
        "  duplicate: 'BEGIN; EXECUTE' (1), SELECT ... FOR UPDATE of the row (1), COMMIT (1)."
    )


def profile(process: Callable[[list[Message]], None], size: int) -> None:
    """Where Inbox.process spends its time: the top functions by own time."""
    messages = batches("profile-", 1, size)[0]
    profiler = cProfile.Profile()
    profiler.enable()
    process(messages)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).sort_stats("tottime")
    stats.print_stats(12)
    total = stats.total_tt  # type: ignore[attr-defined]
    waits = sum(
        tt
        for (file, _, name), (_, _, tt, _, _) in stats.stats.items()  # type: ignore[attr-defined]
        if re.search(r"wait|select|poll|recv|send", name)
    )
    print(
        f"\n## Profile of Inbox.process ({size} messages): {total:.2f}s in all, {waits / total:.0%} in psycopg's wait "
        "(round trips, fsync of COMMIT); top functions by own time:"
    )
    for line in out.getvalue().splitlines():
        if re.match(r"\s+\d", line):
            print("  " + line.strip()[:150])


def sqlite(path: Path, table: str, *, size: int) -> None:
    """Bare vs naive vs Inbox.process on an SQLite file (WAL, the Inbox's own setting for files)."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"CREATE TABLE {table}_business (message_id TEXT NOT NULL, body BLOB)")
    connection.execute(
        f"CREATE TABLE {table}_naive (consumer TEXT NOT NULL, source TEXT NOT NULL, message_id TEXT NOT NULL, "
        f"received_at REAL, UNIQUE (consumer, source, message_id))"
    )
    business = f"INSERT INTO {table}_business (message_id, body) VALUES (?, ?)"
    naive_insert = (
        f"INSERT INTO {table}_naive (consumer, source, message_id, received_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING"
    )
    inbox = Inbox(f"sqlite:///{path}", consumer=CONSUMER, table=table)
    inbox.create_schema()

    def bare(messages: list[Message]) -> None:
        for m in messages:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(business, (m.message_id, m.payload))
            connection.execute("COMMIT")

    def naive(messages: list[Message]) -> None:
        for m in messages:
            connection.execute("BEGIN IMMEDIATE")
            if connection.execute(naive_insert, (CONSUMER, m.source, m.message_id, time.time())).rowcount == 1:
                connection.execute(business, (m.message_id, m.payload))
            connection.execute("COMMIT")

    def handler(tx: Tx, m: Message) -> None:
        tx.connection.execute(business, (m.message_id, m.payload))

    def process(messages: list[Message]) -> None:
        for m in messages:
            inbox.process(m, handler)

    def batch(messages: list[Message]) -> None:
        for start in range(0, len(messages), 1000):
            inbox.process_batch(
                messages[start : start + 1000],
                lambda tx, new: tx.connection.executemany(business, [(m.message_id, m.payload) for m in new]),
            )

    try:
        compare(
            f"SQLite file ({path.parent}), one message per transaction",
            {"bare transaction": bare, "naive inbox": naive, "Inbox.process": process},
            size=size,
            chunk=20,
        )
        compare(
            "SQLite file, process_batch of 1,000 messages per transaction",
            {"Inbox.process (1 per tx)": process, "Inbox.process_batch": batch},
            size=5_000,
            chunk=1000,
        )
    finally:
        inbox.close()
        connection.close()


def main() -> None:
    """Run every comparison and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--messages", type=int, default=4000, help="messages per variant, one per transaction")
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    table = "bench_" + uuid.uuid4().hex[:8]
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"edinbox inbox benchmark, {os.cpu_count()} CPUs, load average {load} (the machine is shared)")
    postgres(args.url, table, size=args.messages)
    if not args.skip_sqlite:
        with tempfile.TemporaryDirectory(dir=Path.home()) as folder:
            sqlite(Path(folder) / "bench.db", table, size=args.messages)


if __name__ == "__main__":
    main()
