"""Fixtures for the hub's tests: a spool folder, a database URL (SQLite file or a fresh PostgreSQL schema)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from edinbox.hub import HubConfig


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


@pytest.fixture(params=["sqlite", "postgresql"])
def hub_config(request: pytest.FixtureRequest, tmp_path: Path, spool: Path, unique_name: str) -> Iterator[HubConfig]:
    """A hub configuration on a fresh SQLite file, or on a fresh PostgreSQL schema (dropped afterwards)."""
    if request.param == "sqlite":
        yield HubConfig(db=f"sqlite:///{tmp_path / 'hub.db'}", source=f"dir://{spool}", idle_timeout=0.2)
        return
    url = request.getfixturevalue("postgres_url")
    yield HubConfig(db=url, table=f"{unique_name}.inbox", source=f"dir://{spool}", idle_timeout=0.2)
    drop_schema(url, unique_name)
