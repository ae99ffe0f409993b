"""The MariaDB / MySQL store's unit on asyncmy: a connection held for one operation, and the statements it runs
(async; the sync twin on PyMySQL is generated from this module).

Transactions: the store's own connections run with autocommit off, so a delivery sends what a hand-written inbox
sends (its INSERT, the handler's statements, COMMIT: no BEGIN, no savepoint), and a unit that sees its transaction
ended before its COMMIT (noted by `_AsyncOwnConnection`) rolls back instead. On a caller's connection the unit works
in the caller's transaction (a savepoint) or in one it begins.
"""
# sync-doc: The MariaDB / MySQL store's unit on PyMySQL: a connection held for one operation, and the statements it
# sync-doc: runs; a unit whose transaction ended before its COMMIT (noted by `_OwnConnection`) rolls back instead.

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import asyncmy

from edinbox._errors import StoreError
from edinbox.stores._async_base import Params
from edinbox.stores._async_mysql_connection import in_transaction, mapped_errors
from edinbox.stores._mysql_sql import (
    DUPLICATE_KEY_NAME,
    Statements,
    bulky,
    fitting,
    has_returning,
    literals,
    params,
)

__all__: list[str] = []

_BEGINNING = mapped_errors("begin a transaction")
_RECORDING = mapped_errors("record the message")

_NO_SAVEPOINT = 1305  # ER_SP_DOES_NOT_EXIST: "SAVEPOINT ... does not exist"
_ROLLED_BACK = (
    "the transaction was rolled back by MariaDB inside the inbox (a deadlock or lock wait timeout swallowed?)"
)
_ENDED = (
    "the transaction ended inside the inbox: rolled back by MariaDB (a deadlock or lock wait timeout the handler "
    "swallowed?), or ended by the handler (ROLLBACK, COMMIT, BEGIN, DDL); what ran after that was rolled back"
)


class _AsyncMySQLUnit:
    """A connection held for one operation; `nested` units work in a savepoint of the caller's transaction.

    `own` units run on the store's own connections (autocommit off, multi-statement queries allowed, each noting
    the end of a unit's transaction): a transaction opens with its first statement and commits only if it did not
    end meanwhile.
    """

    def __init__(
        self, connection: asyncmy.Connection, statements: Statements, *, nested: bool, own: bool = False
    ) -> None:
        self.connection: Any = connection  # on the store's own connections, one that notes the end of a transaction
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
        if not self._own and not self._nested and not in_transaction(self.connection):
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
