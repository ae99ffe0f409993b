"""SQLite pieces shared by the async store and its generated sync twin: statements, parameters, errors."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import stamina

from edinbox._application import Application
from edinbox._core import TableName
from edinbox._errors import StoreError
from edinbox.stores._mapping import MappedErrors
from edinbox.stores._queries import placeholders, statements

__all__ = ["DIALECT", "Statements", "begin_now", "connect", "mapped_errors", "params", "timestamp"]

DIALECT = "sqlite"

BUSY_TIMEOUT = 30.0
"""Seconds a connection waits for another writer's lock before failing."""

DURATIONS = frozenset({"lease", "older_than", "delay"})
"""Parameters given as timedelta, bound as seconds (None stays NULL)."""


def _quote(identifier: str) -> str:
    # Only ever called on names that passed _core.parse_table's strict pattern (letters, digits, "_").
    return '"' + identifier.replace('"', '""') + '"'


class Statements:
    """Every statement of the journal, with its (validated) identifiers quoted."""

    def __init__(self, table: TableName, applications: tuple[Application, ...] = ()) -> None:
        """Compose the statements for `table` (unqualified: SQLite has no schemas), with those of `applications`."""
        self.table = table
        self.version_name = f"{table.name}_version"
        identifiers = {
            "table": _quote(table.name),
            "key_index": _quote(f"{table.name}_key"),
            "rebuild": _quote(f"{table.name}_rebuild"),
            "version_table": _quote(self.version_name),
            "table_name": "'" + table.name + "'",
            "outbox": _quote(f"{table.name}_outbox"),
            "outbox_pending": _quote(f"{table.name}_outbox_pending"),
            "outbox_unsent": _quote(f"{table.name}_outbox_unsent"),
            "outbox_name": "'" + table.name + "_outbox'",
            "payloads": _quote(f"{table.name}_payloads"),
            "payloads_name": "'" + table.name + "_payloads'",
            "payloads_rebuild": _quote(f"{table.name}_payloads_rebuild"),
            "payloads_fts": _quote(f"{table.name}_payloads_fts"),
            "payloads_fts_name": "'" + table.name + "_payloads_fts'",
            "payloads_mark": _quote(f"{table.name}_payloads_mark"),
            "payloads_on_insert": _quote(f"{table.name}_payloads_on_insert"),
            "payloads_on_delete": _quote(f"{table.name}_payloads_on_delete"),
            "payloads_on_update": _quote(f"{table.name}_payloads_on_update"),
        }
        self._text = {}
        for name, text in statements(DIALECT, applications).items():
            # any other `{name}` is a table beside the journal (our own statement files name them)
            beside = {p: _beside(p, table.name) for p in placeholders(text) - identifiers.keys()}
            self._text[name] = text.format(**identifiers, **beside)

    def __getitem__(self, name: str) -> str:
        """The statement called `name`."""
        return self._text[name]


def _beside(placeholder: str, journal: str) -> str:
    """`{x}`: table x beside the journal, quoted; `{x_name}`: its name as a string literal; `{x_index}`: the index
    x of this journal's tables, named `<journal>_x_index` (index names are per database)."""
    if placeholder.endswith("_index"):
        return _quote(f"{journal}_{placeholder}")
    if placeholder.endswith("_name"):
        return "'" + placeholder.removesuffix("_name") + "'"
    return _quote(placeholder)


def connect(path: str) -> sqlite3.Connection:
    """Open `path` (":memory:" or a file) in autocommit mode, WAL for a file, its temporary files in memory;
    StoreError naming what is wrong.

    A file in a folder that does not exist is refused before anything opens, with the folder's name. Temporary files
    in memory (`temp_store`) keep the statement journal there: a statement inside a transaction that writes a table
    and its indexes (the journal's batch insert, a kept payload's row) first copies each page it changes into that
    journal, and once it outgrows 64 KiB in a transaction SQLite writes it to a file in /var/tmp, two system calls per
    page (the hub's kept payloads: 13 us of CPU each, bench/RESULTS.md "Message store"). The journal is as large as
    the pages one transaction changes: a batch's, or a purge's `batch_size` rows; a migration that builds an index
    over a large table sorts its keys in memory too.
    """
    if path != ":memory:":
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise StoreError(f"SQLite cannot open {path}: the folder {folder} does not exist")
    with mapped_errors(f"open {path}"):
        connection = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT, check_same_thread=False)
    try:
        with mapped_errors(f"open {path}"):
            connection.execute("PRAGMA temp_store = MEMORY")
            if path != ":memory:":
                wal(connection)
    except BaseException:
        connection.close()
        raise
    return connection


def _locked(exc: BaseException) -> bool:
    """Whether SQLite refused for a lock another connection holds."""
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def wal(connection: sqlite3.Connection) -> None:
    """Switch the file to WAL, again while another connection's lock refuses it for up to `BUSY_TIMEOUT` seconds:
    SQLite answers "database is locked" at once, without its busy handler, when a file still in rollback mode is
    switched while another connection upgrades its lock on it (two processes opening a new file)."""
    for attempt in stamina.retry_context(
        on=_locked, attempts=None, timeout=BUSY_TIMEOUT, wait_initial=0.01, wait_max=0.5, wait_jitter=0.05
    ):
        with attempt:
            connection.execute("PRAGMA journal_mode=WAL")


def begin_now(connection: sqlite3.Connection) -> bool:
    """BEGIN IMMEDIATE without waiting: True when it took the write lock, False when another connection holds it
    (the caller then begins where it may wait, up to `BUSY_TIMEOUT`); any other error is raised."""
    connection.execute("PRAGMA busy_timeout = 0")
    try:
        connection.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
            raise
        return False
    finally:
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
    return True


def params(values: Mapping[str, Any]) -> dict[str, Any]:
    """Bindable parameters: the current time as `now`, durations in seconds (timestamps are epoch seconds)."""
    bound = dict(values)
    for key in DURATIONS:  # two names looked up, not every parameter's name walked
        if bound.get(key) is not None:
            bound[key] = bound[key].total_seconds()
    bound["now"] = time.time()
    return bound


def timestamp(value: Any) -> datetime | None:
    """An epoch-seconds column as an aware UTC datetime."""
    return None if value is None else datetime.fromtimestamp(float(value), UTC)


class mapped_errors(MappedErrors):
    """Turn sqlite3 errors (which aiosqlite raises too) raised while doing `action` into DataError or StoreError."""

    __slots__ = ()
    database = "SQLite"
    driver_error = sqlite3.Error
    data_error = sqlite3.DataError
