"""One synchronous face over Inbox and AsyncInbox, with a business table for effects, so one contract suite
drives every store in both APIs. Handlers insert one effect row per message through `tx.connection`."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiosqlite
import asyncmy
import psycopg
import pymysql

from edinbox import AsyncInbox, Inbox, Message, Outcome, Tx
from edinbox.stores._mysql_sql import connect_options
from journal_pool import MYSQL_TABLES, POSTGRES_SCHEMA, JournalPool, Shape


def execute(connection: Any, sql: str, params: Sequence[Any] = ()) -> None:
    """Run `sql` on a driver's connection: psycopg and sqlite3 have execute(), PyMySQL runs through a cursor."""
    if isinstance(connection, pymysql.Connection):
        with connection.cursor() as cursor:
            cursor.execute(sql, tuple(params) or None)
        return
    connection.execute(sql, params)


async def aexecute(connection: Any, sql: str, params: Sequence[Any] = ()) -> None:
    """Run `sql` on an async driver's connection: psycopg and aiosqlite have execute(), asyncmy a cursor."""
    if isinstance(connection, asyncmy.Connection):
        async with connection.cursor() as cursor:
            await cursor.execute(sql, tuple(params) or None)
        return
    await connection.execute(sql, params)


class Harness:
    """Drives an inbox (sync or async) and reads the database around it."""

    dialect: str

    def __init__(self, *, table: str, effects: str, asynchronous: bool) -> None:
        self.table = table
        self.effects_table = effects
        self.asynchronous = asynchronous
        self.runner = asyncio.Runner() if asynchronous else None
        self.inbox: Any = None
        self.target: Any = None  # what the inbox is opened on: a URL, or a connection of the harness's own
        self.seen: list[list[str]] = []  # message ids handed to each handler call
        self.keys: list[str | None] = []  # idempotency keys seen by lease-mode handlers

    # -- the database around the inbox ------------------------------------------------------------------------
    def admin(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run SQL outside the inbox (committed at once) and return its rows."""
        raise NotImplementedError

    def insert_effect_sql(self) -> str:
        """The handler's business statement."""
        mark = "?" if self.dialect == "sqlite" else "%s"
        return f"INSERT INTO {self.effects_table} (source, message_id) VALUES ({mark}, {mark})"

    def effects(self, message_id: str | None = None) -> int:
        """Committed effect rows, of one message or all."""
        rows = self.admin(f"SELECT message_id FROM {self.effects_table}")
        return sum(1 for (mid,) in rows if message_id is None or mid == message_id)

    def close(self) -> None:
        """Close the inbox and the loop."""
        if self.inbox is not None:
            self.call("aclose" if self.asynchronous else "close")
        if self.runner is not None:
            self.runner.close()

    # -- the inbox ---------------------------------------------------------------------------------------------
    def make(self, target: Any, **options: Any) -> Any:
        """Create the inbox (inside the loop for the async API) and its schema."""
        cls = AsyncInbox if self.asynchronous else Inbox
        self.inbox = cls(target, consumer=options.pop("consumer", "accounting"), table=self.table, **options)
        self.call("create_schema")
        return self.inbox

    def reopen(self, **options: Any) -> None:
        """Close the inbox and open one with other options on the same target and table."""
        self.call("aclose" if self.asynchronous else "close")
        self.make(self.target, **options)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call an inbox method (awaiting it on the async API)."""
        result = getattr(self.inbox, name)(*args, **kwargs)
        if self.runner is not None:
            return self.runner.run(result)
        return result

    def run(self, coroutine_factory: Callable[[], Any]) -> Any:
        """Run a coroutine in the harness loop (async API only)."""
        assert self.runner is not None
        return self.runner.run(coroutine_factory())

    def handler(
        self,
        *,
        fail: BaseException | None = None,
        effect: bool = True,
        poison: str | None = None,
        failures: dict[str, BaseException] | None = None,
    ) -> Any:
        """A handler that records the effect of each message it gets, then raises `fail` if given.

        With `poison`, it raises `fail` only when it gets the message of that id (alone or in a batch); with
        `failures` (message id -> exception), it raises the exception of the first such message it gets.
        """
        sql = self.insert_effect_sql()
        if poison is not None and fail is not None:
            failures = {poison: fail}

        def failing(message: Message | list[Message]) -> BaseException | None:
            batch = message if isinstance(message, list) else [message]
            if failures is None:
                return fail
            return next((failures[m.message_id] for m in batch if m.message_id in failures), None)

        def note(tx: Tx, message: Message | list[Message]) -> list[Message]:
            """Record what the handler got (and its idempotency key); return the messages whose effect it writes."""
            batch = message if isinstance(message, list) else [message]
            self.seen.append([m.message_id for m in batch])
            if tx.connection is None:
                self.keys.append(tx.idempotency_key)
                return []
            return batch if effect else []

        if self.asynchronous:

            async def async_handler(tx: Tx, message: Message | list[Message]) -> None:
                for m in note(tx, message):
                    await aexecute(tx.connection, sql, (m.source, m.message_id))
                if (error := failing(message)) is not None:
                    raise error

            return async_handler

        def sync_handler(tx: Tx, message: Message | list[Message]) -> None:
            for m in note(tx, message):
                execute(tx.connection, sql, (m.source, m.message_id))
            if (error := failing(message)) is not None:
                raise error

        return sync_handler

    def completion(self, message: Message) -> Any:
        """An `on_complete` that records `message`'s effect in the transaction that commits its completion."""
        sql, params = self.insert_effect_sql(), (message.source, message.message_id)
        if self.asynchronous:

            async def async_complete(tx: Tx) -> None:
                await aexecute(tx.connection, sql, params)

            return async_complete

        def sync_complete(tx: Tx) -> None:
            execute(tx.connection, sql, params)

        return sync_complete

    def process(self, message: Message, *, fail: BaseException | None = None, **options: Any) -> Outcome:
        """Process one message with the effect handler."""
        return self.call("process", message, self.handler(fail=fail), **options)  # type: ignore[no-any-return]

    def process_batch(
        self,
        messages: list[Message],
        *,
        fail: BaseException | None = None,
        poison: str | None = None,
        isolate: bool = False,
    ) -> list[Outcome | Exception]:
        """Process a batch with the effect handler (failing on `poison` only, when given)."""
        handler = self.handler(fail=fail, poison=poison)
        return self.call("process_batch", messages, handler, isolate=isolate)  # type: ignore[no-any-return]

    def sql(self, postgresql: str, sqlite: str, mysql: str) -> str:
        """The statement for this harness's dialect."""
        return {"postgresql": postgresql, "sqlite": sqlite, "mysql": mysql}[self.dialect]

    def statement_handler(self, statement: str, params: Sequence[Any] | None = None, *, poison: str = "") -> Any:
        """A handler that runs `statement` on the inbox connection (to provoke a driver error).

        With `poison`, it runs the statement only for the message of that id and writes the others' effects.
        """
        sql = self.insert_effect_sql()

        def plan(message: Message | list[Message]) -> tuple[list[Message], bool]:
            batch = message if isinstance(message, list) else [message]
            self.seen.append([m.message_id for m in batch])
            hit = not poison or any(m.message_id == poison for m in batch)
            return batch, hit

        if self.asynchronous:

            async def async_handler(tx: Tx, message: Message | list[Message]) -> None:
                batch, hit = plan(message)
                for m in batch:
                    await aexecute(tx.connection, sql, (m.source, m.message_id))
                if hit:
                    await aexecute(tx.connection, statement, params or ())

            return async_handler

        def sync_handler(tx: Tx, message: Message | list[Message]) -> None:
            batch, hit = plan(message)
            for m in batch:
                execute(tx.connection, sql, (m.source, m.message_id))
            if hit:
                execute(tx.connection, statement, params or ())

        return sync_handler

    def drop_key(self) -> None:
        """Drop the unique index on (consumer, source, message_id)."""
        raise NotImplementedError

    def backdate(self, seconds: float) -> None:
        """Move every settled_at `seconds` into the past (to test purge)."""
        backdate(self, seconds)

    def set_version(self, version: int) -> None:
        """Overwrite the stored schema version."""
        version_table = f"{self.table}_version"
        self.admin(f"UPDATE {version_table} SET version = {int(version)}")


class PostgresHarness(Harness):
    """PostgreSQL by URL, in a schema of its own (so the table name is schema-qualified)."""

    dialect = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        schema: str,
        asynchronous: bool,
        pool: JournalPool | None = None,
        made: Shape | None = None,
    ) -> None:
        """With `pool`, `schema` names a journal the pool gave (empty and as the store made it, of shape `made`; a
        fresh name when `made` is None) and `close` gives it back, emptied, unless the test changed it."""
        super().__init__(table=f"{schema}.inbox", effects=f"{schema}.effects", asynchronous=asynchronous)
        self.url = url
        self.schema = schema
        self.pool, self.made = pool, made
        self._admin: psycopg.Connection[Any] | None = None
        if made is None:
            self.admin(f"CREATE SCHEMA {schema}")
            self.admin(f"CREATE TABLE {self.effects_table} (source text, message_id text)")
        self.target = url

    def admin(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run SQL on a connection of its own, autocommit (one for the harness's life, opened at its first use: the
        checks read the database many times a test)."""
        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(self.url, autocommit=True)
        cursor = self._admin.execute(sql.encode(), params)
        return cursor.fetchall() if cursor.description else []

    def drop_key(self) -> None:
        """Drop the unique index."""
        self.admin(f"DROP INDEX {self.schema}.inbox_key")

    def close(self) -> None:
        """Close, then give the schema back to the pool (emptied) or drop it, and close the harness's own
        connection."""
        try:
            super().close()
        finally:
            if self.pool is None or not self.pool.give_back(self.admin, self.schema, self.made):
                POSTGRES_SCHEMA.drop(self.admin, self.schema)
            if self._admin is not None:
                self._admin.close()


class MySQLHarness(Harness):
    """MariaDB by URL (mysql:// or mariadb://), in the shared test database under fresh table names."""

    dialect = "mysql"

    def __init__(
        self,
        url: str,
        *,
        table: str,
        asynchronous: bool,
        returning: bool | None = None,
        pool: JournalPool | None = None,
        made: Shape | None = None,
    ) -> None:
        """With `pool`, `table` names a set of tables the pool gave (empty and as the store made them, of shape
        `made`; a fresh name when `made` is None) and `close` gives it back, emptied, unless the test changed it."""
        super().__init__(table=table, effects=f"{table}_fx", asynchronous=asynchronous)
        self.url = url
        self.returning = returning  # False: batches take MySQL's path without RETURNING (the store's option)
        self.pool, self.made = pool, made
        self._admin: pymysql.connections.Connection[Any] | None = None
        if made is None:
            self.admin(f"CREATE TABLE {self.effects_table} (source VARCHAR(600), message_id VARCHAR(600))")
        self.target = url

    def make(self, target: Any, **options: Any) -> Any:
        """Create the inbox, its store set to take the path without RETURNING when asked, and its schema."""
        inbox = super().make(target, **options)
        inbox._store.returning = self.returning
        return inbox

    def admin(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run SQL on a connection of its own, autocommit (one for the harness's life, opened at its first use: the
        checks read the database many times a test; pinged first, and opened again when a restart of the server or
        a KILL cut it)."""
        if self._admin is not None:
            try:
                self._admin.ping()
            except pymysql.Error:
                self._admin = None
        if self._admin is None:
            options = {k: v for k, v in connect_options(self.url).items() if k != "client_flag"}
            self._admin = pymysql.connect(**options | {"autocommit": True})
        with self._admin.cursor() as cursor:
            cursor.execute(sql, tuple(params) or None)
            return list(cursor.fetchall())

    def drop_key(self) -> None:
        """Drop the unique index."""
        self.admin(f"DROP INDEX {self.table}_key ON {self.table}")

    def close(self) -> None:
        """Close, then give the tables back to the pool (emptied) or drop them: the journal, the ones
        `create_schema` made beside it (version, outbox, payloads), the effects and any a test added."""
        try:
            super().close()
        finally:
            if self.pool is None or not self.pool.give_back(self.admin, self.table, self.made):
                MYSQL_TABLES.drop(self.admin, self.table)
            if self._admin is not None:
                self._admin.close()


class SQLiteFileHarness(Harness):
    """SQLite on a file, by URL."""

    dialect = "sqlite"

    def __init__(self, path: Path, *, table: str, asynchronous: bool) -> None:
        super().__init__(table=table, effects=f"{table}_fx", asynchronous=asynchronous)
        self.path = path
        self.admin(f"CREATE TABLE {self.effects_table} (source TEXT, message_id TEXT)")
        self.target = f"sqlite:///{path}"

    def admin(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run SQL on a connection of its own, autocommit."""
        connection = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        try:
            return connection.execute(sql, params).fetchall()
        finally:
            connection.close()

    def drop_key(self) -> None:
        """Drop the unique index."""
        self.admin(f"DROP INDEX {self.table}_key")


class SQLiteMemoryHarness(Harness):
    """SQLite in memory: the inbox gets the harness's own connection (autocommit), which also reads effects."""

    dialect = "sqlite"

    def __init__(self, *, table: str, asynchronous: bool) -> None:
        super().__init__(table=table, effects=f"{table}_fx", asynchronous=asynchronous)
        if self.runner is not None:
            self.connection: Any = self.runner.run(_aiosqlite_memory())
        else:
            self.connection = sqlite3.connect(":memory:", isolation_level=None)
        self.admin(f"CREATE TABLE {self.effects_table} (source TEXT, message_id TEXT)")
        self.target = self.connection

    def admin(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run SQL on the shared connection."""
        if self.runner is not None:
            return self.runner.run(_aiosqlite_fetch(self.connection, sql, params))  # type: ignore[no-any-return]
        return self.connection.execute(sql, params).fetchall()  # type: ignore[no-any-return]

    def reopen(self, **options: Any) -> None:
        """Replace the inbox (the memory database lives on in the shared connection)."""
        self.make(self.target, **options)

    def drop_key(self) -> None:
        """Drop the unique index."""
        self.admin(f"DROP INDEX {self.table}_key")

    def close(self) -> None:
        """Close the inbox, then the shared connection, then the loop."""
        self.call("aclose" if self.asynchronous else "close")
        self.inbox = None
        if self.runner is not None:
            self.runner.run(self.connection.close())
        else:
            self.connection.close()
        super().close()


async def _aiosqlite_memory() -> aiosqlite.Connection:
    return await aiosqlite.connect(":memory:", isolation_level=None)


async def _aiosqlite_fetch(connection: aiosqlite.Connection, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    cursor = await connection.execute(sql, params)
    return list(await cursor.fetchall())


def backdate(harness: Harness, seconds: float) -> None:
    """Move every settled_at of the harness's table `seconds` into the past (to test purge)."""
    if harness.dialect == "postgresql":
        harness.admin(
            f"UPDATE {harness.table} SET settled_at = settled_at - make_interval(secs => %s)",
            (seconds,),
        )
    elif harness.dialect == "mysql":
        harness.admin(f"UPDATE {harness.table} SET settled_at = settled_at - INTERVAL %s SECOND", (seconds,))
    else:
        harness.admin(f"UPDATE {harness.table} SET settled_at = settled_at - ?", (seconds,))


def lease(seconds: float) -> timedelta:
    """A lease of `seconds`."""
    return timedelta(seconds=seconds)
