"""Inbox cost per message on MariaDB, and the SQLAlchemy session path against the raw connection, side by side.

    .venv/bin/python -m bench.inbox_mariadb [--url mysql://root@127.0.0.1:3306/test] [--postgres URL] [--messages 2000]

1. MariaDB, one message per transaction: the bare business transaction, a naive hand-written inbox (INSERT IGNORE
   into a 3-column journal with a unique key, the business INSERT if it inserted, COMMIT) and `Inbox.process`
   with the same business INSERT in its handler. The bare and naive connections get the store's own session
   settings (READ COMMITTED, strict mode, autocommit off), so isolation and durability are the same for all three;
   then the queries each sends per message are counted on the wire.
2. Joining the caller's transaction, on MariaDB and on PostgreSQL: `Inbox(raw_connection).process` then the
   caller's COMMIT, against `inbox.process(..., session=session)` (the handler writes through the session, in
   `begin_nested()`) then `session.commit()`.
The variants take turns on small chunks of fresh messages (bench.inbox_pg.compare), so other load hits them alike.
"""

from __future__ import annotations

import argparse
import os
import uuid
from collections.abc import Callable
from typing import Any

import pymysql
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from bench.inbox_pg import batches, compare
from edinbox import Inbox, Message, Tx
from edinbox._core import parse_table
from edinbox.stores._mysql_sql import Statements, connect_options

CONSUMER = "bench"


def mariadb(url: str, table: str, *, size: int) -> None:
    """Bare vs naive vs Inbox.process on MariaDB."""
    connection = pymysql.connect(**connect_options(url) | {"autocommit": False})
    with connection.cursor() as cursor:
        for statement in Statements(parse_table(table, qualified=True))["session"]:
            cursor.execute(statement)  # the isolation level and sql_mode of the store's own connections
        cursor.execute(f"CREATE TABLE {table}_business (message_id VARCHAR(100) NOT NULL, body BLOB)")
        cursor.execute(
            f"CREATE TABLE {table}_naive (consumer VARBINARY(512) NOT NULL, source VARBINARY(512) NOT NULL, "
            "message_id VARBINARY(512) NOT NULL, received_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), "
            "UNIQUE KEY (consumer, source, message_id))"
        )
    business = f"INSERT INTO {table}_business (message_id, body) VALUES (%s, %s)"
    naive_insert = f"INSERT IGNORE INTO {table}_naive (consumer, source, message_id) VALUES (%s, %s, %s)"
    inbox = Inbox(url, consumer=CONSUMER, table=table)
    inbox.create_schema()

    def bare(messages: list[Message]) -> None:
        with connection.cursor() as cursor:
            for m in messages:
                cursor.execute(business, (m.message_id, m.payload))
                connection.commit()

    def naive(messages: list[Message]) -> None:
        with connection.cursor() as cursor:
            for m in messages:
                if cursor.execute(naive_insert, (CONSUMER, m.source, m.message_id)) == 1:
                    cursor.execute(business, (m.message_id, m.payload))
                connection.commit()

    def handler(tx: Tx, m: Message) -> None:
        with tx.connection.cursor() as cursor:
            cursor.execute(business, (m.message_id, m.payload))

    def process(messages: list[Message]) -> None:
        for m in messages:
            inbox.process(m, handler)

    try:
        compare(
            "MariaDB, one message per transaction",
            {"bare transaction": bare, "naive inbox": naive, "Inbox.process": process},
            size=size,
            chunk=20,
        )
        print("\n## Queries sent per message (PyMySQL COM_QUERY packets, 100 messages each)")
        for name, variant in {"naive inbox": naive, "Inbox.process": process}.items():
            sent = queries_of(variant, batches(f"wire-{name}-{uuid.uuid4().hex[:6]}-", 1, 100)[0])
            print(f"  {name:<16} {len(sent) / 100:.2f}: " + " | ".join(dict.fromkeys(sent)))
    finally:
        inbox.close()
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {table}, {table}_version, {table}_business, {table}_naive")
        connection.close()


def queries_of(variant: Callable[[list[Message]], None], messages: list[Message]) -> list[str]:
    """The queries (COM_QUERY packets: one round trip each) PyMySQL sends while `variant` handles `messages`, each
    as the first two words of its statements."""
    sent: list[str] = []
    original = pymysql.connections.Connection._execute_command

    def execute(self: Any, command: int, sql: Any) -> Any:
        if command == pymysql.constants.COMMAND.COM_QUERY:
            text = sql.decode(errors="replace") if isinstance(sql, bytes) else str(sql)
            sent.append("; ".join(" ".join(part.split()[:2]) for part in text.split(";\n")))
        return original(self, command, sql)

    pymysql.connections.Connection._execute_command = execute  # type: ignore[method-assign]
    try:
        variant(messages)
    finally:
        pymysql.connections.Connection._execute_command = original  # type: ignore[method-assign]
    return sent


def joined(title: str, sa_url: str, table: str, *, size: int) -> None:
    """Inbox(raw connection).process + COMMIT against process(session=) + session.commit(), on one engine."""
    engine = create_engine(sa_url)
    with engine.begin() as connection:
        connection.execute(text(f"CREATE TABLE {table}_business (message_id VARCHAR(100) NOT NULL)"))
    insert = text(f"INSERT INTO {table}_business (message_id) VALUES (:m)")
    with Inbox(engine, consumer=CONSUMER, table=table) as owner:
        owner.create_schema()
    raw = engine.raw_connection()  # the driver's connection, as an application holding it would pass it
    driver = raw.driver_connection
    raw_inbox = Inbox(driver, consumer=CONSUMER, table=table)
    session_inbox = Inbox(engine, consumer=CONSUMER, table=table)
    statement = str(insert.compile(engine)).replace("%(m)s", "%s")

    def raw_handler(tx: Tx, m: Message) -> None:
        cursor = tx.connection.cursor()
        cursor.execute(statement, (m.message_id,))
        cursor.close()

    def raw_path(messages: list[Message]) -> None:
        for m in messages:
            raw_inbox.process(m, raw_handler)
            driver.commit()

    def session_handler(tx: Tx, m: Message) -> None:
        tx.connection.execute(insert, {"m": m.message_id})

    def session_path(messages: list[Message]) -> None:
        with Session(engine) as session:
            for m in messages:
                session_inbox.process(m, session_handler, session=session)
                session.commit()

    try:
        compare(title, {"raw connection": raw_path, "SQLAlchemy session": session_path}, size=size, chunk=20)
        if engine.dialect.name == "mysql":
            print("  queries sent per message (100 messages each):")
            for name, variant in {"raw connection": raw_path, "SQLAlchemy session": session_path}.items():
                sent = queries_of(variant, batches(f"wire-{name}-{uuid.uuid4().hex[:6]}-", 1, 100)[0])
                print(f"    {name:<20} {len(sent) / 100:.2f}: " + " | ".join(dict.fromkeys(sent)))
    finally:
        raw_inbox.close()
        session_inbox.close()
        raw.close()
        with engine.begin() as connection:
            connection.execute(text(f"DROP TABLE IF EXISTS {table}_business"))
            connection.execute(text(f"DROP TABLE IF EXISTS {table}_version"))
            connection.execute(text(f"DROP TABLE IF EXISTS {table}"))
        engine.dispose()


def main(argv: list[str] | None = None) -> None:
    """Run the comparisons."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args(argv)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"edinbox MariaDB benchmark, {os.cpu_count()} CPUs, load average {load} (the machine is shared)")
    name: Callable[[], str] = lambda: "bench_" + uuid.uuid4().hex[:10]  # noqa: E731
    mariadb(args.url, name(), size=args.messages)
    plain: Any = args.url.split("://", 1)[1]
    joined("MariaDB, joining the caller's transaction", f"mysql+pymysql://{plain}", name(), size=args.messages)
    plain = args.postgres.split("://", 1)[1]
    joined("PostgreSQL, joining the caller's transaction", f"postgresql+psycopg://{plain}", name(), size=args.messages)


if __name__ == "__main__":
    main()
