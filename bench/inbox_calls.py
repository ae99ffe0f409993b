"""Python calls per `Inbox.process` delivery, counted by cProfile, on every store (timing-free: counts do not move
with the machine's load).

    .venv/bin/python -m bench.inbox_calls [mysql] [postgresql] [sqlite] [--messages 200] [--functions]

Each store gets a fresh journal and a one-statement handler (the business INSERT), then `--messages` new messages
are delivered one by one under cProfile after a warm-up. Printed per delivery: every Python call (the driver's
included: functions and built-ins), then those of edinbox's own functions; `--functions` lists the latter. On
MariaDB, the same queries sent by hand (as bench.inbox_mariadb's "naive, edinbox journal" sends them) are counted
beside it, with the business INSERT on one cursor for all the messages and on a cursor of its own per message (as
the handler of bench.inbox_mariadb's `Inbox.process` variant opens one).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pymysql

from bench.inbox_mariadb import connect
from edinbox import Inbox, Message, Tx
from edinbox._core import parse_table
from edinbox._plan import key_params
from edinbox.stores._mysql_sql import Statements

URLS = {
    "mysql": "mysql://root@127.0.0.1:3306/test",
    "postgresql": "postgresql://postgres@127.0.0.1:5432/test",
}


def counted(deliver: Callable[[Message], object], count: int, prefix: str) -> pstats.Stats:
    """The cProfile statistics of `count` deliveries of fresh messages."""
    messages = [Message(f"{prefix}-{i}", "bench:source", b"x" * 200) for i in range(count)]
    profiler = cProfile.Profile()
    profiler.enable()
    for message in messages:
        deliver(message)
    profiler.disable()
    return pstats.Stats(profiler)


def report(title: str, stats: pstats.Stats, count: int, *, functions: bool) -> None:
    """Print the calls per delivery: all of them, and edinbox's own functions."""
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    ours = {where: row[1] for where, row in table.items() if "/edinbox/" in where[0]}
    every = sum(row[1] for row in table.values())
    print(f"  {title:<58} {every / count:7.1f} {sum(ours.values()) / count:7.1f}")
    if functions:
        for (file, line, name), calls in sorted(ours.items(), key=lambda item: -item[1]):
            print(f"      {calls / count:5.2f}  {file.split('/edinbox/')[-1]}:{line} {name}")


def business_table(store: str, inbox: Inbox, table: str) -> str:
    """Create the business table beside the journal; return its INSERT."""
    if store == "sqlite":
        inbox.transaction(lambda tx: tx.connection.execute(f"CREATE TABLE {table} (id TEXT, body BLOB)"))
        return f"INSERT INTO {table} (id, body) VALUES (?, ?)"
    if store == "postgresql":
        with psycopg.connect(URLS[store], autocommit=True) as admin:
            admin.execute(f"CREATE TABLE {table} (id text, body bytea)".encode())
    else:
        with pymysql.connect(host="127.0.0.1", user="root", database="test") as admin, admin.cursor() as cursor:
            cursor.execute(f"CREATE TABLE {table} (id VARCHAR(100), body BLOB)")
    return f"INSERT INTO {table} (id, body) VALUES (%s, %s)"


def handler_for(store: str, business: str) -> Callable[[Tx, Message], None]:
    """The business INSERT as a handler (on MariaDB on a cursor of its own, as bench.inbox_mariadb's handler)."""

    def on_cursor(tx: Tx, message: Message) -> None:
        with tx.connection.cursor() as cursor:
            cursor.execute(business, (message.message_id, message.payload))

    def on_connection(tx: Tx, message: Message) -> None:
        tx.connection.execute(business, (message.message_id, message.payload))

    return on_cursor if store == "mysql" else on_connection


def by_hand(table: str, business: str, count: int, *, functions: bool) -> None:
    """Count Inbox.process's MariaDB queries sent by hand, business INSERT on a shared or per-message cursor."""
    statements = Statements(parse_table(table, qualified=True))
    connection = connect(URLS["mysql"], statements)
    first = statements["insert_processed"][0]
    shared = connection.cursor()

    def deliver(message: Message, *, own_cursor: bool) -> None:
        shared.execute(first, key_params("bench", message))
        inserted = shared.rowcount == 1
        if inserted and own_cursor:
            with connection.cursor() as cursor:
                cursor.execute(business, (message.message_id, message.payload))
        elif inserted:
            shared.execute(business, (message.message_id, message.payload))
        connection.commit()

    for own_cursor in (False, True):
        prefix = f"hand-{own_cursor}-{uuid.uuid4().hex[:6]}"
        stats = counted(partial(deliver, own_cursor=own_cursor), count, prefix)
        how = "its own cursor per message" if own_cursor else "one cursor for all"
        report(f"same queries by hand, business INSERT on {how}", stats, count, functions=functions)
    shared.close()
    connection.close()


def drop(store: str, table: str) -> None:
    """Drop the journal's tables and the business table from a shared server (an SQLite file goes with its folder)."""
    tables = ", ".join(f"{table}{suffix}" for suffix in ("", "_version", "_outbox", "_business"))
    if store == "postgresql":
        with psycopg.connect(URLS[store], autocommit=True) as admin:
            admin.execute(f"DROP TABLE IF EXISTS {tables}".encode())
    elif store == "mysql":
        with pymysql.connect(host="127.0.0.1", user="root", database="test") as admin, admin.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {tables}")


def main() -> None:
    """Count the calls per delivery on each store asked for."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stores", nargs="*", default=["mysql", "postgresql", "sqlite"])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--functions", action="store_true", help="list edinbox's functions and their calls")
    args = parser.parse_args()
    print(f"## Python calls per delivery ({args.messages} new messages each): all, edinbox's own functions")
    with tempfile.TemporaryDirectory() as folder:
        for store in args.stores:
            table = "calls_" + uuid.uuid4().hex[:8]
            url = URLS.get(store, f"sqlite:///{Path(folder) / 'calls.db'}")
            with Inbox(url, consumer="bench", table=table) as inbox:
                inbox.create_schema()
                business = business_table(store, inbox, f"{table}_business")
                handler = handler_for(store, business)
                for i in range(20):  # warm-up: the connection, the prepared statements
                    inbox.process(Message(f"warm-{i}", "bench:source", b"x" * 200), handler)
                stats = counted(lambda m: inbox.process(m, handler), args.messages, "calls")  # noqa: B023
                report(f"{store}: Inbox.process", stats, args.messages, functions=args.functions)
            if store == "mysql":
                by_hand(table, business, args.messages, functions=False)
            drop(store, table)


if __name__ == "__main__":
    main()
