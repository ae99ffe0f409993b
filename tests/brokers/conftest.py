"""Fixtures shared by the broker proof tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services import POSTGRES_URL, require_service


@pytest.fixture
def postgres_db(unique_name: str) -> Iterator[list[str]]:
    """The --db/--table options of a fresh PostgreSQL schema, dropped afterwards."""
    require_service("postgres")
    import psycopg

    yield ["--db", POSTGRES_URL, "--table", f"{unique_name}.inbox"]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psycopg.sql.Identifier(unique_name)))
