"""PostgreSQL pieces shared by the async store and its generated sync twin: statements and error mapping."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from edinbox._core import TableName
from edinbox._errors import StoreError
from edinbox._urls import mask
from edinbox.stores._queries import load_queries

__all__ = ["DIALECT", "Statements", "mapped_errors"]

DIALECT = "postgresql"


class Statements:
    """Every statement of the journal, with its identifiers quoted by psycopg and rendered once to bytes."""

    def __init__(self, table: TableName) -> None:
        """Compose the statements for `table`."""
        self.table = table
        qualified = (table.schema, table.name) if table.schema else (table.name,)
        self.qualified_name = sql.Identifier(*qualified).as_string(None)
        version = (*qualified[:-1], f"{table.name}_version")
        self.version_name = sql.Identifier(*version).as_string(None)
        identifiers = {
            "schema": sql.Identifier(table.schema or "public"),
            "table": sql.Identifier(*qualified),
            "key_index": sql.Identifier(f"{table.name}_key"),
            "settled_index": sql.Identifier(f"{table.name}_settled"),
            "version_table": sql.Identifier(*version),
        }
        self._bytes = {
            name: sql.SQL(text).format(**identifiers).as_bytes(None)
            for name, text in load_queries(DIALECT, "queries", "schema").items()
        }
        self.lock_name = f"edinbox:{table}"

    def __getitem__(self, name: str) -> bytes:
        """The rendered statement called `name`."""
        return self._bytes[name]


@contextmanager
def mapped_errors(action: str) -> Iterator[None]:
    """Turn psycopg errors (pool timeouts included) raised while doing `action` into StoreError."""
    try:
        yield
    except psycopg.Error as exc:
        raise StoreError(f"PostgreSQL failed to {action}: {mask(str(exc)).strip()}") from exc
