"""PostgreSQL pieces shared by the async store and its generated sync twin: statements and error mapping."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import sql

from edinbox._core import TableName
from edinbox.stores._mapping import MappedErrors
from edinbox.stores._queries import load_queries

__all__ = ["DIALECT", "Statements", "mapped_errors"]

Params = Mapping[str, Any]

DIALECT = "postgresql"

PREPARED = {
    "insert_processed": ("consumer", "source", "message_id", "fingerprint"),
    "insert_claimed": ("consumer", "source", "message_id", "fingerprint", "lease"),
}
"""The server-side prepared statements and the order of their parameters."""


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
            "version_table": sql.Identifier(*version),
        }
        self._bytes = {
            name: sql.SQL(text).format(**identifiers).as_bytes(None)
            for name, text in load_queries(DIALECT, "queries", "schema").items()
        }
        self.lock_name = f"edinbox:{table}"
        # The delivery-starting inserts: PREPARE once per connection, then EXECUTE with driver-bound literals.
        tag = hashlib.sha256(str(table).encode()).hexdigest()[:12]
        self.prepare: list[bytes] = []
        self._execute: dict[str, bytes] = {}
        for name, params in PREPARED.items():
            statement = sql.Identifier(f"edinbox_{tag}_{name}")
            self.prepare.append(sql.SQL("PREPARE {} AS ").format(statement).as_bytes(None) + self._bytes.pop(name))
            arguments = sql.SQL(", ").join(sql.Placeholder(param) for param in params)
            self._execute[name] = sql.SQL("EXECUTE {} ({})").format(statement, arguments).as_bytes(None)
        self.prepared_on: weakref.WeakSet[Any] = weakref.WeakSet()
        """Connections on which `prepare` ran."""

    def execute(self, name: str) -> bytes:
        """The EXECUTE of a prepared insert, with %(name)s placeholders for the client-side cursor."""
        return self._execute[name]

    def __getitem__(self, name: str) -> bytes:
        """The rendered statement called `name`."""
        return self._bytes[name]


class mapped_errors(MappedErrors):
    """Turn psycopg errors (pool timeouts included) raised while doing `action` into DataError or StoreError."""

    __slots__ = ()
    database = "PostgreSQL"
    driver_error = psycopg.Error
    data_error = psycopg.DataError
