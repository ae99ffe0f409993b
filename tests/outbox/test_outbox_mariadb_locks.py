"""What the relay locks on MariaDB, and what it does when the server ends one of its statements in a lock conflict.

A relay holds the rows of its claim until they are marked, and nothing else: a relay on a caller's connection at
REPEATABLE READ (MariaDB's default) lets the publishers insert while it sends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pymysql
import pytest

from edinbox import Inbox, Outgoing
from edinbox.stores._mysql_sql import connect_options
from services import MYSQL_URL, drop_database, require_service


def connect(**options: Any) -> pymysql.Connection:
    """A PyMySQL connection of the test's own to the test database (autocommit off unless asked)."""
    settings = {k: v for k, v in connect_options(MYSQL_URL).items() if k in ("host", "port", "user", "database")}
    return pymysql.connect(**settings, **options)


@pytest.fixture
def table(unique_name: str) -> Iterator[str]:
    """A journal with its outbox in a database of its own, dropped afterwards."""
    require_service("mariadb")
    name = f"{unique_name}.inbox"
    with Inbox(MYSQL_URL, consumer="c", table=name) as inbox:
        inbox.create_schema()
    yield name
    drop_database(unique_name)


def quoted(table: str) -> str:
    """The outbox of journal `table` (`schema.name`), quoted for MariaDB."""
    return ".".join(f"`{part}`" for part in f"{table}_outbox".split("."))


def test_a_relay_at_repeatable_read_holds_up_no_publish(table: str) -> None:
    """While a relay on a caller's connection at REPEATABLE READ is inside its send, a transaction publishes at once:
    the claim locked its rows alone (its locking read through the unsent rows' index took the gap after the last
    unsent row, where every publish inserts, and the publish waited for the whole send)."""
    with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
        inbox.transaction(lambda tx: tx.publish_many([("dir:///o", b"1", "a"), ("dir:///o", b"2", "b")]))
    inside, release = threading.Event(), threading.Event()

    def slow(destination: str, messages: Sequence[Outgoing]) -> None:
        inside.set()
        assert release.wait(60)

    relay_connection = connect(autocommit=True)
    relay_connection.cursor().execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    def hold() -> None:
        with Inbox(relay_connection, consumer="c", table=table) as mine:
            mine.relay(slow)

    relay = threading.Thread(target=hold)
    relay.start()
    publisher = connect(autocommit=True)
    publisher.cursor().execute("SET SESSION innodb_lock_wait_timeout = 3")
    try:
        assert inside.wait(30)
        started = time.monotonic()
        with Inbox(publisher, consumer="c", table=table) as inbox:
            inbox.transaction(lambda tx: tx.publish("dir:///o", b"3", key="c"))
        assert time.monotonic() - started < 2
    finally:
        release.set()
        relay.join(30)
        publisher.close()
        relay_connection.close()
    with Inbox(MYSQL_URL, consumer="c", table=table) as inbox:
        assert inbox.outbox_stats().backlog == 1
