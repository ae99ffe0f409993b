"""The SQLite journal store on aiosqlite (async; the sync twin on sqlite3 is generated from this module).

On a connection the store opened itself, a statement inside the write transaction it holds runs on the caller's
thread, straight on the driver's connection: it works on pages the transaction already holds, and a trip to the
driver's thread and back (two thread wake-ups, on a busy machine two waits for a core) costs more than the
statement. BEGIN IMMEDIATE runs there too when no other writer holds the lock (`begin_now`, which does not wait).
Only what may wait goes to the driver's thread: BEGIN IMMEDIATE while another writer holds the lock, COMMIT (the
sync to disk), reads outside a transaction, and the purges' deletes of a whole batch of rows (`_threaded`). A
batch of the hub makes one trip, for its COMMIT.
"""
# sync-doc: The SQLite journal store on the standard library's sqlite3: every statement runs on the caller's thread.

from __future__ import annotations

import asyncio
import sqlite3

# sync: from time import sleep
from asyncio import sleep  # async-only
from collections.abc import Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

import aiosqlite

from edinbox._application import Application
from edinbox._core import Pace, TableName
from edinbox._errors import ConfigurationError, StoreError
from edinbox._message import Message
from edinbox.stores._async_applications import verify_applications
from edinbox.stores._async_base import (
    AsyncUnit,
    Params,
    create_journal,
    json_batch,
    migrate_journal,
    purge_batches,
    table_keys,
    verify_journal,
)
from edinbox.stores._queries import migration_queries, payloads_ddl
from edinbox.stores._sqlite_sql import DIALECT, Statements, begin_now, connect, mapped_errors, params, timestamp

__all__ = ["AsyncSQLiteStore"]

_BEGINNING = mapped_errors("begin a transaction")
_RECORDING = mapped_errors("record the message")
_COMMITTING = mapped_errors("commit")


async def _keys(unit: AsyncUnit, relation: Params) -> list[list[str]]:
    """The table's unique keys: its unique indexes (none partial), then each one's columns."""
    indexes = await unit.fetch("indexes", relation)
    return [[row[0] for row in await unit.fetch("index_columns", {"name": index})] for (index,) in indexes]


def _threaded(name: str) -> bool:
    """True for a statement that deletes a whole batch of rows (the purges): it runs in the driver's thread even
    inside a transaction, so the caller is not held on the delete."""
    return "purge" in name


class _AsyncSQLiteUnit:
    """The connection held for one operation; `nested` units work in a savepoint of the caller's transaction."""

    def __init__(
        self,
        connection: aiosqlite.Connection,
        statements: Statements,
        *,
        nested: bool,
        driver: sqlite3.Connection | None = None,
    ) -> None:
        """`driver` is the connection under `connection` when the store opened it (None for the caller's)."""
        self.connection = connection
        self._sql = statements
        self._nested = nested
        self.managed = False
        self._driver = driver

    @property
    def nested(self) -> bool:
        """The unit works in a savepoint of the caller's transaction (not a transaction of its own)."""
        return self._nested

    def _held(self, name: str) -> sqlite3.Connection | None:
        """The driver's connection when statement `name` may run on the caller's thread: the store's own connection,
        inside a transaction, and not a purge (see the module's docstring); None otherwise."""
        driver = self._driver
        if driver is None or not driver.in_transaction or _threaded(name):
            return None
        return driver

    async def begin(self) -> None:
        """Take the write lock at once (BEGIN IMMEDIATE) so a concurrent duplicate waits for this one."""
        with _BEGINNING:
            if self.managed:
                if not self.connection.in_transaction:
                    await self._immediate()  # left open: the caller commits it
                return
            if not self._nested:
                await self._immediate()
                return
            if not self.connection.in_transaction:
                await self._immediate()  # left open: the caller commits it
            await self.connection.execute("SAVEPOINT edinbox")

    async def _immediate(self) -> None:
        """BEGIN IMMEDIATE: on the caller's thread when no other writer holds the lock (see the module's docstring),
        else in the driver's thread, which waits for it."""
        # sync: self.connection.execute("BEGIN IMMEDIATE")
        if self._driver is not None and begin_now(self._driver):  # async-only
            return  # async-only
        await self.connection.execute("BEGIN IMMEDIATE")  # async-only

    async def insert(self, name: str, values: Params) -> bool:
        """Begin and run the INSERT ... ON CONFLICT DO NOTHING RETURNING; true when the row was inserted."""
        if self._nested or self.managed:
            await self.begin()
        else:  # the hot path: begin() without a context manager to enter and leave (mapped as `_BEGINNING` maps)
            try:
                await self._immediate()
            except mapped_errors.driver_error as exc:
                raise mapped_errors.convert(exc, _BEGINNING.action) from exc
        try:
            return bool(await self._rows(name, values))
        except mapped_errors.driver_error as exc:
            raise mapped_errors.convert(exc, _RECORDING.action) from exc

    async def begin_fetch(self, name: str, values: Params) -> list[tuple[Any, ...]]:
        """Begin, then run the named statement; return its rows."""
        await self.begin()
        return await self.fetch(name, values)

    async def fetch(self, name: str, values: Params) -> list[tuple[Any, ...]]:
        """Run the named statement and return its rows."""
        with mapped_errors(f"run {name}"):
            return [tuple(row) for row in await self._rows(name, values)]

    async def _rows(self, name: str, values: Params) -> Any:
        """Run the named statement and read all its rows in one call to the driver (one trip to its thread)."""
        # sync: return self.connection.execute(self._sql[name], params(values)).fetchall()
        if (held := self._held(name)) is not None:  # async-only
            return held.execute(self._sql[name], params(values)).fetchall()  # async-only
        return await self.connection.execute_fetchall(self._sql[name], params(values))  # async-only

    async def run(self, name: str, values: Params) -> int:
        """Run the named statement and return the number of rows it changed."""
        with mapped_errors(f"run {name}"):
            # sync: cursor = self.connection.execute(self._sql[name], params(values))
            if (held := self._held(name)) is not None:  # async-only
                return int(held.execute(self._sql[name], params(values)).rowcount)  # async-only
            cursor = await self.connection.execute(self._sql[name], params(values))  # async-only
            return int(cursor.rowcount)

    async def run_many(self, name: str, values: Sequence[Params]) -> int:
        """Run the named statement once per parameter set (one executemany); return the rows changed in all."""
        with mapped_errors(f"run {name}"):
            # sync: cursor = self.connection.executemany(self._sql[name], [params(v) for v in values])
            if (held := self._held(name)) is not None:  # async-only
                return int(held.executemany(self._sql[name], [params(v) for v in values]).rowcount)  # async-only
            cursor = await self.connection.executemany(self._sql[name], [params(v) for v in values])  # async-only
            return int(cursor.rowcount)

    async def commit(self) -> None:
        """Commit (or release the savepoint)."""
        try:  # mapped as `_COMMITTING` maps, without a context manager on the hot path
            await self.connection.execute("RELEASE SAVEPOINT edinbox" if self._nested else "COMMIT")
        except mapped_errors.driver_error as exc:
            raise mapped_errors.convert(exc, _COMMITTING.action) from exc

    async def rollback(self) -> None:
        """Roll back (or roll back to the savepoint); never raises."""
        try:
            if self._nested:
                await self.connection.execute("ROLLBACK TO SAVEPOINT edinbox")
                await self.connection.execute("RELEASE SAVEPOINT edinbox")
            elif self.connection.in_transaction:
                await self.connection.execute("ROLLBACK")
        except Exception:
            return


class _AsyncHold:
    """The context of the store's `unit()` (a class: it runs for every message)."""

    __slots__ = ("_store", "_unit")

    def __init__(self, store: AsyncSQLiteStore) -> None:
        self._store = store

    async def __aenter__(self) -> _AsyncSQLiteUnit:
        store = self._store
        await store._lock.acquire()
        try:
            if store._unit is None:
                connection = store._connection if store._connection is not None else await store._open()
                store._connection = connection
                # sync: store._unit = _AsyncSQLiteUnit(connection, store._sql, nested=False)
                driver = store._driver if store._path is not None else None  # async-only
                store._unit = _AsyncSQLiteUnit(connection, store._sql, nested=False, driver=driver)  # async-only
            unit = store._unit
            if store._path is None:  # the caller's connection: nest in its transaction, if it has or wants one
                connection = unit.connection
                unit._nested = connection.in_transaction or connection.isolation_level is not None
        except BaseException:
            store._lock.release()
            raise
        self._unit = unit
        return unit

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if not self._unit._nested and self._unit.connection.in_transaction:
                await self._unit.rollback()  # never leave a transaction open behind
        finally:
            self._store._lock.release()


class AsyncSQLiteStore:
    """The journal in SQLite: a database file or memory (a connection of its own), or the caller's connection."""

    dialect = DIALECT

    def __init__(
        self, target: str | aiosqlite.Connection, *, table: TableName, applications: tuple[Application, ...] = ()
    ) -> None:
        """`target` is a file path, ":memory:", or an open connection; a path opens on first use. The statements
        are the library's and `applications`'."""
        self._sql = Statements(table, applications)
        self._table = table
        self._applications = applications
        self.outbox = f"{table.name}_outbox"  # beside the journal, in its schema
        self._path = target if isinstance(target, str) else None
        self._connection = None if isinstance(target, str) else target
        self._lock = asyncio.Lock()
        self._unit: _AsyncSQLiteUnit | None = None
        self._driver: sqlite3.Connection | None = None
        """The driver's connection under the one the store opened (statements of a held transaction run on it)."""

    async def _open(self) -> aiosqlite.Connection:
        if self._path is None:
            raise StoreError("the store has no path to open")
        # sync: return connect(self._path)
        # A failed open (a missing folder, no permission) must leave no driver thread behind to outlive the
        # event loop: open in a worker thread first, then hand the open connection to the async driver.
        connection = await asyncio.to_thread(connect, self._path)  # async-only
        self._driver = connection  # async-only
        return await aiosqlite.Connection(lambda: connection, 64)  # async-only

    def unit(self) -> _AsyncHold:
        """Hold the connection for one operation (operations on one store are serialised)."""
        return _AsyncHold(self)

    def timestamp(self, value: Any) -> datetime | None:
        """Epoch seconds as an aware UTC datetime."""
        return timestamp(value)

    def batch_params(self, messages: Sequence[Message], traces: Sequence[str | None] = ()) -> dict[str, Any]:
        """The batch as JSON arrays for json_each()."""
        return json_batch(messages, traces)

    def map_error(self, exc: Exception) -> Exception:
        """A handler's exception as edinbox sees it: a driver error mapped (DataError, StoreError), else itself."""
        return mapped_errors.map(exc, "run the handler's statement")

    def _where(self, name: str) -> Params:
        """The `relation` query's parameters for table `name` beside the journal."""
        return {"name": name}

    async def create_schema(self, *, version: int) -> None:
        """Create the table, unique key and version row when missing, in one write transaction."""
        steps: list[tuple[str, Params]] = [("create_table", {}), ("create_key", {}), ("create_version", {})]
        steps += [("outbox_create", {}), ("outbox_create_pending", {}), ("outbox_create_unsent", {})]
        steps += [(name, {}) for name in payloads_ddl(DIALECT)]
        async with self.unit() as unit:
            await create_journal(
                unit, steps, version=version, table=self._table, applications=self._applications, where=self._where
            )

    async def migrate(self, *, version: int) -> dict[str, list[int]]:
        """Upgrade the journal to `version` in one write transaction (BEGIN IMMEDIATE holds out every writer)."""
        async with self.unit() as unit:
            return await migrate_journal(
                unit,
                lock=[],
                relation={"name": self._sql.version_name},
                steps=migration_queries(DIALECT),
                version=version,
                table=self._table,
                dialect=DIALECT,
                applications=self._applications,
                where=self._where,
            )

    async def verify(self, *, version: int, applications: bool = True) -> None:
        """Raise SchemaError unless the table, its columns, its unique key and the version are right."""
        versions = {"name": self._sql.version_name}
        async with self.unit() as unit:
            await verify_journal(
                unit, {"name": self._table.name}, keys=_keys, versions=versions, version=version, table=self._table
            )
            if applications:
                await verify_applications(unit, self._applications, where=self._where)

    async def unique_keys(self, name: str) -> list[list[str]] | None:
        """The unique keys of table `name` beside the journal, each as sorted column names; None when it is missing."""
        async with self.unit() as unit:
            return await table_keys(unit, {"name": name}, keys=_keys)

    async def grant(self, role: str, *, tables: Sequence[str]) -> None:
        """SQLite has no roles: refuse with the reason."""
        raise ConfigurationError(f"cannot grant {role!r} privileges: SQLite has no roles (this is for PostgreSQL)")

    async def purge(self, *, consumer: str, older_than: timedelta, batch_size: int, pace: Pace) -> int:
        """Delete settled rows in batches of `batch_size`, each its own write transaction (one writer at a time),
        paced by `pace`; the connection is free for other calls between batches."""
        values = {"consumer": consumer, "older_than": older_than, "batch_size": batch_size}
        return await purge_batches(self.unit, values, batch_size=batch_size, pace=pace)

    async def wait(self, timeout: float) -> None:
        """SQLite cannot say when another process commits: sleep `timeout` seconds."""
        await sleep(timeout)

    async def aclose(self) -> None:
        """Close the connection the store opened itself."""
        if self._path is not None and self._connection is not None:
            connection, self._connection, self._unit = self._connection, None, None
            self._driver = None
            await connection.close()
