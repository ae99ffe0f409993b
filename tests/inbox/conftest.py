"""Fixtures of the inbox tests: one harness per store and API."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest
from inbox_harness import Harness, MySQLHarness, PostgresHarness, SQLiteFileHarness, SQLiteMemoryHarness

from edinbox.stores._mysql_sql import connect_options
from journal_pool import MYSQL_TABLES, POSTGRES_SCHEMA, JournalPool
from services import MYSQL_URL, POSTGRES_URL, require_service

STORES = ["postgresql", "mysql", "mysql-no-returning", "sqlite-file", "sqlite-memory"]


def make_harness(store: str, *, asynchronous: bool, name: str, tmp_path: Path) -> Harness:
    """A fresh harness (fresh table) for an SQLite `store` (the servers' journals come from a pool)."""
    if store == "sqlite-file":
        return SQLiteFileHarness(tmp_path / "inbox.db", table=name, asynchronous=asynchronous)
    return SQLiteMemoryHarness(table=name, asynchronous=asynchronous)


@pytest.fixture(scope="session")
def mysql_journals() -> Iterator[JournalPool]:
    """The MariaDB journals this test process keeps between its tests (`journal_pool.py`), dropped at its end."""
    pool = JournalPool(MYSQL_TABLES)
    yield pool
    if pool.kept:
        options = {k: v for k, v in connect_options(MYSQL_URL).items() if k != "client_flag"}
        connection = pymysql.connect(**options | {"autocommit": True})

        def admin(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
            with connection.cursor() as cursor:
                cursor.execute(sql, tuple(params) or None)
                return list(cursor.fetchall())

        try:
            pool.drop_all(admin)
        finally:
            connection.close()


@pytest.fixture(scope="session")
def postgres_journals() -> Iterator[JournalPool]:
    """The PostgreSQL journals (schemas) this test process keeps between its tests, dropped at its end."""
    pool = JournalPool(POSTGRES_SCHEMA)
    yield pool
    if pool.kept:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:

            def admin(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
                connection.execute(sql.encode(), params)
                return []

            pool.drop_all(admin)


def pooled_harness(store: str, *, asynchronous: bool, pool: JournalPool, postgres_url: str | None) -> Harness:
    """A harness on a journal from `pool` (its schema created, and its shape noted, when it is new)."""
    name, made = pool.take()
    if store == "postgresql":
        assert postgres_url is not None
        return PostgresHarness(postgres_url, schema=name, asynchronous=asynchronous, pool=pool, made=made)
    returning = False if store == "mysql-no-returning" else None  # MySQL's batch path (no RETURNING) on MariaDB
    return MySQLHarness(MYSQL_URL, table=name, asynchronous=asynchronous, returning=returning, pool=pool, made=made)


@pytest.fixture
def harness_factory(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[object]:
    """Build harnesses on demand and close them after the test (MariaDB's and PostgreSQL's on journals kept
    between tests)."""
    made: list[Harness] = []

    def factory(store: str, *, asynchronous: bool, **options: object) -> Harness:
        url = request.getfixturevalue("postgres_url") if store == "postgresql" else None
        harness: Harness
        if store.startswith("mysql") or store == "postgresql":
            if store.startswith("mysql"):
                require_service("mariadb")
            pool = request.getfixturevalue("postgres_journals" if url else "mysql_journals")
            harness = pooled_harness(store, asynchronous=asynchronous, pool=pool, postgres_url=url)
        else:
            name = f"{unique_name}{len(made)}"
            harness = make_harness(store, asynchronous=asynchronous, name=name, tmp_path=tmp_path)
        made.append(harness)
        harness.make(harness.target, **options)
        if isinstance(harness, MySQLHarness | PostgresHarness) and harness.made is None:
            harness.made = harness.pool.shape(harness.admin, harness.schema if url else harness.table)
        return harness

    yield factory
    for harness in reversed(made):
        harness.close()
