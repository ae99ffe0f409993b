"""Pick the store for a URL, a pool or a connection (async; the sync twin is generated from this module)."""

from __future__ import annotations

from typing import Any

import aiosqlite

from edinbox._core import parse_table
from edinbox._errors import ConfigurationError
from edinbox._urls import mask
from edinbox.stores._async_base import AsyncStore

__all__ = ["open_store", "sqlite_path"]


def sqlite_path(url: str) -> str:
    """The file of a `sqlite:///relative.db` or `sqlite:////absolute.db` URL; `sqlite://` is in memory."""
    rest = url.split("://", 1)[1]
    if rest in ("", "/", "/:memory:"):
        return ":memory:"
    if not rest.startswith("/") or rest == "/":
        raise ConfigurationError(f"invalid SQLite URL {url!r}: use sqlite:///relative.db or sqlite:////absolute.db")
    return rest[1:].split("?", 1)[0]


def open_store(target: Any, *, table: str, pool_size: int) -> AsyncStore:
    """Return the store for `target`: a postgresql:// or sqlite:// URL, a pool, or the caller's connection."""
    if isinstance(target, str):
        scheme = target.split("://", 1)[0].lower() if "://" in target else ""
        if scheme in ("postgresql", "postgres"):
            from edinbox.stores._async_postgres import AsyncPostgresStore

            return AsyncPostgresStore(target, table=parse_table(table, qualified=True), pool_size=pool_size)
        if scheme == "sqlite":
            from edinbox.stores._async_sqlite import AsyncSQLiteStore

            return AsyncSQLiteStore(sqlite_path(target), table=parse_table(table, qualified=False))
        raise ConfigurationError(
            f"unsupported database URL {mask(target)!r}: "
            "use postgresql://..., sqlite:///relative.db, sqlite:////absolute.db or sqlite:// (memory)"
        )
    if isinstance(target, aiosqlite.Connection):
        from edinbox.stores._async_sqlite import AsyncSQLiteStore

        return AsyncSQLiteStore(target, table=parse_table(table, qualified=False))
    module = type(target).__module__
    if module.split(".", 1)[0] in ("psycopg", "psycopg_pool"):
        from edinbox.stores._async_postgres import AsyncPostgresStore

        return AsyncPostgresStore(target, table=parse_table(table, qualified=True), pool_size=pool_size)
    raise ConfigurationError(
        f"cannot use a {type(target).__name__} as the inbox database: "
        "pass a URL, a psycopg connection or pool, or an SQLite connection"
    )
