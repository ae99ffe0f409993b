"""Fixtures for the hub's tests: a spool folder, a database (SQLite file, a fresh PostgreSQL schema or MariaDB
database) `init` made."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from edinbox.hub import HubConfig
from hub_ops import init
from services import MYSQL_URL, drop_database, require_service
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


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def hub_config(request: pytest.FixtureRequest, tmp_path: Path, spool: Path, unique_name: str) -> Iterator[HubConfig]:
    """A hub configuration on a fresh SQLite file, or a fresh PostgreSQL schema or MariaDB database (dropped
    afterwards), initialised."""
    if request.param == "sqlite":
        config = HubConfig(db=f"sqlite:///{tmp_path / 'hub.db'}", source=f"dir://{spool}", idle_timeout=0.2)
        asyncio.run(init(config))
        yield config
        return
    if request.param == "mysql":
        require_service("mariadb")
        config = HubConfig(db=MYSQL_URL, table=f"{unique_name}.inbox", source=f"dir://{spool}", idle_timeout=0.2)
        asyncio.run(init(config))
        yield config
        drop_database(unique_name)
        return
    url = request.getfixturevalue("postgres_url")
    config = HubConfig(db=url, table=f"{unique_name}.inbox", source=f"dir://{spool}", idle_timeout=0.2)
    asyncio.run(init(config))
    yield config
    drop_schema(url, unique_name)


@pytest.fixture
async def queue() -> AsyncIterator[str]:
    """A fresh quorum queue name; the queue, its dead-letter exchange and queue are deleted afterwards."""
    require_service("rabbitmq")
    name = "hub" + uuid.uuid4().hex[:12]
    yield name
    await drop(name)
