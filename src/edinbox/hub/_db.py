"""The hub's own connection to the database (its tables beside the journal), for PostgreSQL and SQLite.

Statements are written once with `?` placeholders and `{name}` identifiers; identifiers are validated against a
strict pattern and quoted by the driver (psycopg.sql.Identifier) or, for SQLite, quoted after validation. User text
only ever travels as bound parameters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote, urlsplit

from edinbox._errors import ConfigurationError, StoreError
from edinbox._urls import mask

__all__ = ["Database", "Names", "check_reachable", "connect", "dialect_of", "execute", "sqlite_path", "statement"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def dialect_of(url: str) -> str:
    """Return "postgresql" or "sqlite" for a database URL, or raise ConfigurationError."""
    scheme = urlsplit(url).scheme
    if scheme in ("postgresql", "postgres"):
        return "postgresql"
    if scheme == "sqlite":
        return "sqlite"
    raise ConfigurationError(f"unsupported database URL {mask(url)!r}: use postgresql://... or sqlite:///path.db")


def sqlite_path(url: str) -> str:
    """The file a SQLite URL names: `sqlite:///hub.db` is relative, `sqlite:////var/lib/hub.db` absolute.

    The hub refuses the in-memory database: its own connection must see the journal's tables.
    """
    parts = urlsplit(url)
    path = unquote(parts.netloc + parts.path)
    path = path[1:] if path.startswith("/") else path
    if not path or path == ":memory:":
        raise ConfigurationError("the hub needs a database file (sqlite:///path.db), not an in-memory database")
    return path


def check_reachable(url: str) -> None:
    """Fail early, with a clear sentence, when a SQLite file's folder does not exist (nothing would be created)."""
    if dialect_of(url) != "sqlite":
        return
    folder = Path(sqlite_path(url)).parent
    if not folder.is_dir():
        raise StoreError(f"cannot open {mask(url)}: the folder {folder} does not exist")


@dataclass(frozen=True, slots=True)
class Names:
    """The hub's tables, in the schema of the journal table (`edi.inbox` puts them in `edi`)."""

    schema: str | None
    journal: str

    @classmethod
    def for_table(cls, table: str) -> Names:
        """Split and validate a journal table name such as `inbox` or `edi.inbox`."""
        parts = table.split(".")
        if len(parts) > 2 or not all(_IDENT.match(p) for p in parts):
            raise ConfigurationError(f"invalid table name {table!r}: letters, digits and _ only, optionally schema.")
        return cls(parts[0] if len(parts) == 2 else None, parts[-1])

    def qualified(self, name: str) -> tuple[str, ...]:
        """The parts of a hub table's qualified name."""
        return (self.schema, name) if self.schema else (name,)

    def identifiers(self) -> dict[str, tuple[str, ...]]:
        """Identifier parts for every `{name}` used in the hub's statements."""
        return {
            "journal": self.qualified(self.journal),
            "invoices": self.qualified("invoices"),
            "rejected": self.qualified("rejected"),
            "counters": self.qualified("hub_counters"),
        }


def statement(template: str, *, dialect: str, names: Names) -> Any:
    """Build an executable statement: `?` placeholders, `{invoices}`-style identifiers quoted for the dialect."""
    idents = names.identifiers()
    if dialect == "postgresql":
        from psycopg import sql

        text = template.replace("?", "%s")
        return sql.SQL(cast(Any, text)).format(**{k: sql.Identifier(*v) for k, v in idents.items()})
    quoted = {k: ".".join('"' + p + '"' for p in v[-1:]) for k, v in idents.items()}  # SQLite: no schemas
    return template.format(**quoted)


class Database:
    """One async connection to the hub's database, with the dialect's statements."""

    def __init__(self, connection: Any, *, dialect: str, names: Names) -> None:
        """Wrap an open aiosqlite or psycopg AsyncConnection."""
        self.connection = connection
        self.dialect = dialect
        self.names = names

    async def execute(self, template: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement and return the driver's cursor."""
        return await execute(self.connection, template, params, dialect=self.dialect, names=self.names)

    async def rows(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one query and return all its rows."""
        cursor = await self.execute(template, params)
        return [tuple(r) for r in await cursor.fetchall()]

    async def value(self, template: str, params: Sequence[Any] = ()) -> Any:
        """Run one query and return the first column of its first row (None without rows)."""
        rows = await self.rows(template, params)
        return rows[0][0] if rows else None

    async def commit(self) -> None:
        """Commit the current transaction."""
        await self.connection.commit()

    async def rollback(self) -> None:
        """Roll back the current transaction."""
        await self.connection.rollback()

    async def aclose(self) -> None:
        """Close the connection."""
        await self.connection.close()


async def execute(connection: Any, template: str, params: Sequence[Any] = (), *, dialect: str, names: Names) -> Any:
    """Run a templated statement on a driver connection (the hub's own, or the inbox transaction's)."""
    try:
        return await connection.execute(statement(template, dialect=dialect, names=names), tuple(params))
    except Exception as exc:
        if _is_driver_error(exc):
            raise StoreError(f"the database refused a statement: {mask(str(exc))}") from exc
        raise


def _is_driver_error(exc: Exception) -> bool:
    module = type(exc).__module__
    return module.startswith(("psycopg", "sqlite3", "aiosqlite"))


async def connect(url: str, *, table: str = "inbox", options: Mapping[str, Any] | None = None) -> Database:
    """Open the hub's own connection to `url` (postgresql:// or sqlite:///path)."""
    dialect = dialect_of(url)
    names = Names.for_table(table)
    check_reachable(url)
    try:
        if dialect == "postgresql":
            import psycopg

            conn: Any = await psycopg.AsyncConnection.connect(url, **dict(options or {}))
        else:
            import aiosqlite

            conn = await aiosqlite.connect(sqlite_path(url), timeout=30)
            await conn.execute("PRAGMA busy_timeout = 30000")
    except ImportError as exc:
        raise ConfigurationError(f"the driver for {dialect} is not installed: pip install 'edinbox[postgres]'") from exc
    except Exception as exc:
        raise StoreError(f"cannot connect to {mask(url)}: {mask(str(exc))}") from exc
    return Database(conn, dialect=dialect, names=names)
