"""One relay claim (`outbox_claim`, LIMIT 100, 50 unsent rows) with 0 and 200,000 sent rows before it, without the
version-6 index `<journal>_outbox_unsent` (as on version 5) and with it, side by side in one run.

    .venv/bin/python -m bench.outbox_claim [--url postgresql://postgres@127.0.0.1/test] [--sent 200000]

SQLite runs in memory without ANALYZE (as a journal is used); PostgreSQL in schema `bench_claim` (dropped at the
end) after VACUUM ANALYZE. Each figure is the median of 30 claims, each in its own transaction.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import time
from collections.abc import Callable

import psycopg

from edinbox._core import parse_table
from edinbox.stores import _postgres_sql, _sqlite_sql

DDL = ("outbox_create", "outbox_create_pending")


def _median_ms(run: Callable[[], object]) -> float:
    """Median of 30 runs of `run`, in milliseconds."""
    times = []
    for _ in range(30):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def sqlite_claim(sent: int, indexed: bool, url: str) -> float:
    """Median claim time on an in-memory SQLite outbox with `sent` sent rows then 50 unsent ones."""
    statements = _sqlite_sql.Statements(parse_table("bench", qualified=False))
    db = sqlite3.connect(":memory:", isolation_level=None)
    for name in DDL + (("outbox_create_unsent",) if indexed else ()):
        db.execute(statements[name])
    rows = [("d", f"k{i % 1000}", 1.0 if i < sent else None) for i in range(sent + 50)]
    db.executemany(
        "INSERT INTO bench_outbox (destination, key, payload, created_at, sent_at) VALUES (?, ?, x'00', 1, ?)", rows
    )
    claim = statements["outbox_claim"]
    return _median_ms(lambda: db.execute(claim, {"limit": 100}).fetchall())


def postgres_claim(sent: int, indexed: bool, url: str) -> float:
    """Median claim time (FOR UPDATE SKIP LOCKED, in a transaction) on a PostgreSQL outbox like SQLite's."""
    statements = _postgres_sql.Statements(parse_table("bench_claim.bench", qualified=True))
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DROP SCHEMA IF EXISTS bench_claim CASCADE")
        connection.execute("CREATE SCHEMA bench_claim")
        for name in DDL + (("outbox_create_unsent",) if indexed else ()):
            connection.execute(statements[name])
        connection.execute(
            "INSERT INTO bench_claim.bench_outbox (destination, key, payload, sent_at) SELECT 'd', 'k' || (g %% 1000),"
            " '\\x00', CASE WHEN g <= %s THEN now() END FROM generate_series(1, %s) g",
            (sent, sent + 50),
        )
        connection.execute("VACUUM ANALYZE bench_claim.bench_outbox")
        claim = statements["outbox_claim"]

        def run() -> None:
            with connection.transaction():
                connection.execute(claim, {"limit": 100}).fetchall()

        median = _median_ms(run)
        connection.execute("DROP SCHEMA bench_claim CASCADE")
    return median


def main() -> None:
    """Print each dialect's claim time without and with the index, and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1/test")
    parser.add_argument("--sent", type=int, default=200_000)
    args = parser.parse_args()
    for dialect, claim in (("sqlite", sqlite_claim), ("postgresql", postgres_claim)):
        for sent in (0, args.sent):
            old, new = claim(sent, False, args.url), claim(sent, True, args.url)
            print(f"{dialect:10} sent={sent:>7}  v5 {old:8.3f} ms  v6 {new:8.3f} ms  v5/v6 {old / new:6.1f}")


if __name__ == "__main__":
    main()
