"""A batch on MariaDB: `INSERT IGNORE ... RETURNING` (MariaDB's path) against one INSERT IGNORE per message (the
path MySQL 8 takes, forced here with the store's `returning = False`), side by side.

    .venv/bin/python -m bench.mysql_batch [--url mysql://root@127.0.0.1:3306/test] [--messages 4000] [--batch 50]

Each variant runs `Inbox.process_batch` on batches of fresh messages (new keys: the insert path), then on the same
batches again (every key a duplicate: the insert finds nothing to insert); the handler writes one business row
per message. The variants take turns on small chunks (bench.inbox_pg.compare), so other load hits them alike.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable

import pymysql

from bench.inbox_pg import compare
from edinbox import Inbox, Message, Tx
from edinbox.stores._mysql_sql import connect_options

CONSUMER = "bench"


def run(url: str, table: str, *, size: int, batch: int) -> None:
    """RETURNING vs one INSERT per message, for new batches and for redelivered ones."""
    inboxes = {
        "RETURNING": Inbox(url, consumer=CONSUMER, table=table),
        "one INSERT each": Inbox(url, consumer=CONSUMER, table=table),
    }
    inboxes["one INSERT each"]._store.returning = False  # type: ignore[attr-defined]
    inboxes["RETURNING"].create_schema()
    admin = pymysql.connect(**connect_options(url))
    with admin.cursor() as cursor:  # DDL outside the inbox (MariaDB commits it on its own)
        cursor.execute(f"CREATE TABLE {table}_business (message_id VARCHAR(100))")
    business = f"INSERT INTO {table}_business (message_id) VALUES (%s)"

    def handler(tx: Tx, messages: list[Message]) -> None:
        with tx.connection.cursor() as cursor:
            cursor.executemany(business, [(m.message_id,) for m in messages])

    def variant(inbox: Inbox, *, again: bool) -> Callable[[list[Message]], None]:
        def go(messages: list[Message]) -> None:
            for start in range(0, len(messages), batch):
                inbox.process_batch(messages[start : start + batch], handler)
                if again:
                    inbox.process_batch(messages[start : start + batch], handler)

        return go

    try:
        compare(
            f"MariaDB, new batches of {batch}",
            {name: variant(inbox, again=False) for name, inbox in inboxes.items()},
            size=size,
            chunk=batch * 4,
        )
        compare(
            f"MariaDB, batches of {batch} each delivered twice",
            {name: variant(inbox, again=True) for name, inbox in inboxes.items()},
            size=size,
            chunk=batch * 4,
        )
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {table}, {table}_version, {table}_outbox, {table}_business")
        admin.close()
        for inbox in inboxes.values():
            inbox.close()


def main(argv: list[str] | None = None) -> None:
    """Run the comparison."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args(argv)
    run(args.url, "bench_" + uuid.uuid4().hex[:10], size=args.messages, batch=args.batch)


if __name__ == "__main__":
    main()
