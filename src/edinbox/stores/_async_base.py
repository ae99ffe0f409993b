"""The roles a journal store plays for the inbox: a unit of work on one connection, and the store itself."""
# sync-doc: The roles a journal store plays for the inbox: a unit of work on a blocking connection, and the store.

from __future__ import annotations

import contextlib
import json

# sync: from time import sleep
from asyncio import sleep  # async-only
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime, timedelta
from typing import Any, Protocol

from edinbox._application import Application
from edinbox._async_fts import index_waiting
from edinbox._core import COLUMNS, Pace, check_version, migration_steps
from edinbox._errors import SchemaError, StoreError
from edinbox._message import Message
from edinbox._payloads import pack
from edinbox._urls import mask
from edinbox.stores._async_applications import Where, create_applications, migrate_applications
from edinbox.stores._queries import payloads_ddl

__all__ = [
    "JOURNAL",
    "AsyncStore",
    "AsyncUnit",
    "create_journal",
    "held",
    "json_batch",
    "migrate_journal",
    "purge_batches",
    "purge_held",
    "table_keys",
    "verify_journal",
]

Params = Mapping[str, Any]
JOURNAL = "edinbox"
"""The owner of the journal's migrations in `migrate()`'s answer (an application is named by its own name)."""
JOURNAL_KEY = ["consumer", "message_id", "source"]
"""The journal's unique key, its columns sorted as every store lists a key."""


class AsyncUnit(Protocol):
    """One connection, held for one operation: a transaction of its own, or a savepoint in the caller's."""

    connection: Any
    """The driver's connection, handed to handlers as `tx.connection`."""
    managed: bool
    """The caller opens and ends the savepoint around each step (an SQLAlchemy session's nested transaction):
    begin() only makes sure a transaction is open (SQLite: BEGIN IMMEDIATE, left to the caller; elsewhere nothing),
    insert() and begin_fetch() need no savepoint of their own (PostgreSQL's insert still nests one in its query, for
    its retry); commit() and rollback() are not called."""

    @property
    def nested(self) -> bool:
        """The unit works in a savepoint of the caller's transaction (not a transaction of its own)."""

    async def begin(self) -> None:
        """Start the transaction (or the savepoint inside the caller's transaction)."""

    async def insert(self, name: str, params: Params) -> bool:
        """Begin, then run the named INSERT ... ON CONFLICT DO NOTHING; true when it inserted the row."""

    async def begin_fetch(self, name: str, params: Params) -> list[tuple[Any, ...]]:
        """Begin, then run the named statement (one round trip where the driver allows); return its rows."""

    async def fetch(self, name: str, params: Params) -> list[tuple[Any, ...]]:
        """Run the named statement and return its rows."""

    async def run(self, name: str, params: Params) -> int:
        """Run the named statement and return the number of rows it changed."""

    async def run_many(self, name: str, params: Sequence[Params]) -> int:
        """Run the named statement once per parameter set (one call to the driver); return the rows changed in all."""

    async def commit(self) -> None:
        """Commit (or release the savepoint); StoreError when the transaction was left aborted."""

    async def rollback(self) -> None:
        """Roll back (or roll back to the savepoint); never raises."""


class AsyncStore(Protocol):
    """A database holding the journal table."""

    dialect: str
    """"postgresql" or "sqlite"."""
    outbox: str
    """The outbox table's name (beside the journal, in its schema)."""

    def unit(self) -> AbstractAsyncContextManager[AsyncUnit]:
        """Hold a connection for one operation."""

    def timestamp(self, value: Any) -> datetime | None:
        """Turn a stored timestamp into an aware datetime."""

    def batch_params(self, messages: Sequence[Message], traces: Sequence[str | None] = ()) -> dict[str, Any]:
        """Parameters that pass a batch's keys, fingerprints and the traceparent each row keeps (`traces`, by
        position; empty: none) to one set-based statement."""

    def map_error(self, exc: Exception) -> Exception:
        """A handler's exception as edinbox sees it: a driver error mapped (DataError, StoreError), else itself."""

    async def create_schema(self, *, version: int) -> None:
        """Create the table, its unique key and the version row when missing, then each application's schema
        (idempotent; one transaction where the database allows it)."""

    async def verify(self, *, version: int, applications: bool = True) -> None:
        """Raise SchemaError unless the table, its unique key and the schema version are right (and, with
        `applications`, each application's schema version)."""

    async def migrate(self, *, version: int) -> dict[str, list[int]]:
        """Upgrade the journal to `version`, then each application found beside it to its own, in one transaction
        under the schema lock; return the versions applied by owner (`JOURNAL` for the journal's)."""

    async def unique_keys(self, name: str) -> list[list[str]] | None:
        """The unique keys of table `name` beside the journal, each as sorted column names; None when it is missing."""

    async def grant(self, role: str, *, tables: Sequence[str]) -> None:
        """Grant `role` what processing needs on the journal and `tables` beside it (ConfigurationError: no roles)."""

    async def purge(self, *, consumer: str, older_than: timedelta, batch_size: int, pace: Pace) -> int:
        """Delete settled rows older than `older_than` in bounded batches, one purger at a time, waiting before each
        batch as long as `pace` says."""

    async def wait(self, timeout: float) -> None:
        """Return when a commit published to the outbox, where the database can say so, or after `timeout` seconds."""

    async def aclose(self) -> None:
        """Release the connections the store opened (never the caller's)."""


async def found(unit: AsyncUnit, relation: Params) -> bool:
    """Whether the `relation` query finds the table (no row, or a NULL where the database looks a name up)."""
    rows = await unit.fetch("relation", relation)
    return bool(rows) and rows[0][0] is not None


async def create_journal(
    unit: AsyncUnit,
    steps: Sequence[tuple[str, Params]],
    *,
    version: int,
    table: object,
    applications: Sequence[Application] = (),
    where: Where | None = None,
) -> None:
    """In one transaction: run the named schema `steps`, seed the version row, check the version found, then create
    each of `applications` (`where` finds a table beside the journal); an older journal or application (SchemaError:
    run `edinbox migrate`) is left as it was, none of the steps committed (MariaDB commits each DDL statement: there
    every step holds when run again)."""
    await unit.begin()
    try:
        for name, params in steps:
            await unit.run(name, params)
        await unit.run("seed_version", {"version": version})
        rows = await unit.fetch("version", {})
        check_version([row[0] for row in rows], version=version, table=table)
        if applications and where is not None:
            await create_applications(unit, applications, where=where)
    except BaseException:
        await unit.rollback()
        raise
    await unit.commit()


async def migrate_journal(
    unit: AsyncUnit,
    *,
    lock: Sequence[tuple[str, Params]],
    relation: Params,
    steps: Mapping[int, Sequence[str]],
    version: int,
    table: object,
    dialect: str,
    applications: Sequence[Application] = (),
    where: Where | None = None,
) -> dict[str, list[int]]:
    """In one transaction, after the `lock` statements: read the journal's version, run the named queries of each
    later step up to `version` (`steps`), and record each step's version; then migrate each of `applications`
    found beside the journal (`where`). Return the versions applied by owner (`JOURNAL`, or an application's name).

    `relation` names the version table for the `relation` query. Run again, it finds nothing to do.
    """
    await unit.begin()
    try:
        for name, params in lock:
            await unit.run(name, params)
        if not await found(unit, relation):
            raise SchemaError(f"journal table {table} has no version table: run create_schema()")
        applied = migration_steps([row[0] for row in await unit.fetch("version", {})], version=version, table=table)
        for step in applied:
            if step not in steps:
                raise SchemaError(f"this edinbox has no migration to version {step} for this database")
            for name in steps[step]:
                await unit.run(name, {})
            if step in STEPS_IN_CODE:
                await STEPS_IN_CODE[step](unit, dialect)
            await unit.run("set_version", {"version": step})
        migrated = {JOURNAL: applied}
        if applications and where is not None:
            migrated.update(await migrate_applications(unit, applications, dialect=dialect, where=where))
    except BaseException:
        await unit.rollback()
        raise
    await unit.commit()
    return migrated


async def mask_destinations(unit: AsyncUnit, dialect: str) -> None:
    """Migration 9: every outbox destination kept without its passwords (`mask`), as `publish` now stores it."""
    rows = await unit.fetch("outbox_destinations", {})
    changed = [{"old": row[0], "new": mask(row[0])} for row in rows if mask(row[0]) != row[0]]
    if changed:
        await unit.run_many("outbox_set_destination", changed)


REINDEX_BATCH = 1000
"""Kept rows indexed at a time by migration 14 (fewer when their text passes `FTS_BATCH_BYTES`)."""


async def create_payloads(unit: AsyncUnit, dialect: str) -> None:
    """Migrations 11, 13 and 14: the kept payloads' table and its indexes, made by the statements `create_schema()`
    runs (what is there already stays)."""
    for name in payloads_ddl(dialect):
        await unit.run(name, {})


async def index_kept_words(unit: AsyncUnit, dialect: str) -> None:
    """Migration 14 (SQLite; nothing elsewhere): version 13's full-text index, reading the words from the rows'
    `text`, gives way to one that keeps no copy of them (`payloads_create*`, its mark at 0); the bytes of a row
    version 13 left waiting are packed (one row in memory at a time), every row's `text` is emptied, and every row
    is indexed again from its body, as the index batches do (`index_waiting`)."""
    if dialect != "sqlite":
        return
    if not await unit.fetch("payloads_fts_stored", {}):  # made as version 14 has it (a journal older than 11)
        await create_payloads(unit, dialect)
        return
    await unit.run("payloads_fts_drop", {})
    await create_payloads(unit, dialect)
    for (rowid,) in await unit.fetch("payloads_waiting_rows", {}):
        body = (await unit.fetch("payloads_body", {"id": rowid}))[0][0]
        await unit.run("payloads_pack", {"id": rowid, "body": pack(bytes(body))})
    await unit.run("payloads_forget_text", {})
    while await index_waiting(unit, REINDEX_BATCH):
        pass


STEPS_IN_CODE: dict[int, Callable[[AsyncUnit, str], Awaitable[None]]] = {
    9: mask_destinations,
    11: create_payloads,
    13: create_payloads,
    14: index_kept_words,
}
"""Migration steps that SQL cannot write, run after the named queries of their version (`v<N>_*`)."""


KeyLister = Callable[[AsyncUnit, Params], Awaitable[list[list[str]]]]
"""How a store lists the unique keys of the table its `relation` query names, each as sorted column names."""


async def verify_journal(
    unit: AsyncUnit, relation: Params, *, keys: KeyLister, versions: Params, version: int, table: object
) -> None:
    """Raise SchemaError unless the journal (`relation`) has its columns and its unique key (as `keys` lists them),
    and its version table (`versions`) holds `version`."""
    if not await found(unit, relation):
        raise SchemaError(f"journal table {table} does not exist: run create_schema()")
    has_versions = await found(unit, versions)
    if has_versions:  # an older journal lacks the columns of later versions: the answer is `edinbox migrate`
        check_version([row[0] for row in await unit.fetch("version", {})], version=version, table=table)
    columns = {row[0] for row in await unit.fetch("columns", relation)}
    if missing := set(COLUMNS) - columns:
        raise SchemaError(f"journal table {table} lacks columns {sorted(missing)}")
    if JOURNAL_KEY not in await keys(unit, relation):
        raise SchemaError(
            f"journal table {table} has no unique index on (consumer, source, message_id): "
            "without it duplicates are not suppressed; run create_schema() to restore it"
        )
    if not has_versions:
        raise SchemaError(f"journal table {table} has no version table: run create_schema()")


async def table_keys(unit: AsyncUnit, relation: Params, *, keys: KeyLister) -> list[list[str]] | None:
    """The unique keys of the table `relation` names, as `keys` lists them; None when it is missing."""
    if not await found(unit, relation):
        return None
    return await keys(unit, relation)


def json_batch(messages: Sequence[Message], traces: Sequence[str | None] = ()) -> dict[str, Any]:
    """A batch as one JSON array of [source, message_id, fingerprint, trace], for the databases that read it with
    json_each() or JSON_TABLE(): the insert reads all four, the lookup of the keys the first two (one array made and
    bound, not a second one of the keys alone that the insert would bind unread). `traces` by position; empty: none."""
    kept = list(traces) or [None] * len(messages)
    return {
        "batch": json.dumps([[m.source, m.message_id, m.fingerprint, t] for m, t in zip(messages, kept, strict=True)])
    }


@asynccontextmanager
async def held(unit: AsyncUnit) -> AsyncIterator[AsyncUnit]:
    """A unit already held (with the purge lock on its session), handed out again for each batch."""
    yield unit


async def purge_batches(
    units: Callable[[], AbstractAsyncContextManager[AsyncUnit]], params: Params, *, batch_size: int, pace: Pace
) -> int:
    """Run `purge_batch` one committed transaction at a time, on a unit of `units()` each, until a batch comes back
    short; before each batch wait as `pace` says (after the commit: no row lock is held meanwhile). The rows deleted.
    """
    total = 0
    while True:
        await sleep(pace.delay())
        async with units() as unit:
            await unit.begin()
            try:
                deleted = await unit.run("purge_batch", params)
            except BaseException:
                await unit.rollback()
                raise
            await unit.commit()
        pace.count(deleted)
        total += deleted
        if deleted < batch_size:
            return total


async def purge_held(unit: AsyncUnit, params: Params, *, batch_size: int, pace: Pace, unlock: Callable[[], Any]) -> int:
    """`purge_batches` on a unit whose session holds the purge lock, then `unlock()`. When a batch fails, its error is
    the one raised: a StoreError of the unlock then (the connection was lost with the batch, and the session's lock
    with it) is dropped, so the report names what broke, not the clean-up after it."""
    try:
        deleted = await purge_batches(lambda: held(unit), params, batch_size=batch_size, pace=pace)
    except BaseException:
        with contextlib.suppress(StoreError):
            await unlock()
        raise
    await unlock()
    return deleted
