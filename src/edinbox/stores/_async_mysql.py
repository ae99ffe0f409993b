"""The MariaDB / MySQL journal store on asyncmy (async; the sync twin on PyMySQL is generated from this module).

Isolation: the store's own connections run READ COMMITTED. Every decision the journal takes rests on a locking
read (the insert's duplicate check, SELECT ... FOR UPDATE), which sees the latest committed row at any level, so
a caller's connection at REPEATABLE READ (MariaDB's default) is still correct; it only takes more gap locks.

The store holds a connection per operation (`_AsyncHold`): the caller's, or one of its own (`_AsyncOwnConnection`,
in `_async_mysql_connection`), worked through a unit (`_AsyncMySQLUnit`, in `_async_mysql_unit`).
"""
# sync-doc: The MariaDB / MySQL journal store on PyMySQL.
# sync-doc:
# sync-doc: The store's own connections run READ COMMITTED with autocommit off; it holds a connection per operation
# sync-doc: (`_Hold`), worked through a unit (`_MySQLUnit`, in `_sync_mysql_unit`).

from __future__ import annotations

import asyncio

# sync: from time import sleep
from asyncio import sleep  # async-only
from collections.abc import Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

import asyncmy

from edinbox._application import Application
from edinbox._core import Pace, TableName, check_version
from edinbox._errors import ConfigurationError, StoreError
from edinbox._message import Message
from edinbox._urls import mask
from edinbox.stores._async_applications import verify_applications
from edinbox.stores._async_base import (
    AsyncUnit,
    Params,
    create_journal,
    json_batch,
    migrate_journal,
    purge_held,
    table_keys,
    verify_journal,
)
from edinbox.stores._async_mysql_connection import (
    BREAKING,
    _AsyncOwnConnection,
    close_quietly,
    in_transaction,
    mapped_errors,
)
from edinbox.stores._async_mysql_unit import _AsyncMySQLUnit
from edinbox.stores._mysql_sql import (
    DIALECT,
    Statements,
    connect_options,
    connection_lost,
    lock_name,
    packet_refused,
    timestamp,
)
from edinbox.stores._queries import migration_queries, payloads_ddl

__all__ = ["AsyncMySQLStore"]

OUTBOX_DDL = ("outbox_create", "outbox_create_pending", "outbox_create_unsent")


async def _keys(unit: AsyncUnit, relation: Params) -> list[list[str]]:
    """The table's unique keys, each read back from MariaDB's comma-joined column names."""
    return [str(row[0]).split(",") for row in await unit.fetch("unique_keys", relation)]


class _AsyncHold:
    """The context of the store's `unit()` (a class: it runs for every message)."""

    __slots__ = ("_pooled", "_store", "_unit", "_via")

    def __init__(self, store: AsyncMySQLStore) -> None:
        self._store = store
        self._via: asyncio.Lock | None = None
        self._pooled = False

    async def __aenter__(self) -> _AsyncMySQLUnit:
        store = self._store
        if store._connection is not None:
            await store._lock.acquire()
            self._via = store._lock
            connection = store._connection
            nested = in_transaction(connection) or not connection.get_autocommit()
            self._unit = _AsyncMySQLUnit(connection, store._sql, nested=nested)
            return self._unit
        if not store._hot_lock.locked():
            await store._hot_lock.acquire()
            self._via = store._hot_lock
            try:
                if store._hot_unit is None:
                    store._hot_unit = _AsyncMySQLUnit(await store._connect(), store._sql, nested=False, own=True)
            except BaseException:
                store._hot_lock.release()
                raise
            self._unit = store._hot_unit
            return self._unit
        await store._slots.acquire()
        try:
            connection = store._idle.pop() if store._idle else await store._connect()
        except BaseException:
            store._slots.release()
            raise
        self._pooled = True
        self._unit = _AsyncMySQLUnit(connection, store._sql, nested=False, own=True)
        return self._unit

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        store, unit = self._store, self._unit
        # after a database failure the connection may be broken: the store's own are closed and opened anew (after a
        # statement the server refused as too big too: a DataError, but the server closed the connection)
        broken = exc is not None and (isinstance(exc, BREAKING) or packet_refused(exc))
        drop = broken and store._connection is None
        try:
            # never leave a transaction open behind (with autocommit off, the store's own connection has one open
            # after any statement, even a read)
            if unit.open if unit._own else not unit._nested and in_transaction(unit.connection):
                await unit.rollback()
        finally:
            if drop:
                close_quietly(unit.connection)
                if connection_lost(exc):  # the server restarted: the idle connections are broken too
                    while store._idle:
                        close_quietly(store._idle.pop())
            if self._pooled:
                if not drop:
                    store._idle.append(unit.connection)
                store._slots.release()
            else:
                if drop and store._hot_unit is unit:
                    store._hot_unit = None
                if self._via is not None:
                    self._via.release()


class AsyncMySQLStore:
    """The journal in MariaDB (or MySQL), reached by URL (connections of its own) or a caller's connection."""

    dialect = DIALECT

    def __init__(
        self,
        target: str | asyncmy.Connection,
        *,
        table: TableName,
        pool_size: int = 4,
        applications: tuple[Application, ...] = (),
    ) -> None:
        """Prepare the statements (the applications' too); connections open on first use."""
        self._sql = Statements(table, applications)
        self._table = table
        self._applications = applications
        self.outbox = f"{table.name}_outbox"  # beside the journal, in its database
        self._url = target if isinstance(target, str) else None
        self._connection = None if isinstance(target, str) else target
        if self._url is not None:
            connect_options(self._url)  # a bad URL is refused now, before anything connects
        self._lock = asyncio.Lock()  # guards the caller's connection
        self._hot_unit: _AsyncMySQLUnit | None = None  # on the store's own connection, used when free
        self._hot_lock = asyncio.Lock()
        self._idle: list[asyncmy.Connection] = []  # the store's other connections, opened when operations overlap
        self._slots = asyncio.Semaphore(pool_size)

    async def _connect(self) -> asyncmy.Connection:
        if self._url is None:
            raise StoreError("the store has no URL to connect with")
        options = connect_options(self._url)
        with mapped_errors(f"connect to {mask(self._url)}"):
            own: Any = _AsyncOwnConnection  # the driver's constructor is untyped
            connection: _AsyncOwnConnection = own(**options)
            # sync: pass
            await connection.connect()  # async-only
        try:
            await _AsyncMySQLUnit(connection, self._sql, nested=False, own=True).run("session", {})
        except BaseException:
            close_quietly(connection)
            raise
        return connection

    def unit(self) -> _AsyncHold:
        """Hold a connection for one operation: the caller's (serialised), the store's own, or another of its own.

        A URL store keeps one connection for the usual one-at-a-time caller and opens more (up to `pool_size`,
        kept for reuse) only when operations overlap (threads, tasks).
        """
        return _AsyncHold(self)

    @property
    def returning(self) -> bool | None:
        """Whether batches are inserted with RETURNING: None (the default) decides by the server's version
        (MariaDB yes, MySQL no); False takes the MySQL path on MariaDB too (how that path is tested)."""
        return self._sql.returning

    @returning.setter
    def returning(self, value: bool | None) -> None:
        self._sql.returning = value

    def timestamp(self, value: Any) -> datetime | None:
        """A DATETIME(6) in UTC as an aware datetime."""
        return timestamp(value)

    def batch_params(self, messages: Sequence[Message], traces: Sequence[str | None] = ()) -> dict[str, Any]:
        """The batch as JSON arrays for JSON_TABLE()."""
        return json_batch(messages, traces)

    def map_error(self, exc: Exception) -> Exception:
        """A handler's exception as edinbox sees it: a driver error mapped (DataError, StoreError), else itself."""
        return mapped_errors.map(exc, "run the handler's statement")

    def _where(self, name: str) -> Params:
        """The `relation` query's parameters for table `name` beside the journal."""
        return {"name": name}

    async def create_schema(self, *, version: int) -> None:
        """Create the table, its unique key and the version row when missing, one creator at a time (GET_LOCK).

        MariaDB commits each DDL statement on its own, so the DDL runs before the transaction that seeds and checks
        the version; the named lock keeps two creators from interleaving.
        """
        async with self.unit() as unit:
            await self._lock_schema(unit)
            try:
                # MariaDB commits each DDL statement: an older or newer journal is refused before any of them runs
                if await unit.fetch("relation", {"name": self._sql.version_name}):
                    found = [row[0] for row in await unit.fetch("version", {})]
                    if found:  # empty: an earlier creation stopped before seeding it
                        check_version(found, version=version, table=self._table)
                steps = ["create_schema"] if self._table.schema else []
                for name in [
                    *steps,
                    "create_table",
                    "create_key",
                    "create_version",
                    *OUTBOX_DDL,
                    *payloads_ddl(DIALECT),
                ]:
                    await unit.run(name, {})
                await create_journal(
                    unit, [], version=version, table=self._table, applications=self._applications, where=self._where
                )
            finally:
                await unit.fetch("schema_unlock", {"lock": self._sql.lock_name})

    async def migrate(self, *, version: int) -> dict[str, list[int]]:
        """Upgrade the journal to `version` under the schema's named lock (GET_LOCK), one migrator at a time.

        Each step's DDL commits on its own (MariaDB), then the version row is updated: a step that failed halfway
        is run again, whole, by the next `migrate()`.
        """
        async with self.unit() as unit:
            await self._lock_schema(unit)
            try:
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
            finally:
                await unit.fetch("schema_unlock", {"lock": self._sql.lock_name})

    async def _lock_schema(self, unit: _AsyncMySQLUnit) -> None:
        """Take the schema's named lock on `unit`'s connection (waiting up to a minute); StoreError if held."""
        if (await unit.fetch("schema_lock", {"lock": self._sql.lock_name}))[0][0] != 1:
            raise StoreError(f"another process holds the schema lock of {self._table}")

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
        """Not offered on MariaDB yet: refuse with the reason (grant the user DML on the tables by hand)."""
        raise ConfigurationError(
            f"cannot grant {role!r} privileges here: on MariaDB grant SELECT, INSERT, UPDATE, DELETE on "
            f"{self._table} and the tables beside it, and SELECT on {self._sql.version_name}, by hand"
        )

    async def purge(self, *, consumer: str, older_than: timedelta, batch_size: int, pace: Pace) -> int:
        """Delete settled rows in batches of `batch_size`, each its own transaction, paced by `pace`; 0 if another
        purger runs (GET_LOCK is the session's: it holds across processes and ends with the connection)."""
        lock = {"lock": lock_name(f"{self._table}:purge:{consumer}")}
        values = {"consumer": consumer, "older_than": older_than, "batch_size": batch_size}
        async with self.unit() as unit:
            if (await unit.fetch("purge_lock", lock))[0][0] != 1:
                return 0
            return await purge_held(
                unit, values, batch_size=batch_size, pace=pace, unlock=lambda: unit.fetch("purge_unlock", lock)
            )

    async def wait(self, timeout: float) -> None:
        """MariaDB has no LISTEN: sleep `timeout` seconds (the relay polls)."""
        await sleep(timeout)

    async def aclose(self) -> None:
        """Close the connections the store opened itself (never the caller's)."""
        if self._hot_unit is not None:
            hot, self._hot_unit = self._hot_unit.connection, None
            close_quietly(hot)
        while self._idle:
            close_quietly(self._idle.pop())
