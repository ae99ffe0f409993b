"""Fixtures of the outbox tests: a fresh journal (with its outbox) on PostgreSQL or SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from edinbox import Inbox


@pytest.fixture(params=["postgresql", "sqlite"])
def db(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """`(database URL, journal table)`: a schema of its own on PostgreSQL, a fresh file on SQLite; schema created."""
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
        table = f"{unique_name}.inbox"
    else:
        url, table = f"sqlite:///{tmp_path / 'outbox.db'}", "inbox"
    with Inbox(url, consumer="setup", table=table) as inbox:
        inbox.create_schema()
    yield url, table
    if request.param == "postgresql":
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA {unique_name} CASCADE".encode())
