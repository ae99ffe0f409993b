"""Fixtures of the command-line tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def pg_table(postgres_url: str, unique_name: str) -> Iterator[str]:
    """A journal table in a fresh PostgreSQL schema, dropped afterwards."""
    yield f"{unique_name}.inbox"
    import psycopg
    from psycopg import sql

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(unique_name)))
