"""Where a delivery's time goes on MariaDB, step by step: the naive inbox, the journal's INSERT by hand (version 6's
and the current one) and `Inbox.process`, side by side.

    .venv/bin/python -m bench.mariadb_steps [--url mysql://root@127.0.0.1:3306/test] [--turns 150] [--chunk 20]

Each variant sends the same three queries per message (its journal INSERT, the business INSERT on a cursor of its
own, COMMIT) on a connection of its own. PyMySQL's sending of a query and its reading of the reply are timed, so a
delivery splits into seven steps: the client's Python before the journal INSERT, that INSERT's round trip (sent to
reply read), the Python before the business INSERT, its round trip, the Python before COMMIT, its round trip, the
Python until `process` returns. Printed per variant: the median of each step (us), the mean of the whole and the
client's CPU per message. "journal v6 INSERT" is the INSERT of journal version 6 (every column named) on a table
with version 6's defaults; "journal INSERT" is the store's `insert_processed` now. The variants take turns on
`--chunk` fresh messages, the order rotated every turn.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import pymysql

from bench.inbox_mariadb import connect, load
from bench.inbox_pg import batches
from edinbox import Inbox, Message, Tx
from edinbox._core import parse_table
from edinbox._plan import key_params
from edinbox.stores._mysql_sql import Statements
from edinbox.stores._pymysql_replies import QuickReplies

CONSUMER = "bench"
STEPS = ("Python", "INSERT", "Python", "business", "Python", "COMMIT", "Python")
V6_INSERT = (
    "INSERT IGNORE INTO {table} (consumer, source, message_id, fingerprint, status, attempts, received_at, settled_at)"
    " VALUES (%(consumer)s, %(source)s, %(message_id)s, %(fingerprint)s, 'processed', 1, UTC_TIMESTAMP(6),"
    " UTC_TIMESTAMP(6))"
)
V6_DEFAULTS = (
    "ALTER COLUMN status DROP DEFAULT, ALTER COLUMN attempts SET DEFAULT 0, ALTER COLUMN received_at DROP DEFAULT,"
    " ALTER COLUMN settled_at DROP DEFAULT"
)
"""Journal version 6's defaults (none for status and the timestamps, 0 attempts)."""


@contextmanager
def marked(events: list[int]) -> Iterator[None]:
    """Append a perf_counter_ns() stamp to `events` when PyMySQL sends a query and when it has read its reply, on
    PyMySQL's connection and on the store's (`QuickReplies` reads replies by methods of its own)."""
    stamp = time.perf_counter_ns
    saved: list[tuple[type, str, Any]] = []

    def sending(execute: Any) -> Any:
        def sent(self: Any, command: int, sql: Any) -> Any:
            events.append(stamp())
            return execute(self, command, sql)

        return sent

    def reading(read: Any) -> Any:
        def done(self: Any, *args: Any, **kwargs: Any) -> Any:
            reply = read(self, *args, **kwargs)
            events.append(stamp())
            return reply

        return done

    wrappers = {"_execute_command": sending, "_read_query_result": reading, "_read_ok_packet": reading}
    for cls in (pymysql.connections.Connection, QuickReplies):
        for name, wrap in wrappers.items():
            if name in vars(cls):  # each method stamped once, where it is defined
                saved.append((cls, name, vars(cls)[name]))
                setattr(cls, name, wrap(vars(cls)[name]))
    try:
        yield
    finally:
        for cls, name, method in saved:
            setattr(cls, name, method)


def _create_tables(admin: Any, table: str, journals: dict[str, str]) -> None:
    """Take the v6 journal back to its defaults, and create the business table and the naive inbox's table."""
    with admin.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {journals['v6']} {V6_DEFAULTS}")
        cursor.execute(f"CREATE TABLE {table}_business (message_id VARCHAR(100) NOT NULL, body BLOB)")
        cursor.execute(
            f"CREATE TABLE {table}_naive (consumer VARBINARY(512) NOT NULL, source VARBINARY(512) NOT NULL, "
            "message_id VARBINARY(512) NOT NULL, received_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), "
            "UNIQUE KEY (consumer, source, message_id))"
        )


def _report(steps: dict[str, list[list[int]]], cpu: dict[str, float], total: int) -> None:
    """Print each variant's median time per step, the mean of the whole and the client CPU per message."""
    print(f"  median us per step ({total} messages each), mean of the whole, client CPU us per message")
    print(f"  {'variant':<18} " + " ".join(f"{s:>8}" for s in STEPS) + f" {'whole':>7} {'CPU':>5}")
    for name, times in steps.items():
        if not times[0]:
            print(f"  {name:<18} no delivery sent exactly three queries: nothing to split")
            continue
        medians = " ".join(f"{statistics.median(t) / 1000:8.1f}" for t in times)
        whole = sum(map(sum, times)) / len(times[0]) / 1000
        print(f"  {name:<18} {medians} {whole:7.1f} {cpu[name] / total * 1e6:5.0f}")


def _run(variants: dict[str, Callable[[Message], object]], turns: int, chunk: int) -> None:
    """Warm each variant up, then time `turns` turns of `chunk` fresh messages each, the order rotated every turn, and
    print the steps of the deliveries that sent exactly the three queries."""
    steps: dict[str, list[list[int]]] = {name: [[] for _ in STEPS] for name in variants}
    cpu = dict.fromkeys(variants, 0.0)
    order = list(variants)
    for name, deliver in variants.items():  # warm-up
        for m in batches(f"warm-{name[:8]}-{uuid.uuid4().hex[:6]}-", 1, chunk)[0]:
            deliver(m)
    events: list[int] = []
    with marked(events):
        for turn in range(turns):
            order = order[1:] + order[:1]
            for name in order:
                deliver = variants[name]
                for m in batches(f"{name[:8]}-{turn}-{uuid.uuid4().hex[:6]}-", 1, chunk)[0]:
                    events.clear()
                    started = time.thread_time()
                    events.append(time.perf_counter_ns())
                    deliver(m)
                    events.append(time.perf_counter_ns())
                    cpu[name] += time.thread_time() - started
                    if len(events) == len(STEPS) + 1:  # the three queries, nothing else
                        for step, (a, b) in enumerate(pairwise(events)):
                            steps[name][step].append(b - a)
    _report(steps, cpu, turns * chunk)


def main(argv: list[str] | None = None) -> None:
    """Run the variants and print each one's steps."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--turns", type=int, default=150)
    parser.add_argument("--chunk", type=int, default=20)
    args = parser.parse_args(argv)
    table = "bench_" + uuid.uuid4().hex[:10]
    statements = Statements(parse_table(table, qualified=True))
    admin = connect(args.url, statements)
    journals = {name: f"{table}_{name}" for name in ("v6", "journal", "process")}
    inboxes = {name: Inbox(args.url, consumer=CONSUMER, table=journal) for name, journal in journals.items()}
    for inbox in inboxes.values():
        inbox.create_schema()
    business = f"INSERT INTO {table}_business (message_id, body) VALUES (%s, %s)"
    _create_tables(admin, table, journals)

    opened: list[Any] = []  # the hand-written variants' connections, closed before the tables are dropped

    def by_hand(insert: str, values: Callable[[Message], Any]) -> Callable[[Message], None]:
        connection = connect(args.url, statements)
        opened.append(connection)
        cursor = connection.cursor()

        def deliver(m: Message) -> None:
            cursor.execute(insert, values(m))
            if cursor.rowcount == 1:
                with connection.cursor() as own:
                    own.execute(business, (m.message_id, m.payload))
            connection.commit()

        return deliver

    def handler(tx: Tx, m: Message) -> None:
        with tx.connection.cursor() as cursor:
            cursor.execute(business, (m.message_id, m.payload))

    naive = f"INSERT IGNORE INTO {table}_naive (consumer, source, message_id) VALUES (%s, %s, %s)"
    variants: dict[str, Callable[[Message], object]] = {
        "naive inbox": by_hand(naive, lambda m: (CONSUMER, m.source, m.message_id)),
        "journal v6 INSERT": by_hand(V6_INSERT.format(table=journals["v6"]), lambda m: key_params(CONSUMER, m)),
        "journal INSERT": by_hand(
            Statements(parse_table(journals["journal"], qualified=True))["insert_processed"][0],
            lambda m: key_params(CONSUMER, m),
        ),
        "Inbox.process": lambda m: inboxes["process"].process(m, handler),
    }
    print(f"edinbox MariaDB steps, before: {load()}")
    try:
        _run(variants, args.turns, args.chunk)
    finally:
        for inbox in inboxes.values():
            inbox.close()
        for connection in opened:
            connection.close()
        with admin.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {table}_business, {table}_naive")
            for journal in journals.values():
                cursor.execute(f"DROP TABLE IF EXISTS {journal}, {journal}_version, {journal}_outbox")
        admin.close()
    print(f"after: {load()}")


if __name__ == "__main__":
    main()
