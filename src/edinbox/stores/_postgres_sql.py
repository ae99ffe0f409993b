"""PostgreSQL pieces shared by the async store and its generated sync twin: statements and error mapping."""

from __future__ import annotations

import hashlib
import select
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from edinbox._application import Application
from edinbox._core import TableName
from edinbox.stores._mapping import MappedErrors
from edinbox.stores._queries import placeholders, statements

__all__ = ["DIALECT", "Statements", "mapped_errors", "quiet"]

Params = Mapping[str, Any]

DIALECT = "postgresql"

PREPARED = {
    "insert_processed": ("consumer", "source", "message_id", "fingerprint", "trace"),
    "insert_claimed": ("consumer", "source", "message_id", "fingerprint", "lease"),
}
"""The server-side prepared statements and the order of their parameters."""


class Statements:
    """Every statement of the journal, with its identifiers quoted by psycopg and rendered once to bytes."""

    def __init__(self, table: TableName, applications: tuple[Application, ...] = ()) -> None:
        """Compose the statements for `table`, with those of `applications` (`edinbox.Application`)."""
        self.table = table
        qualified = (table.schema, table.name) if table.schema else (table.name,)
        self.qualified_name = sql.Identifier(*qualified).as_string(None)
        self.version_table = f"{table.name}_version"
        version = (*qualified[:-1], self.version_table)
        self.version_name = sql.Identifier(*version).as_string(None)
        outbox = (*qualified[:-1], f"{table.name}_outbox")
        self.outbox_name = sql.Identifier(*outbox).as_string(None)
        identifiers = {
            "schema": sql.Identifier(table.schema or "public"),
            "outbox": sql.Identifier(*outbox),
            "outbox_pending": sql.Identifier(f"{table.name}_outbox_pending"),
            "outbox_unsent": sql.Identifier(f"{table.name}_outbox_unsent"),
            "outbox_name": sql.Literal(self.outbox_name),
            "payloads": sql.Identifier(*qualified[:-1], f"{table.name}_payloads"),
            "table": sql.Identifier(*qualified),
            "key_index": sql.Identifier(f"{table.name}_key"),
            "status_check": sql.Identifier(f"{table.name}_status_check"),
            "status_type": sql.Identifier(*qualified[:-1], f"{table.name}_status"),
            "version_table": sql.Identifier(*version),
            "table_name": sql.Literal(self.qualified_name),
        }
        self._bytes = {}
        for name, text in statements(DIALECT, applications).items():
            # any other `{name}` is a table beside the journal, in its schema
            beside = {p: _beside(qualified, p) for p in placeholders(text) - identifiers.keys()}
            self._bytes[name] = sql.SQL(text).format(**identifiers, **beside).as_bytes(None)
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
        self.fresh = True
        """Whether a batch goes as a plain INSERT first: false from a batch that met a known key (a redelivery, which
        comes in runs after a crash or a rebalance) until a batch inserts every key again, so a run of redelivered
        batches costs one unique violation (one logged error, one second insert), not one per batch."""

    def beside(self, name: str) -> str:
        """The qualified, quoted name of table `name` beside the journal (in its schema)."""
        return sql.Identifier(*((self.table.schema, name) if self.table.schema else (name,))).as_string(None)

    def grants(
        self, role: str, *, tables: Sequence[str], sequences: Sequence[tuple[str, str]], reads: Sequence[str] = ()
    ) -> list[bytes]:
        """The GRANTs that let `role` process messages: schema usage, DML on the tables, their sequences, and SELECT
        on the version table and on `reads` (tables beside the journal: the applications' versions)."""
        who = sql.Identifier(role)
        qualified = (self.table.schema, self.table.name) if self.table.schema else (self.table.name,)
        dml = [sql.Identifier(*qualified), *(sql.Identifier(*qualified[:-1], t) for t in tables)]
        statements = [
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(self.table.schema or "public"), who),
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE {} TO {}").format(sql.SQL(", ").join(dml), who),
            sql.SQL("GRANT SELECT ON TABLE {} TO {}").format(sql.Identifier(*qualified[:-1], self.version_table), who),
            *(sql.SQL("GRANT SELECT ON TABLE {} TO {}").format(sql.Identifier(*qualified[:-1], t), who) for t in reads),
        ]
        if sequences:
            names = sql.SQL(", ").join(sql.Identifier(*s) for s in sequences)
            statements.append(sql.SQL("GRANT USAGE, SELECT ON SEQUENCE {} TO {}").format(names, who))
        return [s.as_bytes(None) for s in statements]

    def execute(self, name: str) -> bytes:
        """The EXECUTE of a prepared insert, with %(name)s placeholders for the client-side cursor."""
        return self._execute[name]

    def __getitem__(self, name: str) -> bytes:
        """The rendered statement called `name`."""
        return self._bytes[name]


def _beside(qualified: tuple[str, ...], placeholder: str) -> sql.Composable:
    """`{x}`: table x beside the journal, as an identifier; `{x_name}`: its quoted name as a string literal;
    `{x_index}`: the index x of this journal's tables, `<journal>_x_index` (an index lives in its table's schema)."""
    schema, journal = qualified[:-1], qualified[-1]
    if placeholder.endswith("_index"):
        return sql.Identifier(f"{journal}_{placeholder}")
    if placeholder.endswith("_name"):
        return sql.Literal(sql.Identifier(*schema, placeholder.removesuffix("_name")).as_string(None))
    return sql.Identifier(*schema, placeholder)


class mapped_errors(MappedErrors):
    """Turn psycopg errors (pool timeouts included) raised while doing `action` into DataError or StoreError."""

    __slots__ = ()
    database = "PostgreSQL"
    driver_error = psycopg.Error
    data_error = psycopg.DataError


def quiet(connection: psycopg.AsyncConnection[Any] | psycopg.Connection[Any]) -> bool:
    """Whether nothing waits on the idle connection's socket (one poll, no round trip)."""
    if connection.broken:
        return False
    try:
        readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable
