"""Fixtures for the hub's tests: a spool folder, a database (SQLite file, a fresh PostgreSQL schema or MariaDB
database) `init` made."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from edinbox.hub import HubConfig
from hub_ops import init
from journal_pool import MYSQL_DATABASE, POSTGRES_SCHEMA, Admin, JournalPool
from services import MYSQL_URL, POSTGRES_URL, require_service
from sources.test_rabbitmq import drop


@pytest.fixture
def spool(tmp_path: Path) -> Path:
    """An empty spool folder."""
    path = tmp_path / "spool"
    path.mkdir()
    return path


def drop_schema(url: str, schema: str) -> None:
    """Drop a test schema and everything in it."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextlib.contextmanager
def _admin(url: str) -> Iterator[Admin]:
    """Run statements on the shared MariaDB (as root, no database selected) or PostgreSQL, autocommit, on a
    connection of their own, closed after."""
    if url.startswith("mysql"):
        import pymysql

        mariadb = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)

        def on_mariadb(statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
            with mariadb.cursor() as cursor:
                cursor.execute(statement, params or None)
                return list(cursor.fetchall())

        try:
            yield on_mariadb
        finally:
            mariadb.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as postgres:

        def on_postgres(statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
            cursor = postgres.execute(statement.encode(), params)
            return cursor.fetchall() if cursor.description else []

        yield on_postgres


@pytest.fixture(scope="session")
def _hub_journals() -> Iterator[dict[str, JournalPool]]:
    """The hub databases (MariaDB) and schemas (PostgreSQL) this test process keeps between its tests, `init` made
    (`journal_pool.py`): given back emptied when a test left them as `init` made them, dropped at the end."""
    pools = {"mysql": JournalPool(MYSQL_DATABASE), "postgresql": JournalPool(POSTGRES_SCHEMA)}
    yield pools
    for kind, pool in pools.items():
        if pool.kept:
            with _admin(MYSQL_URL if kind == "mysql" else POSTGRES_URL) as admin:
                pool.drop_all(admin)


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def hub_config(request: pytest.FixtureRequest, tmp_path: Path, spool: Path) -> Iterator[HubConfig]:
    """A hub configuration on a fresh SQLite file, or an empty PostgreSQL schema or MariaDB database that `init` made
    and no other test uses meanwhile (kept for the process's next tests when this one left it as made: see
    `journal_pool.py`)."""
    if request.param == "sqlite":
        config = HubConfig(db=f"sqlite:///{tmp_path / 'hub.db'}", source=f"dir://{spool}", idle_timeout=0.2)
        asyncio.run(init(config))
        yield config
        return
    if request.param == "mysql":
        require_service("mariadb")
        url = MYSQL_URL
    else:
        url = request.getfixturevalue("postgres_url")
    pool = request.getfixturevalue("_hub_journals")[request.param]
    name, made = pool.take()
    config = HubConfig(db=url, table=f"{name}.inbox", source=f"dir://{spool}", idle_timeout=0.2)
    if made is None:
        asyncio.run(init(config))
        with _admin(url) as admin:
            made = pool.shape(admin, name)
    yield config
    with _admin(url) as admin:
        if not pool.give_back(admin, name, made):
            pool.drop(admin, name)


@pytest.fixture
async def queue() -> AsyncIterator[str]:
    """A fresh quorum queue name; the queue, its dead-letter exchange and queue are deleted afterwards."""
    require_service("rabbitmq")
    name = "hub" + uuid.uuid4().hex[:12]
    yield name
    await drop(name)
