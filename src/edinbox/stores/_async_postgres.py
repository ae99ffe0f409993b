"""The PostgreSQL journal store on psycopg 3 (async; the sync twin is generated from this module)."""
# sync-doc: The PostgreSQL journal store on psycopg 3, on blocking connections.

from __future__ import annotations

import asyncio
import weakref

# sync: from time import sleep
from asyncio import sleep  # async-only
from collections.abc import Sequence
from datetime import datetime, timedelta
from time import monotonic
from types import TracebackType
from typing import Any

import psycopg
import psycopg_pool
from psycopg.pq import TransactionStatus

from edinbox._application import Application
from edinbox._core import POOL_SIZE, Pace, TableName
from edinbox._errors import ConfigurationError, StoreError
from edinbox._message import Message
from edinbox._urls import mask
from edinbox.stores._async_applications import VERSIONS, verify_applications
from edinbox.stores._async_base import (
    AsyncUnit,
    Params,
    create_journal,
    migrate_journal,
    purge_held,
    table_keys,
    verify_journal,
)
from edinbox.stores._mapping import read_only
from edinbox.stores._postgres_sql import DIALECT, Statements, mapped_errors, quiet
from edinbox.stores._queries import migration_queries, payloads_ddl

__all__ = ["AsyncPostgresStore"]

_RECORDING = mapped_errors("record the message")
_COMMITTING = mapped_errors("commit")

CHECK_AFTER = 1.0
"""Seconds after which a pooled connection given back in good order is checked (a round trip) before it is handed
out again; one given back more recently goes out unchecked (under load, most checkouts)."""


async def _journal_keys(unit: AsyncUnit, relation: Params) -> list[list[str]]:
    """The table's unique keys of three columns (the journal's can only be one of them), each as sorted names."""
    return [list(row[0]) for row in await unit.fetch("unique_keys", relation)]


async def _keys(unit: AsyncUnit, relation: Params) -> list[list[str]]:
    """The table's unique keys (none partial, none invalid), each as sorted column names."""
    return [list(row[0]) for row in await unit.fetch("table_keys", relation)]


class _AsyncPostgresUnit:
    """A connection held for one operation; `nested` units work in a savepoint of the caller's transaction."""

    def __init__(self, connection: psycopg.AsyncConnection[Any], statements: Statements, *, nested: bool) -> None:
        self.connection = connection
        self._sql = statements
        self._nested = nested
        self._client_cursor: psycopg.AsyncClientCursor[Any] | None = None
        self._prepared = False
        self.managed = False

    @property
    def nested(self) -> bool:
        """The unit works in a savepoint of the caller's transaction (not a transaction of its own)."""
        return self._nested

    async def _begin(self) -> None:
        if self.managed:
            return
        if self._nested:
            await self.connection.execute(b"SAVEPOINT edinbox")
        elif self.connection.autocommit:
            # Explicit, so that in pipeline mode it shares the round trip of the next statement (psycopg's
            # implicit BEGIN of non-autocommit connections waits for its own reply).
            await self.connection.execute(b"BEGIN")

    async def begin(self) -> None:
        """Start the transaction (or the savepoint inside the caller's transaction)."""
        with mapped_errors("begin a transaction"):
            await self._begin()

    async def insert(self, name: str, params: Params) -> bool:
        """Begin and insert in one round trip; true when the row was inserted.

        BEGIN (or SAVEPOINT) and the EXECUTE of the prepared INSERT go as one simple-protocol query (one round
        trip, no per-message parse or plan on the server), its values bound by psycopg's client-side cursor.
        """
        try:  # the hot path: no context manager to enter and leave (mapped as `_RECORDING` maps)
            return await self._insert(name, params)
        except psycopg.errors.InvalidSqlStatementName:  # someone ran DEALLOCATE or DISCARD ALL
            with _RECORDING:
                await self.rollback()
                self._sql.prepared_on.discard(self.connection)
                self._prepared = False
                return await self._insert(name, params)
        except mapped_errors.driver_error as exc:
            raise mapped_errors.convert(exc, _RECORDING.action) from exc

    async def _insert(self, name: str, params: Params) -> bool:
        if not self._prepared:
            if self.connection not in self._sql.prepared_on:
                for statement in self._sql.prepare:
                    await self.connection.execute(statement)
                self._sql.prepared_on.add(self.connection)
            self._prepared = True
        # psycopg begins the transaction itself on a connection that is not autocommit
        # (managed units too: the savepoint is then inside the caller's, in the same query, and lets the retry
        # below roll back the failed EXECUTE; the caller's release or rollback ends it)
        begin = b"SAVEPOINT edinbox; " if self._nested else b"BEGIN; " if self.connection.autocommit else b""
        cursor = self._client_cursor
        if cursor is None:
            cursor = self._client_cursor = psycopg.AsyncClientCursor(self.connection)
        await cursor.execute(begin + self._sql.execute(name), params, prepare=False)
        cursor.nextset()  # past the reply to BEGIN / SAVEPOINT, when there is one
        return cursor.rowcount == 1  # the INSERT's command tag: no result rows to describe, send or load

    async def begin_fetch(self, name: str, params: Params) -> list[tuple[Any, ...]]:
        """Begin and run the named statement in one round trip (pipeline mode); return its rows.

        `insert_batch` first goes as a plain INSERT (`_insert_fresh`), ON CONFLICT DO NOTHING when a key of the
        batch is in the journal already, and for the batches after it until one inserts every key (`fresh`)."""
        batch = name == "insert_batch" and not self.managed
        if batch and self._sql.fresh:
            fresh = await self._insert_fresh(params)
            if fresh is not None:
                return fresh
            self._sql.fresh = False
        with mapped_errors(f"run {name}"):
            async with self.connection.pipeline():
                await self._begin()
                cursor = await self.connection.execute(self._sql[name], params)
            rows = await cursor.fetchall()
        if batch and len(rows) == len(params["message_ids"]):
            self._sql.fresh = True
        return rows

    async def _insert_fresh(self, params: Params) -> list[tuple[Any, ...]] | None:
        """Begin and insert a batch's keys with a plain INSERT; return every key (as
        `insert_batch`'s RETURNING gives them), or None, rolled back, when one was in the journal (or twice in the
        batch) already.

        A plain INSERT searches the unique index once per key; ON CONFLICT DO NOTHING searches it twice (the
        arbiter's check, then the insertion) and makes each row a speculative insertion (a lock and a WAL record
        more per row). The unique index decides alike: a copy of a key that another transaction has inserted
        waits for that transaction and fails if it commits. A failure costs the server a logged error and the
        batch a second insert; managed units (inside an SQLAlchemy session's savepoint) skip this path."""
        try:
            async with self.connection.pipeline():
                await self._begin()
                await self.connection.execute(self._sql["insert_fresh_batch"], params)
        except psycopg.errors.UniqueViolation:
            await self.rollback()
            return None
        except mapped_errors.driver_error as exc:
            raise mapped_errors.convert(exc, "run insert_batch") from exc
        return list(zip(params["sources"], params["message_ids"], strict=True))

    async def fetch(self, name: str, params: Params) -> list[tuple[Any, ...]]:
        """Run the named statement and return its rows."""
        with mapped_errors(f"run {name}"):
            cursor = await self.connection.execute(self._sql[name], params)
            return await cursor.fetchall()

    async def run(self, name: str, params: Params) -> int:
        """Run the named statement and return the number of rows it changed."""
        with mapped_errors(f"run {name}"):
            cursor = await self.connection.execute(self._sql[name], params)
            return cursor.rowcount

    async def run_many(self, name: str, params: Sequence[Params]) -> int:
        """Run the named statement once per parameter set (pipelined by psycopg); return the rows changed in all."""
        with mapped_errors(f"run {name}"):
            async with self.connection.cursor() as cursor:
                await cursor.executemany(self._sql[name], params)
                return max(cursor.rowcount, 0)

    async def commit(self) -> None:
        """Commit (or release the savepoint); StoreError when a statement left the transaction aborted."""
        if self.connection.pgconn.transaction_status == TransactionStatus.INERROR:
            await self.rollback()
            raise StoreError("a statement failed inside the inbox transaction (was a database error swallowed?)")
        try:  # mapped as `_COMMITTING` maps, without a context manager on the hot path
            if self._nested:
                await self.connection.execute(b"RELEASE SAVEPOINT edinbox")
            else:
                await self.connection.commit()
        except mapped_errors.driver_error as exc:
            raise mapped_errors.convert(exc, _COMMITTING.action) from exc

    async def rollback(self) -> None:
        """Roll back (or roll back to the savepoint); a broken connection is left for the pool to replace."""
        try:
            if self._nested:
                await self.connection.execute(b"ROLLBACK TO SAVEPOINT edinbox")
                await self.connection.execute(b"RELEASE SAVEPOINT edinbox")
            else:
                await self.connection.rollback()
        except psycopg.Error:
            return


class _AsyncHold:
    """The context of the store's `unit()` (a class: it runs for every message)."""

    __slots__ = ("_pooled", "_store", "_unit", "_via")

    def __init__(self, store: AsyncPostgresStore) -> None:
        self._store = store
        self._via: asyncio.Lock | None = None
        self._pooled: psycopg_pool.AsyncConnectionPool[Any] | None = None

    async def __aenter__(self) -> _AsyncPostgresUnit:
        store = self._store
        if store._connection is not None:
            await store._lock.acquire()
            self._via = store._lock
            connection = store._connection
            idle = connection.pgconn.transaction_status == TransactionStatus.IDLE
            self._unit = _AsyncPostgresUnit(connection, store._sql, nested=not (connection.autocommit and idle))
            return self._unit
        if store._url is not None and not store._hot_lock.locked():
            await store._hot_lock.acquire()
            self._via = store._hot_lock
            try:
                hot = store._hot_unit
                if hot is None or hot.connection.closed or hot.connection.broken:
                    hot = store._hot_unit = _AsyncPostgresUnit(await store._connect(), store._sql, nested=False)
            except BaseException:
                store._hot_lock.release()
                raise
            self._unit = hot
            return hot
        pool = store._pool if store._pool is not None else await store._open_pool()
        with mapped_errors("get a connection from the pool"):
            connection = await pool.getconn()
        self._pooled = pool
        self._unit = _AsyncPostgresUnit(connection, store._sql, nested=False)
        return self._unit

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        unit = self._unit
        try:
            if not unit._nested and unit.connection.pgconn.transaction_status != TransactionStatus.IDLE:
                await unit.rollback()  # never leave a transaction open behind
            if exc is not None and self._via is not self._store._lock and read_only(exc):
                # a server that took no write (a standby, a fenced old primary): the next connection finds the
                # primary; the caller's own connection is the caller's to replace
                await unit.connection.close()
        finally:
            if self._pooled is not None:
                if unit.connection.pgconn.transaction_status == TransactionStatus.IDLE:
                    self._store._returned[unit.connection] = monotonic()
                await self._pooled.putconn(unit.connection)
            elif self._via is not None:
                self._via.release()


class AsyncPostgresStore:
    """The journal in PostgreSQL, reached by URL (a pool of its own), a caller's pool, or a caller's connection."""

    dialect = DIALECT

    def __init__(
        self,
        target: str | psycopg.AsyncConnection[Any] | psycopg_pool.AsyncConnectionPool[Any],
        *,
        table: TableName,
        pool_size: int = POOL_SIZE,
        applications: tuple[Application, ...] = (),
    ) -> None:
        """Prepare the statements (the applications' too); connections open on first use."""
        self._sql = Statements(table, applications)
        self._table = table
        self._applications = applications
        self.outbox = f"{table.name}_outbox"  # beside the journal, in its schema
        self._url = target if isinstance(target, str) else None
        self._pool = target if isinstance(target, psycopg_pool.AsyncConnectionPool) else None
        self._connection = target if isinstance(target, psycopg.AsyncConnection) else None
        if self._url is None and self._pool is None and self._connection is None:
            raise ConfigurationError(
                f"cannot use a {type(target).__name__} here: pass a URL, a psycopg.{psycopg.AsyncConnection.__name__}"
                f" or a psycopg_pool.{psycopg_pool.AsyncConnectionPool.__name__}"
            )
        self._pool_size = pool_size
        self._lock = asyncio.Lock()  # guards the caller's connection, and the creation of the pool
        self._hot_unit: _AsyncPostgresUnit | None = None  # on the store's own connection, used when free
        self._hot_lock = asyncio.Lock()
        self._listener: psycopg.AsyncConnection[Any] | None = None  # LISTENs for the outbox's notifications
        self._returned: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], float] = weakref.WeakKeyDictionary()
        """When each pooled connection was last given back in good order (see `_check`)."""

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        if self._url is None:
            raise StoreError("the store has no URL to connect with")
        with mapped_errors(f"connect to {mask(self._url)}"):
            # autocommit: the units send BEGIN / COMMIT themselves (BEGIN shares the INSERT's round trip)
            return await psycopg.AsyncConnection.connect(self._url, autocommit=True)

    async def _open_pool(self) -> psycopg_pool.AsyncConnectionPool[Any]:
        async with self._lock:
            if self._pool is None:
                pool: psycopg_pool.AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
                    self._url or "",
                    min_size=1,
                    max_size=self._pool_size,
                    open=False,
                    name="edinbox",
                    kwargs={"autocommit": True},
                    # a connection broken by a server restart is replaced before it is handed out
                    check=self._check,
                )
                with mapped_errors("open a connection pool"):
                    await pool.open()
                self._pool = pool
            return self._pool

    async def _check(self, connection: psycopg.AsyncConnection[Any]) -> None:
        """The pool's check before it hands `connection` out: a round trip, skipped when the connection was given
        back in good order less than `CHECK_AFTER` seconds ago and nothing waits on its socket (a server that ends
        the session, as a restart does, sends its error and closes). A connection that broke unseen within that
        time fails its delivery with a StoreError (transient: nothing charged) and the pool drops it."""
        returned = self._returned.get(connection)
        if returned is not None and monotonic() - returned < CHECK_AFTER and quiet(connection):
            return
        await psycopg_pool.AsyncConnectionPool.check_connection(connection)

    def unit(self) -> _AsyncHold:
        """Hold a connection for one operation: the caller's (serialised), the store's own, or a pooled one.

        A URL store keeps one connection of its own for the usual one-at-a-time caller (no pool checkout on
        the hot path) and opens a pool only when operations overlap (threads, tasks).
        """
        return _AsyncHold(self)

    def timestamp(self, value: Any) -> datetime | None:
        """psycopg already returns aware datetimes."""
        return value if isinstance(value, datetime) else None

    def batch_params(self, messages: Sequence[Message], traces: Sequence[str | None] = ()) -> dict[str, Any]:
        """The batch as four parallel arrays for unnest(), sent in binary (text arrays cost a regex per item)."""
        return {
            "sources": [m.source for m in messages],
            "message_ids": [m.message_id for m in messages],
            "fingerprints": [m.fingerprint for m in messages],
            "traces": list(traces) or [None] * len(messages),
        }

    def map_error(self, exc: Exception) -> Exception:
        """A handler's exception as edinbox sees it: a driver error mapped (DataError, StoreError), else itself."""
        return mapped_errors.map(exc, "run the handler's statement")

    def _where(self, name: str) -> Params:
        """The `relation` query's parameters for table `name` beside the journal."""
        return {"name": self._sql.beside(name)}

    async def create_schema(self, *, version: int) -> None:
        """Create the schema, table, unique key and version row when missing, under an advisory lock."""
        steps: list[tuple[str, Params]] = [("schema_lock", {"lock": self._sql.lock_name})]
        if self._table.schema:
            steps.append(("create_schema", {}))
        steps += [("create_status", {}), ("create_table", {}), ("create_key", {}), ("create_version", {})]
        steps += [("outbox_create", {}), ("outbox_create_pending", {}), ("outbox_create_unsent", {})]
        steps += [(name, {}) for name in payloads_ddl(DIALECT)]
        async with self.unit() as unit:
            await create_journal(
                unit, steps, version=version, table=self._table, applications=self._applications, where=self._where
            )

    async def migrate(self, *, version: int) -> dict[str, list[int]]:
        """Upgrade the journal to `version` in one transaction under the schema's advisory lock."""
        async with self.unit() as unit:
            return await migrate_journal(
                unit,
                lock=[("schema_lock", {"lock": self._sql.lock_name})],
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
        journal, versions = {"name": self._sql.qualified_name}, {"name": self._sql.version_name}
        async with self.unit() as unit:
            await unit.begin()
            try:
                await verify_journal(
                    unit, journal, keys=_journal_keys, versions=versions, version=version, table=self._table
                )
                if applications:
                    await verify_applications(unit, self._applications, where=self._where)
            finally:
                await unit.rollback()

    async def unique_keys(self, name: str) -> list[list[str]] | None:
        """The unique keys of table `name` beside the journal, each as sorted column names; None when it is missing."""
        async with self.unit() as unit:
            await unit.begin()
            try:
                return await table_keys(unit, {"name": self._sql.beside(name)}, keys=_keys)
            finally:
                await unit.rollback()

    async def grant(self, role: str, *, tables: Sequence[str]) -> None:
        """Grant `role` what processing needs (no DDL): schema usage, DML on the journal and `tables`, sequences."""
        # publishing is part of processing, and so is keeping a payload
        tables = (*tables, f"{self._table.name}_outbox", f"{self._table.name}_payloads")
        async with self.unit() as unit:
            await unit.begin()
            try:
                sequences: list[tuple[str, str]] = []
                for table in tables:
                    rows = await unit.fetch("sequences", {"name": self._sql.beside(table)})
                    sequences += [(row[0], row[1]) for row in rows]
                with mapped_errors(f"grant {role} its privileges"):
                    reads = [VERSIONS] if self._applications else []
                    for statement in self._sql.grants(role, tables=tables, sequences=sequences, reads=reads):
                        await unit.connection.execute(statement)
            except BaseException:
                await unit.rollback()
                raise
            await unit.commit()

    async def purge(self, *, consumer: str, older_than: timedelta, batch_size: int, pace: Pace) -> int:
        """Delete settled rows in batches of `batch_size`, each its own transaction, paced by `pace`; 0 if another
        purger runs (the advisory lock is the session's: it holds across processes and ends with the connection)."""
        lock = {"lock": f"{self._sql.lock_name}:purge:{consumer}"}
        params = {"consumer": consumer, "older_than": older_than, "batch_size": batch_size}
        async with self.unit() as unit:
            await unit.begin()
            locked = (await unit.fetch("purge_lock", lock))[0][0]
            await unit.commit()
            if not locked:
                return 0

            async def unlock() -> None:
                await unit.begin()
                await unit.fetch("purge_unlock", lock)
                await unit.commit()

            return await purge_held(unit, params, batch_size=batch_size, pace=pace, unlock=unlock)

    async def wait(self, timeout: float) -> None:
        """Return at the first outbox notification (LISTEN on a connection of its own) or after `timeout` seconds.

        A store on the caller's connection or pool has no URL to listen with: it sleeps. StoreError when the
        database fails (the listening connection is opened again next time).
        """
        if self._url is None:
            await sleep(timeout)
            return
        try:
            if self._listener is None or self._listener.closed:
                self._listener = await self._connect()
                with mapped_errors("listen for the outbox"):
                    await self._listener.execute(self._sql["outbox_listen"])
            with mapped_errors("wait for the outbox"):
                async for _ in self._listener.notifies(timeout=timeout, stop_after=1):
                    pass
        except StoreError:
            listener, self._listener = self._listener, None
            if listener is not None:
                await listener.close()
            raise

    async def aclose(self) -> None:
        """Close the connection and the pool the store opened itself."""
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.close()
        if self._hot_unit is not None:
            hot, self._hot_unit = self._hot_unit.connection, None
            await hot.close()
        if self._url is not None and self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
