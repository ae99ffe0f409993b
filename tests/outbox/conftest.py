"""Fixtures of the outbox tests: a fresh journal (with its outbox) on PostgreSQL, MariaDB or SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from edinbox import Inbox
from services import MYSQL_URL, drop_database, require_service

SERVERS = ["postgresql", "mariadb"]


def server_url(request: pytest.FixtureRequest, kind: str) -> str:
    """The shared server's test database URL for `kind` ("postgresql" or "mariadb"), skipped when it is down."""
    if kind == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    require_service("mariadb")
    return MYSQL_URL


def drop(url: str, schema: str) -> None:
    """Drop the schema (PostgreSQL) or database (MariaDB) a test's journal lives in."""
    if url.startswith("mysql://"):
        drop_database(schema)
        return
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA {schema} CASCADE".encode())


@pytest.fixture(params=[*SERVERS, "sqlite"])
def db(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """`(database URL, journal table)`: a schema (PostgreSQL) or database (MariaDB) of its own, a fresh file on
    SQLite; schema created."""
    if request.param == "sqlite":
        url, table = f"sqlite:///{tmp_path / 'outbox.db'}", "inbox"
    else:
        url, table = server_url(request, request.param), f"{unique_name}.inbox"
    with Inbox(url, consumer="setup", table=table) as inbox:
        inbox.create_schema()
    yield url, table
    if request.param != "sqlite":
        drop(url, unique_name)


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest, unique_name: str) -> Iterator[tuple[str, str]]:
    """`(database URL, journal table)` on a server that several relays can share (row locks, SKIP LOCKED); the
    schema is not created; dropped afterwards."""
    url = server_url(request, request.param)
    yield url, f"{unique_name}.inbox"
    drop(url, unique_name)
