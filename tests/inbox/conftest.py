"""Fixtures of the inbox tests: one harness per store and API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from inbox_harness import Harness, MySQLHarness, PostgresHarness, SQLiteFileHarness, SQLiteMemoryHarness

from services import MYSQL_URL, require_service

STORES = ["postgresql", "mysql", "mysql-no-returning", "sqlite-file", "sqlite-memory"]


def make_harness(store: str, *, asynchronous: bool, name: str, tmp_path: Path, postgres_url: str | None) -> Harness:
    """A fresh harness (fresh table or schema) for `store`."""
    if store == "postgresql":
        assert postgres_url is not None
        return PostgresHarness(postgres_url, schema=name, asynchronous=asynchronous)
    if store in ("mysql", "mysql-no-returning"):  # the second forces MySQL's batch path (no RETURNING) on MariaDB
        returning = False if store == "mysql-no-returning" else None
        return MySQLHarness(MYSQL_URL, table=name, asynchronous=asynchronous, returning=returning)
    if store == "sqlite-file":
        return SQLiteFileHarness(tmp_path / "inbox.db", table=name, asynchronous=asynchronous)
    return SQLiteMemoryHarness(table=name, asynchronous=asynchronous)


@pytest.fixture
def harness_factory(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[object]:
    """Build harnesses on demand and close them after the test."""
    made: list[Harness] = []

    def factory(store: str, *, asynchronous: bool, **options: object) -> Harness:
        url = request.getfixturevalue("postgres_url") if store == "postgresql" else None
        if store.startswith("mysql"):
            require_service("mariadb")
        harness = make_harness(
            store, asynchronous=asynchronous, name=f"{unique_name}{len(made)}", tmp_path=tmp_path, postgres_url=url
        )
        made.append(harness)
        harness.make(harness.target, **options)
        return harness

    yield factory
    for harness in reversed(made):
        harness.close()
