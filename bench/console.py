"""The console's search at a million journal rows on PostgreSQL, with its indexes and without them, in one run.

    .venv/bin/python -m bench.console [--url postgresql://...] [--rows 1000000] [--repeat 15]

Fills a fresh schema (`edinbox init`, then rows made by the server with generate_series: 50 partners and a rare
one (a row in 5,000), a status mix, received times over 30 days, one invoice per processed row), then times
`edinbox.console._data.search` (the code path the console's pages run) for each kind of search: median
milliseconds with the indexes `edinbox init` creates, then the same searches after dropping those indexes, and the
ratio. Target: every search under 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
from psycopg import sql

from edinbox.console._data import Query, search
from edinbox.hub import HubConfig
from edinbox.hub.database import on_inbox
from edinbox.hub.database._journal import open_inbox
from edinbox.hub.ops import init

CONSUMER = "accounting"
TARGET_MS = 100.0

FILL = """
INSERT INTO {journal} (consumer, source, message_id, fingerprint, status, attempts, last_error, received_at,
    settled_at)
SELECT %(consumer)s,
    CASE WHEN i %% 5000 = 1 THEN 'X12:ZZ:RAREPARTNER>ZZ:EDINBOXHUB'
        ELSE 'X12:ZZ:PARTNER' || (i %% 50) || '>ZZ:EDINBOXHUB' END,
    lpad(i::text, 9, '0'),
    md5(i::text),
    CASE WHEN i %% 1000 = 7 THEN 'dead' WHEN i %% 1000 = 8 THEN 'conflict' WHEN i %% 1000 = 9 THEN 'failed'
        ELSE 'processed' END,
    1,
    CASE WHEN i %% 1000 IN (7, 9) THEN 'accounting refused' END,
    now() - (i * %(step)s * interval '1 second'),
    now() - (i * %(step)s * interval '1 second')
FROM generate_series(1, %(rows)s) AS i
"""

INVOICES = """
INSERT INTO {invoices} (seller, number, kind, issue_date, buyer, currency, total, tax_total, lines, consumer, source,
    message_id)
SELECT 'PARTNER' || (i %% 50), 'INV-' || i, 'invoice', DATE '2026-12-01', 'BUYER', 'USD', 100, 19, 1, %(consumer)s,
    CASE WHEN i %% 5000 = 1 THEN 'X12:ZZ:RAREPARTNER>ZZ:EDINBOXHUB'
        ELSE 'X12:ZZ:PARTNER' || (i %% 50) || '>ZZ:EDINBOXHUB' END, lpad(i::text, 9, '0')
FROM generate_series(1, %(rows)s) AS i
WHERE i %% 1000 NOT IN (7, 8, 9)
"""

INDEXES = (
    "received_index",
    "status_index",
    "control_index",
    "invoice_number_index",
    "invoice_message_index",
    "partner_index",
)


def searches(rows: int) -> dict[str, Query]:
    """One query per kind of search the console offers, aimed at rows the fill made."""
    middle = rows // 2
    now = datetime.now(UTC)
    return {
        "no filter, page 1": Query(),
        "no filter, page 20": Query(page=20),
        "control number": Query(control=f"{middle:09d}"),
        "invoice number": Query(invoice=f"INV-{middle + 1 if middle % 1000 in (7, 8, 9) else middle}"),
        "partner (substring)": Query(partner="PARTNER17>"),
        "partner (rare: 1 row in 5,000)": Query(partner="rarepartner"),
        "partner (none matches)": Query(partner="NOSUCH"),
        "status dead": Query(status="dead"),
        "date range (1 day, 10 days ago)": Query(since=now - timedelta(days=11), until=now - timedelta(days=10)),
        "partner + status + dates": Query(
            partner="PARTNER3", status="processed", since=now - timedelta(days=20), until=now - timedelta(days=5)
        ),
    }


async def timings(config: HubConfig, queries: dict[str, Query], repeat: int) -> dict[str, tuple[float, int]]:
    """Median milliseconds and rows found of each search, through the console's own search."""
    found: dict[str, tuple[float, int]] = {}
    async with open_inbox(config) as inbox:
        for name, query in queries.items():
            times, count = [], 0
            for _ in range(repeat):
                started = time.perf_counter()
                rows, _more = await search(inbox, query)
                times.append((time.perf_counter() - started) * 1000)
                count = len(rows)
            found[name] = (statistics.median(times), count)
    return found


def main() -> int:
    """Fill, time with and without the console's indexes, print the table; exit 1 when a search misses the target."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    schema = "bench_console_" + uuid.uuid4().hex[:8]
    config = HubConfig(db=args.url, table=f"{schema}.inbox", consumer=CONSUMER)
    asyncio.run(on_inbox(config, lambda inbox: init(inbox, config=config)))
    try:
        with psycopg.connect(args.url, autocommit=True) as conn:
            started = time.perf_counter()
            journal, invoices = sql.Identifier(schema, "inbox"), sql.Identifier(schema, "edinbox_hub_invoices")
            step = 30 * 86400 / args.rows  # 30 days of traffic
            conn.execute(sql.SQL(FILL).format(journal=journal), {"consumer": CONSUMER, "rows": args.rows, "step": step})
            conn.execute(sql.SQL(INVOICES).format(invoices=invoices), {"consumer": CONSUMER, "rows": args.rows})
            conn.execute(sql.SQL("ANALYZE {}").format(journal))
            conn.execute(sql.SQL("ANALYZE {}").format(invoices))
            print(f"filled {args.rows} journal rows and their invoices in {time.perf_counter() - started:.0f} s")
        queries = searches(args.rows)
        indexed = asyncio.run(timings(config, queries, args.repeat))
        with psycopg.connect(args.url, autocommit=True) as conn:
            for index in INDEXES:
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(schema, f"inbox_{index}")))
        bare = asyncio.run(timings(config, queries, max(3, args.repeat // 5)))
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    print(f"\nConsole search on PostgreSQL, {args.rows} journal rows, median of {args.repeat} (without: fewer):")
    print("| search | rows found | with the indexes | without | ratio |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for name, (ms, count) in indexed.items():
        without = bare[name][0]
        worst = max(worst, ms)
        print(f"| {name} | {count} | {ms:.1f} ms | {without:.1f} ms | {without / ms:.0f}x |")
    print(f"\nslowest search with the indexes: {worst:.1f} ms (target < {TARGET_MS:.0f} ms)")
    return 0 if worst < TARGET_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
