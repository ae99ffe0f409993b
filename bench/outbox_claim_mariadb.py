"""The relay's claim on MariaDB: the one locking read it was (through the unsent rows' index) against the two steps
it is (a plain read of the next row of each key, then a locking read of those rows on the primary key), side by side.

    .venv/bin/python -m bench.outbox_claim_mariadb [--url mysql://root@127.0.0.1:3306/test] [--sent 200000]

Four outboxes, in database `bench_claim` (dropped at the end), each `--sent` sent rows (kept until the purge), then
its unsent rows: "spread", 50 over 1,000 keys; "hot key", 2,000 of one key; "held keys", 1,000 over 100 keys (10
each), the first row of each key held by another connection (a relay inside its send); "held", 1,000 over 1,000 keys,
the first 100 held by another connection. Each claim (LIMIT 100) runs on a connection with the store's own
session (READ COMMITTED) and is rolled back. Printed per outbox and claim: the median time of 30 claims, the rows
one more claim returned and how many unsent rows it held locked (beyond the other relay's), each asked for by another
connection with FOR UPDATE NOWAIT.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import pymysql

from bench.inbox_mariadb import connect
from edinbox import Inbox
from edinbox._core import parse_table
from edinbox.stores._mysql_sql import Statements

LIMIT = 100
ONE_READ = """SELECT id, destination, `key`, payload, headers FROM {outbox} AS o
WHERE sent_at IS NULL AND parked_at IS NULL
    AND NOT EXISTS (
        SELECT 1 FROM {outbox} AS p
        WHERE p.destination = o.destination AND p.`key` = o.`key` AND p.id < o.id
            AND p.sent_at IS NULL AND p.parked_at IS NULL
    )
ORDER BY id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED"""
"""The claim before the two steps (`outbox.sql`'s outbox_claim until then)."""


def one_read(cursor: Any, statements: Statements) -> list[Any]:
    """The claim as one locking read."""
    cursor.execute(ONE_READ.format(outbox=statements.beside("inbox_outbox")), {"limit": LIMIT})
    return list(cursor.fetchall())


def two_steps(cursor: Any, statements: Statements) -> list[Any]:
    """The claim as the store runs it (`_MySQLUnit._claim`): candidates, then a locking read of them, in windows."""
    claimed: list[Any] = []
    after = 0
    while len(claimed) < LIMIT:
        cursor.execute(statements["outbox_claim"][0], {"limit": LIMIT, "after": after})
        heads = [row[0] for row in cursor.fetchall()]
        if heads:
            texts, bound = statements.bind("outbox_lock", {"ids": heads, "limit": LIMIT - len(claimed)})
            cursor.execute(texts[0], bound)
            claimed += cursor.fetchall()
        if len(heads) < LIMIT:
            break
        after = heads[-1]
    return claimed


def fill(cursor: Any, outbox: str, rows: list[tuple[str, bool]]) -> None:
    """Insert `(key, sent)` rows into `outbox`, in order, 1,000 a statement."""
    for first in range(0, len(rows), 1000):
        chunk = rows[first : first + 1000]
        values = ", ".join("('dir:///o', %s, x'00', " + ("UTC_TIMESTAMP(6))" if sent else "NULL)") for _, sent in chunk)
        cursor.execute(
            f"INSERT INTO {outbox} (destination, `key`, payload, sent_at) VALUES {values}", [k for k, _ in chunk]
        )


def refused(prober: Any, outbox: str) -> int:
    """How many unsent rows of `outbox` another transaction holds: each asked for with FOR UPDATE NOWAIT."""
    with prober.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {outbox} WHERE sent_at IS NULL")
        held = 0
        for (row,) in cursor.fetchall():
            try:
                cursor.execute(f"SELECT id FROM {outbox} WHERE id = %s FOR UPDATE NOWAIT", (row,))
            except pymysql.err.OperationalError:
                held += 1
    prober.rollback()
    return held


def measure(connection: Any, prober: Any, statements: Statements, claim: Callable[[Any, Statements], list[Any]]) -> str:
    """Median time of 30 claims (each rolled back), the rows the last returned, and the rows a claim holds locked
    (beyond those another relay holds), as one line's fields."""
    outbox = statements.beside("inbox_outbox")
    before = refused(prober, outbox)
    times = []
    with connection.cursor() as cursor:
        for _ in range(30):
            start = time.perf_counter()
            claim(cursor, statements)
            times.append(time.perf_counter() - start)
            connection.rollback()
        returned = len(claim(cursor, statements))
        locked = refused(prober, outbox) - before
        connection.rollback()
    return f"{statistics.median(times) * 1000:8.3f} ms  returned {returned:4}  locked {locked:5}"


def main() -> None:
    """Print each outbox's claim, one read against two steps."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--sent", type=int, default=200_000)
    args = parser.parse_args()
    statements = Statements(parse_table("bench_claim.inbox", qualified=True))
    outbox = statements.beside("inbox_outbox")
    sent = [(f"old{n}", True) for n in range(args.sent)]
    cases = {
        "spread": sent + [(f"k{n % 1000}", False) for n in range(50)],
        "hot key": sent + [("hot", False)] * 2000,
        "held keys": sent + [(f"k{n % 100}", False) for n in range(1000)],
        "held": sent + [(f"k{n}", False) for n in range(1000)],
    }
    admin = connect(args.url, statements)
    with admin.cursor() as cursor:
        cursor.execute("DROP DATABASE IF EXISTS bench_claim")
    try:
        for case, rows in cases.items():
            with admin.cursor() as cursor:
                cursor.execute("DROP DATABASE IF EXISTS bench_claim")
            with Inbox(args.url, consumer="bench", table="bench_claim.inbox") as inbox:
                inbox.create_schema()
            with admin.cursor() as cursor:
                fill(cursor, outbox, rows)
                admin.commit()
                cursor.execute(f"ANALYZE TABLE {outbox}")
                cursor.fetchall()
            holder, connection, prober = (connect(args.url, statements) for _ in range(3))
            try:
                if case.startswith("held"):  # another relay inside its send, holding the first 100 rows
                    with holder.cursor() as cursor:
                        one_read(cursor, statements)
                with connection.cursor() as cursor:
                    cursor.execute("EXPLAIN " + ONE_READ.format(outbox=outbox), {"limit": LIMIT})
                    plan = cursor.fetchone()
                print(f"{case:9} one read's plan of o: {plan[3]} on {plan[5]}", flush=True)
                for name, claim in (("one read", one_read), ("two steps", two_steps)):
                    print(f"{case:9} {name:9}  {measure(connection, prober, statements, claim)}", flush=True)
            finally:
                for each in (holder, connection, prober):
                    each.close()
    finally:
        with admin.cursor() as cursor:
            cursor.execute("DROP DATABASE IF EXISTS bench_claim")
        admin.close()


if __name__ == "__main__":
    main()
