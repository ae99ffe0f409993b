"""Fixtures of the inbox tests: one harness per store and API."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pymysql
import pytest
from inbox_harness import Harness, MySQLHarness, PostgresHarness, SQLiteFileHarness, SQLiteMemoryHarness
from mysql_tables import MySQLTables, shape

from edinbox.stores._mysql_sql import connect_options
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


@pytest.fixture(scope="session")
def mysql_tables() -> Iterator[MySQLTables]:
    """The MariaDB journals this test process keeps between its tests (`mysql_tables.py`), dropped at its end."""
    pool = MySQLTables()
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


def make_mysql_harness(store: str, *, asynchronous: bool, pool: MySQLTables) -> MySQLHarness:
    """A harness on a set of tables from `pool` (its schema created, and its shape noted, when it is new)."""
    returning = False if store == "mysql-no-returning" else None  # MySQL's batch path (no RETURNING) on MariaDB
    name, made = pool.take()
    return MySQLHarness(MYSQL_URL, table=name, asynchronous=asynchronous, returning=returning, pool=pool, made=made)


@pytest.fixture
def harness_factory(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[object]:
    """Build harnesses on demand and close them after the test (MariaDB's on tables kept between tests)."""
    made: list[Harness] = []

    def factory(store: str, *, asynchronous: bool, **options: object) -> Harness:
        url = request.getfixturevalue("postgres_url") if store == "postgresql" else None
        harness: Harness
        if store.startswith("mysql"):
            require_service("mariadb")
            harness = make_mysql_harness(store, asynchronous=asynchronous, pool=request.getfixturevalue("mysql_tables"))
        else:
            name = f"{unique_name}{len(made)}"
            harness = make_harness(store, asynchronous=asynchronous, name=name, tmp_path=tmp_path, postgres_url=url)
        made.append(harness)
        harness.make(harness.target, **options)
        if isinstance(harness, MySQLHarness) and harness.made is None:
            harness.made = shape(harness.admin, harness.table)
        return harness

    yield factory
    for harness in reversed(made):
        harness.close()
