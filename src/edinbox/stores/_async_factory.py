"""Pick the store for a URL, a pool or a connection (async; the sync twin is generated from this module)."""
# sync-doc: Pick the store for a URL, a pool or a connection, on blocking drivers.

from __future__ import annotations

from typing import Any

import aiosqlite

from edinbox._application import Application
from edinbox._core import parse_table
from edinbox._errors import ConfigurationError
from edinbox._extras import require
from edinbox._urls import database_url, engine_url, mask
from edinbox.stores._async_base import AsyncStore

__all__ = ["open_store", "sqlite_path"]


def sqlite_path(url: str) -> str:
    """The file of a `sqlite:///relative.db` or `sqlite:////absolute.db` URL; `sqlite://` is in memory."""
    parsed = database_url(url)
    if parsed.dialect != "sqlite":
        raise ConfigurationError(f"{mask(url)!r} is not a SQLite URL")
    return parsed.target


def open_store(target: Any, *, table: str, pool_size: int, applications: tuple[Application, ...] = ()) -> AsyncStore:
    """Return the store for `target`: a postgresql://, mysql:// or sqlite:// URL (or an SQLAlchemy engine's), a
    pool, or the caller's connection; its statements are the library's and `applications`'."""
    if isinstance(target, str):
        parsed = database_url(target)
        if parsed.dialect == "postgresql":
            require(target)
            from edinbox.stores._async_postgres import AsyncPostgresStore

            return AsyncPostgresStore(
                parsed.target, table=parse_table(table, qualified=True), pool_size=pool_size, applications=applications
            )
        if parsed.dialect == "mysql":
            require(target)
            from edinbox.stores._async_mysql import AsyncMySQLStore

            return AsyncMySQLStore(
                target, table=parse_table(table, qualified=True), pool_size=pool_size, applications=applications
            )
        from edinbox.stores._async_sqlite import AsyncSQLiteStore

        return AsyncSQLiteStore(parsed.target, table=parse_table(table, qualified=False), applications=applications)
    if isinstance(target, aiosqlite.Connection):
        from edinbox.stores._async_sqlite import AsyncSQLiteStore

        return AsyncSQLiteStore(target, table=parse_table(table, qualified=False), applications=applications)
    module = type(target).__module__
    if module.split(".", 1)[0] == "sqlalchemy" and hasattr(target, "url"):  # an SQLAlchemy engine
        return open_store(engine_url(target), table=table, pool_size=pool_size, applications=applications)
    if module.split(".", 1)[0] in ("psycopg", "psycopg_pool"):
        from edinbox.stores._async_postgres import AsyncPostgresStore

        return AsyncPostgresStore(
            target, table=parse_table(table, qualified=True), pool_size=pool_size, applications=applications
        )
    # sync: if module.split(".", 1)[0] == "pymysql":
    if module.split(".", 1)[0] == "asyncmy":  # async-only
        from edinbox.stores._async_mysql import AsyncMySQLStore

        return AsyncMySQLStore(
            target, table=parse_table(table, qualified=True), pool_size=pool_size, applications=applications
        )
    raise ConfigurationError(
        f"cannot use a {type(target).__name__} as the inbox database: "
        "pass a URL, a psycopg connection or pool, an SQLite connection or a MariaDB driver's connection"
    )
