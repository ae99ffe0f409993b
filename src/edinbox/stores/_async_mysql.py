"""The MariaDB / MySQL journal store on asyncmy (async; the sync twin on PyMySQL is generated from this module).

Isolation: the store's own connections run READ COMMITTED. Every decision the journal takes rests on a locking
read (the insert's duplicate check, SELECT ... FOR UPDATE), which sees the latest committed row at any level, so
a caller's connection at REPEATABLE READ (MariaDB's default) is still correct; it only takes more gap locks.

Transactions: the store's own connections run with autocommit off, so a delivery sends what a hand-written inbox
sends (its INSERT, the handler's statements, COMMIT: no BEGIN, no savepoint), and each of those connections notes
when the transaction a unit began ended before the unit's COMMIT (`_AsyncOwnConnection`): MariaDB rolled it back
by itself under a handler that swallowed the error, or the handler ended it. Then the unit rolls back instead.
"""
# sync-doc: The MariaDB / MySQL journal store on PyMySQL.
# sync-doc:
# sync-doc: The store's own connections run READ COMMITTED with autocommit off, and each notes when the transaction
# sync-doc: a unit began ended before the unit's COMMIT (`_OwnConnection`): then the unit rolls back instead.

from __future__ import annotations

import asyncio
import json

# sync: from time import sleep
from asyncio import sleep  # async-only
from collections.abc import Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

import asyncmy

# sync: from edinbox.stores._pymysql_replies import QuickReplies as _Driver
from asyncmy import Connection as _Driver  # async-only
from asyncmy.constants.COMMAND import COM_QUERY
from asyncmy.constants.SERVER_STATUS import SERVER_STATUS_IN_TRANS

from edinbox._application import Application
from edinbox._core import Pace, TableName, check_version
from edinbox._errors import ConfigurationError, StoreError, TransientError
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
from edinbox.stores._mysql_sql import (
    DIALECT,
    DUPLICATE_KEY_NAME,
    MySQLErrors,
    Statements,
    bulky,
    connect_options,
    connection_lost,
    fitting,
    has_returning,
    literals,
    lock_name,
    packet_refused,
    params,
    timestamp,
)
from edinbox.stores._queries import migration_queries, payloads_ddl

__all__ = ["AsyncMySQLStore"]


class mapped_errors(MySQLErrors):
    """Turn the driver's errors raised while doing `action` into DataError, StoreError or ConfigurationError."""

    __slots__ = ()
    driver_error = asyncmy.MySQLError
    data_error = asyncmy.DataError


_BEGINNING = mapped_errors("begin a transaction")
_RECORDING = mapped_errors("record the message")

_BREAKING = (TransientError, asyncmy.MySQLError, OSError)  # failures after which a connection may be broken
OUTBOX_DDL = ("outbox_create", "outbox_create_pending", "outbox_create_unsent")


async def _keys(unit: AsyncUnit, relation: Params) -> list[list[str]]:
    """The table's unique keys, each read back from MariaDB's comma-joined column names."""
    return [str(row[0]).split(",") for row in await unit.fetch("unique_keys", relation)]


def _in_transaction(connection: Any) -> bool:
    return bool(connection.server_status & SERVER_STATUS_IN_TRANS)


_NO_SAVEPOINT = 1305  # ER_SP_DOES_NOT_EXIST: "SAVEPOINT ... does not exist"
_ROLLED_BACK = (
    "the transaction was rolled back by MariaDB inside the inbox (a deadlock or lock wait timeout swallowed?)"
)
_ENDED = (
    "the transaction ended inside the inbox: rolled back by MariaDB (a deadlock or lock wait timeout the handler "
    "swallowed?), or ended by the handler (ROLLBACK, COMMIT, BEGIN, DDL); what ran after that was rolled back"
)
_PROBE = b"DO 0"  # opens no transaction: its reply says whether one is open
# the driver's connection (on the sync side PyMySQL's, reading OK replies in fewer steps: `_pymysql_replies`), whose
# readers are called as functions: no super() object made per reply
_DRIVER: Any = _Driver


class _AsyncOwnConnection(_Driver):
    """A connection the store opened itself: it notes when the transaction of a unit ends before the unit's COMMIT.

    While `watching` (from the statement that opened a unit's transaction, a BEGIN or the journal's first write, to
    the unit's COMMIT or ROLLBACK), `ended` is set when a reply says no
    transaction is open (a ROLLBACK, COMMIT, DDL or `SET autocommit` inside the handler), when the handler calls
    `begin()` (which commits), and when the server answers a statement with an error after which no transaction is
    open. InnoDB rolls the whole transaction back on a deadlock, or a lock wait timeout under
    innodb_rollback_on_timeout, and a handler that swallows the error goes on in a new transaction that its next
    statement opens; the error reply carries no status, so after any error reply (whatever its number) one probe
    (`_PROBE`) asks the server, before anything else runs on the connection. A statement's own error (a duplicate
    key, a lock wait timeout that rolls back only the statement) leaves the transaction open: the unit commits.
    Nothing is sent for this while no error comes back.
    """

    watching = False
    ended = False

    # sync: def _read_packet(self, *args: Any) -> Any:
    async def read_packet(self, *args: Any) -> Any:  # async-only
        """Read one packet; after an error reply, probe whether the transaction is still open."""
        try:
            # sync: return _DRIVER._read_packet(self, *args)
            return await _DRIVER.read_packet(self, *args)  # async-only
        except asyncmy.MySQLError:
            if self.watching:
                await self._probe()
            raise

    async def _read_query_result(self, unbuffered: bool = False) -> Any:
        """Read a statement's reply; note the end of the transaction it says."""
        affected = await _DRIVER._read_query_result(self, unbuffered)
        if self.watching:  # as `_note()`, without the call (a reply of every statement)
            connection: Any = self
            result = connection._result
            status = result.server_status
            # an unbuffered result set has no status yet (the driver's: 0); its rows are read later
            if status is not None and not status & SERVER_STATUS_IN_TRANS and not result.unbuffered_active:
                self.ended = True
        return affected

    async def _read_ok_packet(self) -> Any:
        """Read the reply of `commit()`, `rollback()`, `autocommit()`...; note the end of the transaction it says."""
        ok = await _DRIVER._read_ok_packet(self)
        if self.watching:
            self._note(ok.server_status)
        return ok

    def _note(self, status: int | None) -> None:
        """Note a reply's status: `ended` unless a transaction is open. The reply's own status, not the connection's,
        which the driver leaves as it was when the reply's is 0; None: a result set, whose status PyMySQL does not read
        (a SELECT that succeeds ends no transaction)."""
        if status is not None and not status & SERVER_STATUS_IN_TRANS:
            self.ended = True

    async def begin(self) -> None:
        """BEGIN, which commits the transaction open before it: inside a unit, that ends the unit's."""
        if self.watching:
            self.ended = True
        await super().begin()

    async def _probe(self) -> None:
        """Ask whether a transaction is still open (after an error reply); `ended` when not, or when no answer."""
        self.watching = False  # the probe's own reply is not watched
        driver: Any = self
        try:
            await driver._execute_command(COM_QUERY, _PROBE)
            ok = await self._read_ok_packet()
        except (asyncmy.MySQLError, OSError):
            self.ended = True  # the connection is broken: the unit cannot commit anyway
            return
        self._note(ok.server_status)
        self.watching = True


class _AsyncMySQLUnit:
    """A connection held for one operation; `nested` units work in a savepoint of the caller's transaction.

    `own` units run on the store's own connections (of this module's own connection class: autocommit off,
    multi-statement queries allowed): a transaction opens with its first statement and commits only if it did not
    end meanwhile.
    """

    def __init__(
        self, connection: asyncmy.Connection, statements: Statements, *, nested: bool, own: bool = False
    ) -> None:
        self.connection: Any = connection  # on the store's own connections, of this module's own connection class
        self._sql = statements
        self._nested = nested
        self._own = own
        self._cursor: Any = None
        self.open = False  # own connection: a statement ran since the last COMMIT or ROLLBACK
        self.managed = False

    @property
    def nested(self) -> bool:
        """The unit works in a savepoint of the caller's transaction (not a transaction of its own)."""
        return self._nested

    async def _cursor_of(self) -> Any:
        if self._cursor is None:
            self._cursor = await self.connection.cursor()
        return self._cursor

    def _running(self) -> None:
        """Note that a statement runs: the transaction is open (rolled back at release unless committed)."""
        self.open = True

    async def _execute(self, name: str, values: Params) -> Any:
        cursor = await self._cursor_of()
        bound = params(values)
        statements = self._sql[name]
        if name in self._sql.lists:  # `IN (%(ids)s)`: one placeholder per item
            statements, bound = self._sql.bind(name, bound)
        args: Params | None = bound
        if bulky(bound):  # bound here, measured, and run without parameters
            statements = [await self._fitting(name, cursor.mogrify(s, bound)) for s in statements]
            args = None
        self._running()
        try:
            for statement in statements:
                await cursor.execute(statement, args)
        finally:
            if self._own and name in self._sql.ddl:
                # the store's own DDL commits what came before it on purpose (schema steps), even when it fails (an
                # index that exists): not a transaction that ended under a handler
                self.connection.ended = False
        return cursor

    async def _fitting(self, name: str, statement: str) -> str:
        """`statement` (its values bound) when the server reads it whole; else DataError, sent nothing (`fitting`,
        against the server's max_allowed_packet, read once)."""
        if self._sql.packet is None:
            self._sql.packet = int((await self.fetch("max_packet", {}))[0][0])
        return fitting(name, statement, limit=self._sql.packet)

    def _watch(self) -> None:
        """From now on, note the end of the transaction (open now) before the unit's COMMIT (store's own
        connection)."""
        connection = self.connection
        connection.ended = False
        connection.watching = True

    async def begin(self) -> None:
        """Start the transaction (or the savepoint inside the caller's transaction).

        On the store's own connections BEGIN is what opens it (it commits a transaction a read left open): the watch
        for its end (by the own connection class) starts on a transaction known to be open, so a statement that
        opens none (a SELECT of no InnoDB table, a SET) is not taken for its end. The deliveries' hot paths send no
        BEGIN: their first statement writes the journal, which opens the transaction, and the watch starts after it.
        """
        if self.managed:
            return
        with _BEGINNING:
            if self._own:
                self.connection.watching = False
                await self.connection.begin()
                self._running()
                self._watch()
            elif self._nested:
                await self._execute("savepoint", {})
            else:
                await self.connection.begin()

    async def insert(self, name: str, values: Params) -> bool:
        """Begin, then INSERT IGNORE; true when the row was inserted.

        On the store's own connections the INSERT opens the transaction: one round trip. It is the hot path of every
        delivery, so it goes without a cursor: its values bound by the driver's own escaping (`literals`, as the
        driver's cursor binds them) and the query sent by the driver's `query()`, whose reply gives the affected rows
        (what the cursor's `execute()` does, without its bookkeeping of result sets an INSERT has none of).
        """
        if not self._own:
            await self.begin()
            with _RECORDING:
                return int((await self._execute(name, values)).rowcount) == 1
        connection = self.connection
        # the escaping the driver's own cursor binds a dict with (`escape` on the sync side)
        # sync: escape = connection.escape
        escape = connection.literal  # async-only
        self.open = True
        try:  # no context manager to enter and leave (mapped as `_RECORDING` maps)
            inserted: bool = await connection.query(self._sql[name][0] % literals(values, escape)) == 1
        except mapped_errors.driver_error as exc:
            raise mapped_errors.convert(exc, _RECORDING.action) from exc
        connection.ended = False  # as `_watch()`, without the call
        connection.watching = True
        return inserted

    async def begin_fetch(self, name: str, values: Params) -> list[tuple[Any, ...]]:
        """Begin, then run the named statement; return its rows (one round trip on the store's own connections)."""
        if name == "insert_batch":
            return await self._insert_rows(values) if self._returning() else await self._insert_each(values)
        if not self._own:
            await self.begin()
            return await (self._claim(values) if name == "outbox_claim" else self.fetch(name, values))
        # a write or a locking read: the transaction is open after it
        rows = await (self._claim(values) if name == "outbox_claim" else self.fetch(name, values))
        self._watch()
        return rows

    async def _claim(self, values: Params) -> list[tuple[Any, ...]]:
        """The relay's claim: up to `limit` unsent rows, each the next of its key, locked on the primary key alone.

        `outbox_claim` reads, without a lock, the next `limit` rows of their keys (in id order); `outbox_lock` locks
        those another relay does not hold. While some were held, the next `limit` candidates after them are read, until
        `limit` rows are locked or none is left; so only the rows returned are locked (see `outbox.sql`).
        """
        limit = int(values["limit"])
        claimed: list[tuple[Any, ...]] = []
        after = 0
        while len(claimed) < limit:
            heads = [row[0] for row in await self.fetch("outbox_claim", {"limit": limit, "after": after})]
            if heads:
                claimed += await self.fetch("outbox_lock", {"ids": heads, "limit": limit - len(claimed)})
            if len(heads) < limit:
                break
            after = heads[-1]
        return claimed

    def _returning(self) -> bool:
        """Whether this server inserts a batch with RETURNING (MariaDB), unless the store decided otherwise."""
        decided = self._sql.returning
        return has_returning(self.connection.get_server_info()) if decided is None else decided

    async def _insert_rows(self, values: Params) -> list[tuple[Any, ...]]:
        """Begin, then `insert_batch` (MariaDB: one INSERT IGNORE ... RETURNING) with the batch's rows written out,
        each value escaped by the driver's own escaping; the (source, message_id) of the rows it inserted."""
        connection = self.connection
        # sync: escape = connection.escape
        escape = connection.literal  # async-only
        consumer = escape(values["consumer"])
        rows = ", ".join(
            f"({consumer}, {escape(s)}, {escape(m)}, {escape(f)}, {escape(t)})"
            for s, m, f, t in json.loads(values["batch"])
        )
        if not self._own:
            await self.begin()
        with _RECORDING:
            cursor = await self._cursor_of()
            self._running()
            # bound here: run without parameters, so the driver does not read "%" in the values as placeholders
            await cursor.execute(self._sql["insert_batch"][0] % {"rows": rows})
            inserted = [tuple(row) for row in await cursor.fetchall()]
        if self._own:
            self._watch()  # the INSERT opened the transaction
        return inserted

    async def _insert_each(self, values: Params) -> list[tuple[Any, ...]]:
        """Begin, then `insert_batch` without RETURNING (MySQL): one INSERT IGNORE per message, whose affected-row
        count says whether it inserted; the (source, message_id) of those that did, as RETURNING gives them.

        On the store's own connections the statements go as one multi-statement query (one round trip), each bound
        by the driver's escaping; on a caller's connection (multi-statements maybe off) one at a time.
        """
        batch = json.loads(values["batch"])
        consumer = values["consumer"]
        each = [
            {"consumer": consumer, "source": s, "message_id": m, "fingerprint": f, "trace": t} for s, m, f, t in batch
        ]
        counts: list[int] = []
        with _RECORDING:
            if not self._own:
                await self.begin()
                for one in each:
                    counts.append(int((await self._execute("insert_processed", one)).rowcount))
            else:
                cursor = await self._cursor_of()
                statement = self._sql["insert_processed"][0]
                self._running()
                # bound here: run without parameters, so the driver does not read "%" in the values as placeholders
                await cursor.execute(";\n".join(cursor.mogrify(statement, one) for one in each))
                counts.append(int(cursor.rowcount))
                for _ in each[1:]:
                    await cursor.nextset()
                    counts.append(int(cursor.rowcount))
                self._watch()  # the INSERTs opened the transaction
        return [(s, m) for (s, m, _, _), count in zip(batch, counts, strict=True) if count == 1]

    async def fetch(self, name: str, values: Params) -> list[tuple[Any, ...]]:
        """Run the named statement(s) and return the rows of the last one."""
        with mapped_errors(f"run {name}"):
            cursor = await self._execute(name, values)
            return [tuple(row) for row in await cursor.fetchall()]

    async def run(self, name: str, values: Params) -> int:
        """Run the named statement(s) and return the number of rows the last one changed (0 for a CREATE INDEX
        whose index exists already: MySQL 8 has no IF NOT EXISTS there)."""
        with mapped_errors(f"run {name}"):
            try:
                return int((await self._execute(name, values)).rowcount)
            except asyncmy.MySQLError as exc:
                if name in self._sql.create_index and exc.args[:1] == (DUPLICATE_KEY_NAME,):
                    return 0
                raise

    async def run_many(self, name: str, values: Sequence[Params]) -> int:
        """Run the named statement once per parameter set; return the rows changed in all.

        A one-statement INSERT ... VALUES goes in one executemany: the driver sends one multi-row INSERT (a "simple
        insert" for InnoDB's auto-increment: no table lock, unlike INSERT ... SELECT).
        """
        statements = self._sql[name]
        with mapped_errors(f"run {name}"):
            if len(statements) == 1 and values:
                cursor = await self._cursor_of()
                rows = [params(one) for one in values]
                for row in rows:  # the driver sends a row longer than its max_stmt_length (1 MB) alone
                    if bulky(row):
                        await self._fitting(name, cursor.mogrify(statements[0], row))
                self._running()
                await cursor.executemany(statements[0], rows)
                return int(cursor.rowcount)
            changed = 0
            for one in values:
                changed += int((await self._execute(name, one)).rowcount)
            return changed

    async def commit(self) -> None:
        """Commit (or release the savepoint); StoreError when the transaction already ended inside the unit.

        MariaDB rolls the whole transaction back on a deadlock or (with innodb_rollback_on_timeout) a lock wait
        timeout; a handler that swallowed that error must not see its remaining statements committed alone. On the
        store's own connections the connection noted it and what ran after it is rolled
        back; in a caller's transaction, its savepoint is gone and cannot be released.
        """
        if not self._own and not self._nested and not _in_transaction(self.connection):
            # the caller's autocommit connection, in the transaction begun here: the flag is all there is to check
            await self.rollback()
            raise StoreError(_ROLLED_BACK)
        connection = self.connection
        try:
            if self._own:
                if connection.ended:
                    await self.rollback()
                    raise StoreError(_ENDED)
                connection.watching = False
                await connection.commit()
            elif self._nested:
                # a savepoint MariaDB dropped with the caller's transaction cannot be released (PyMySQL's
                # transaction flag is no help here: it is not updated after a result set)
                await (await self._cursor_of()).execute(self._sql["release"][0])
            else:
                await connection.commit()
        except asyncmy.MySQLError as exc:
            if exc.args and exc.args[0] == _NO_SAVEPOINT:
                await self.rollback()
                raise StoreError(f"{_ROLLED_BACK}: roll the caller's transaction back") from exc
            raise mapped_errors.convert(exc, "commit") from exc
        self.open = False

    async def rollback(self) -> None:
        """Roll back (or roll back to the savepoint); never raises (a broken connection is dropped on release)."""
        try:
            if self._nested:
                await self._execute("rollback_savepoint", {})
                await self._execute("release", {})
            else:
                if self._own:
                    self.connection.watching = False
                await self.connection.rollback()
                self.open = False
        except (asyncmy.MySQLError, OSError):
            return


def _close(connection: asyncmy.Connection) -> None:
    try:
        connection.close()
    except (asyncmy.MySQLError, OSError):
        return


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
            nested = _in_transaction(connection) or not connection.get_autocommit()
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
        broken = exc is not None and (isinstance(exc, _BREAKING) or packet_refused(exc))
        drop = broken and store._connection is None
        try:
            # never leave a transaction open behind (with autocommit off, the store's own connection has one open
            # after any statement, even a read)
            if unit.open if unit._own else not unit._nested and _in_transaction(unit.connection):
                await unit.rollback()
        finally:
            if drop:
                _close(unit.connection)
                if connection_lost(exc):  # the server restarted: the idle connections are broken too
                    while store._idle:
                        _close(store._idle.pop())
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
            _close(connection)
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
            _close(hot)
        while self._idle:
            _close(self._idle.pop())
