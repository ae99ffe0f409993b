"""The journal side of the inbox: settings, schema, and the operator's calls (async; the sync twin is generated).

`AsyncInbox` adds the deliveries (`process`, `process_batch`) on top of this class.
"""
# sync-doc: The journal side of the inbox: settings, schema, and the operator's calls, on blocking connections.
# sync-doc:
# sync-doc: `Inbox` adds the deliveries (`process`, `process_batch`) on top of this class.

from __future__ import annotations

import asyncio
import contextlib

# sync: from time import sleep
from asyncio import sleep  # async-only
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import datetime, timedelta
from functools import partial
from operator import methodcaller
from types import TracebackType
from typing import Any, Self, TypeVar

import stamina

from edinbox import _async_fts as fts
from edinbox._application import Application
from edinbox._core import POOL_SIZE, SCHEMA_VERSION, Pace, Status, check_retention
from edinbox._dead import check_destination
from edinbox._errors import ConfigurationError, SchemaError
from edinbox._message import Message, Outgoing
from edinbox._outbox import Claimed, OutboxStats, SendResult, Verdict, by_destination, judge_send, mark_params
from edinbox._payloads import (
    INDEXED_ON_SETTLE,
    PAYLOAD_CAP,
    WALK,
    Hit,
    Kept,
    check_cap,
    index_columns,
    index_params,
    keep_columns,
    keep_params,
    search_query,
    words_pattern,
)
from edinbox._plan import check_settings
from edinbox._records import Record, Stats, Tx
from edinbox._retry import Retry
from edinbox._urls import with_password
from edinbox.stores._async_base import JOURNAL, AsyncUnit
from edinbox.stores._async_factory import open_store
from edinbox.stores._mapping import lock_conflict

__all__ = ["AsyncJournal"]

T = TypeVar("T")

LOCK_ATTEMPTS = 4
"""How many times a relay runs its claim, or its mark, while the server ends it in a lock conflict (then the
StoreError is raised): a deadlock's victim is rolled back and the other transaction goes on, so the next run
usually succeeds."""

INDEX_BATCH = 500
"""Kept payloads indexed per transaction (`index_payloads`' default limit)."""

Send = Callable[[str, Sequence[Outgoing]], Awaitable[None]]
"""`send(destination, [Outgoing(key, payload, headers), ...])`: deliver in order, each key as the producer id,
broker-confirmed."""


class AsyncJournal:
    """The journal of consumed messages of one consumer: its settings, its schema, and the operator's calls."""

    def __init__(
        self,
        target: Any,
        *,
        consumer: str,
        table: str = "inbox",
        max_attempts: int = 5,
        horizon: timedelta = timedelta(days=7),
        pool_size: int = POOL_SIZE,
        applications: Sequence[Application] = (),
        retry: Retry | None = None,
        dead_letters: str | None = None,
        keep_payloads: bool = False,
        payload_cap: int = PAYLOAD_CAP,
    ) -> None:
        """Check the configuration; nothing connects until the first call. `applications` add their own named
        statements to the store (`edinbox.Application`: an application's tables beside the journal). `retry` (default
        `Retry()`) says how long a message waits after each failed attempt before the next delivery may run it
        again. `dead_letters` (a broker destination URL) also publishes each message parked DEAD there, through the
        outbox, in the transaction that parks it (see `edinbox._dead`). `keep_payloads` keeps each processed
        message's payload beside the journal, in the transaction that settles it (the message store: `payload()`,
        `search()`; see `edinbox._payloads`), its first `payload_cap` bytes when it is longer."""
        check_settings(consumer, max_attempts=max_attempts, horizon=horizon)
        if retry is not None and not isinstance(retry, Retry):
            raise ConfigurationError(f"retry must be an edinbox.Retry, got {type(retry).__name__}")
        self.consumer = consumer
        self.max_attempts = max_attempts
        self.retry = retry or Retry()
        if dead_letters is not None:
            check_destination(dead_letters)
        self.dead_letters = dead_letters
        self.keep_payloads = bool(keep_payloads)
        self.payload_cap = check_cap(payload_cap)
        self.horizon = horizon
        self._table = table
        self._store = open_store(target, table=table, pool_size=pool_size, applications=tuple(applications))
        self.dialect = self._store.dialect
        self.outbox = self._store.outbox
        """The outbox table's name, beside the journal (`<journal>_outbox`)."""

    async def __aenter__(self) -> Self:
        """Use the inbox as a context manager that closes it."""
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the connections the inbox opened."""
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections the inbox opened (a caller's connection or pool stays open)."""
        await self._store.aclose()

    async def create_schema(self) -> None:
        """Create the journal table, its unique key, its outbox and schema version when missing, then each
        application's tables at its version (idempotent): one transaction on PostgreSQL and SQLite, so a failure
        leaves nothing behind; on MariaDB, which commits each DDL statement, a second run completes a first one
        that failed. SchemaError, with nothing created, when the journal or an application is older than this code
        (run `migrate()`) or newer."""
        await self._store.create_schema(version=SCHEMA_VERSION)

    async def migrate(self) -> list[int]:
        """Upgrade the journal from an older schema version to this edinbox's, rows kept, then each application
        found beside it to its own version; return the journal's versions applied (`migrations()` says the
        applications' too).

        Each step's named queries (`sql/<dialect>/migrations.sql`, an application's `migrations.sql`) run in one
        transaction with the version rows, under the schema lock (PostgreSQL: an advisory lock; SQLite: the write
        lock), so concurrent callers migrate once; run again, it applies nothing. An application with no tables
        here is left alone. SchemaError when the journal or an application is newer than this edinbox.
        """
        return (await self.migrations())[JOURNAL]

    async def migrations(self) -> dict[str, list[int]]:
        """`migrate()`, returning the versions applied by owner: `"edinbox"` for the journal's, and each application
        found beside it by its name."""
        return await self._store.migrate(version=SCHEMA_VERSION)

    async def verify(self, *, applications: bool = True) -> None:
        """Raise SchemaError when the table, its unique key or the schema version is wrong or missing, or (unless
        `applications` is false: the journal alone) when an application's tables are missing or at another
        version."""
        await self._store.verify(version=SCHEMA_VERSION, applications=applications)

    async def transaction(self, work: Callable[[Tx], Awaitable[T]]) -> T:
        """Run `work(tx)` in one transaction of its own on the journal's database, committed when it returns.

        `tx.unit` runs the store's named statements (the journal's, and those of tables kept beside it).
        """
        async with self._store.unit() as unit:
            await unit.begin()
            try:
                result = await work(Tx(unit.connection, self.dialect, unit=unit))
            except BaseException:
                await unit.rollback()
                raise
            await unit.commit()
            return result

    async def read(self, work: Callable[[Tx], Awaitable[T]]) -> T:
        """Run `work(tx)`, which reads, on a connection of the journal's database without opening a transaction
        (no write lock on SQLite); `tx.unit.fetch` runs the store's named statements.

        On the store's own connections an application's DDL (`CREATE TABLE IF NOT EXISTS`) run here commits on every
        store (PostgreSQL's and SQLite's run it outside any transaction, MariaDB commits DDL by itself), where a
        handler's would end the handler's transaction on MariaDB."""
        async with self._store.unit() as unit:
            return await work(Tx(unit.connection, self.dialect, unit=unit))

    async def unique_keys(self, table: str) -> list[list[str]] | None:
        """The unique keys of `table`, a table beside the journal (in its schema), as sorted column names.

        None when the table does not exist.
        """
        return await self._store.unique_keys(table)

    async def grant(self, role: str, *, tables: Sequence[str] = ()) -> None:
        """Grant the PostgreSQL role `role` what processing needs and no more: USAGE on the journal's schema,
        SELECT/INSERT/UPDATE/DELETE on the journal and on `tables` beside it, their sequences, and SELECT on the
        version table. ConfigurationError on SQLite (no roles).
        """
        await self._store.grant(role, tables=tables)

    async def _write(self, name: str, params: dict[str, Any]) -> int:
        """Run one statement in a transaction of its own; return the number of rows it changed."""
        return await self._in_transaction(methodcaller("run", name, params))

    async def _in_transaction(self, work: Callable[[AsyncUnit], Awaitable[int]]) -> int:
        """Run `work` on a unit in a transaction of its own; return the number of rows it changed."""
        async with self._store.unit() as unit:
            await unit.begin()
            try:
                changed = await work(unit)
            except BaseException:
                await unit.rollback()
                raise
            await unit.commit()
            return changed

    async def purge(self, older_than: timedelta, *, batch_size: int = 1000, max_rate: float | None = None) -> int:
        """Delete processed rows settled more than `older_than` ago, `batch_size` rows per transaction, then the
        payloads kept that long ago whose journal row is gone, then the outbox's rows sent that long ago.

        Refuses (ConfigurationError) when `older_than` is shorter than the redelivery horizon. Failed, dead,
        leased and conflict rows are never purged. On PostgreSQL and MariaDB one purger runs at a time, across
        processes (a session lock; a second one returns 0 at once). `max_rate` throttles it: at most that many rows
        per second (journal and outbox together), with a pause between committed batches; None (the default) does
        not wait. Returns the number of rows deleted.
        """
        check_retention(older_than, horizon=self.horizon)
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size must be a positive integer, got {batch_size!r}")
        pace = Pace(max_rate)
        deleted = await self._store.purge(
            consumer=self.consumer, older_than=older_than, batch_size=batch_size, pace=pace
        )
        params = {"consumer": self.consumer, "older_than": older_than, "batch_size": batch_size}
        sqlite = self.dialect == "sqlite"  # there the rows leave the full-text index first
        kept = partial(fts.purge, params=params) if sqlite else methodcaller("run", "payloads_purge_batch", params)
        for work in (kept, methodcaller("run", "outbox_purge_batch", params)):
            while True:
                await sleep(pace.delay())
                gone = await self._in_transaction(work)
                pace.count(gone)
                deleted += gone
                if gone < batch_size:
                    break
        return deleted

    async def relay(self, send: Send, *, limit: int = 100, destinations: Sequence[str] = ()) -> SendResult:
        """One relay pass: claim up to `limit` committed, unsent outbox rows, send them, mark them sent.

        A row keeps its destination without a password (`amqp://guest:***@host/?queue=q`): `send` gets it with
        the password of the first of `destinations` (full URLs) naming the same scheme, user, host and port; a row
        whose password none of them has is parked with that reason.

        Rows go to `send` grouped by destination, in the order they were published; at most one unsent row per
        destination and key is claimed at a time, so order per key holds. On PostgreSQL and MariaDB the claim
        holds the rows (FOR UPDATE SKIP LOCKED) until they are marked, so several relays share the outbox and never
        send a row another one holds; on SQLite run one relay per database. A ConfigurationError or PermanentError
        of `send` parks the row with its reason (a group of several is sent row by row first, so only the bad row
        pays); any other failure leaves the rows unsent and is returned in `SendResult.error` (back off, then call
        again). A crash after `send` and before the mark sends those rows again: at least once, same key.

        A claim or a mark that the server ends in a lock conflict (a deadlock, a serialization failure, a lock wait
        timeout) is run again, up to `LOCK_ATTEMPTS` times with a short backoff, before its StoreError is raised; a
        mark in a transaction of its own then, since its rows were sent. Not on the caller's connection inside its
        transaction (the server may have rolled back the caller's work): there the StoreError is raised at once.
        """
        if not isinstance(limit, int) or limit < 1:
            raise ConfigurationError(f"limit must be a positive integer, got {limit!r}")
        claim = {"limit": limit}
        if self._store.dialect == "sqlite":  # no lock held while sending: the journal's writers go on
            async with self._store.unit() as unit:
                rows = await unit.fetch("outbox_claim", claim)
            sent, parked, error = await self._send_all(send, rows, destinations)
            async with self._store.unit() as unit:
                await unit.begin()
                await self._mark(unit, sent, parked)
        else:  # the claim's rows stay locked (SKIP LOCKED for the other relays) until they are marked
            async with self._store.unit() as unit:
                rows = await _again(unit, partial(unit.begin_fetch, "outbox_claim", claim))
                try:
                    sent, parked, error = await self._send_all(send, rows, destinations)
                except BaseException:
                    await unit.rollback()
                    raise
                # a mark the server rolled back is run again in a transaction of its own: the rows are sent already
                await _again(unit, partial(self._mark, unit, sent, parked), begin=True)
        return SendResult(sent=len(sent), parked=tuple((row.key, r) for row, r in parked), error=error)

    async def _send_all(
        self, send: Send, rows: Sequence[Sequence[Any]], destinations: Sequence[str]
    ) -> tuple[list[int], list[tuple[Claimed, str]], Exception | None]:
        """Send every claimed row, each destination's rows in order (the destinations side by side where the sends can
        overlap, one after the other where each blocks): the ids sent, the rows parked, a transient failure."""
        sent: list[int] = []
        parked: list[tuple[Claimed, str]] = []
        sends = [
            self._send(partial(_with_password, send, destinations), destination, group, sent, parked)
            for destination, group in by_destination(rows).items()
        ]
        # sync: failures = sends
        failures = await asyncio.gather(*sends)  # async-only
        return sent, parked, next((f for f in failures if f is not None), None)

    async def _mark(self, unit: AsyncUnit, sent: list[int], parked: list[tuple[Claimed, str]]) -> None:
        """Mark the sent rows sent and park the others, then commit the unit's open transaction."""
        try:
            if sent:
                await unit.run("outbox_mark_sent", mark_params(sent, self._store.dialect))
            if parked:
                await unit.run_many("outbox_park", [{"id": row.id, "reason": r} for row, r in parked])
        except BaseException:
            await unit.rollback()
            raise
        await unit.commit()

    async def _send(
        self, send: Send, destination: str, group: list[Claimed], sent: list[int], parked: list[tuple[Claimed, str]]
    ) -> Exception | None:
        """Send one destination's rows; append what settled to `sent` / `parked`; return a transient failure."""
        try:
            await send(destination, [row.outgoing() for row in group])
        except Exception as exc:
            if judge_send(exc) is Verdict.RETRY:
                return exc
            if len(group) == 1:
                parked.append((group[0], f"{type(exc).__name__}: {exc}"[:1000]))
                return None
            for row in group:  # find the row that cannot be sent: only it pays
                if failure := await self._send(send, destination, [row], sent, parked):
                    return failure
            return None
        sent.extend(row.id for row in group)
        return None

    async def wait_outbox(self, timeout: float) -> None:
        """Return when a transaction published to the outbox (PostgreSQL LISTEN/NOTIFY, on a connection the
        journal opens by URL) or after `timeout` seconds, whichever comes first (a plain sleep elsewhere)."""
        await self._store.wait(timeout)

    async def outbox_stats(self) -> OutboxStats:
        """The outbox's backlog (unsent rows), parked and sent rows, and the age of the oldest unsent row."""
        async with self._store.unit() as unit:
            rows = await unit.fetch("outbox_stats", {})
        return OutboxStats.from_row(rows[0])

    async def stats(self) -> Stats:
        """Count this consumer's journal rows by status."""
        async with self._store.unit() as unit:
            rows = await unit.fetch("stats", {"consumer": self.consumer})
        return Stats.from_counts({Status(status): count for status, count in rows})

    async def oldest(self) -> dict[str, datetime]:
        """When the oldest row of each status of this consumer was received (statuses without rows are absent)."""
        async with self._store.unit() as unit:
            rows = await unit.fetch("oldest", {"consumer": self.consumer})
        found = {str(status): self._store.timestamp(when) for status, when in rows}
        return {status: when for status, when in found.items() if when is not None}

    async def get(self, source: str, message_id: str) -> Record | None:
        """The journal row of one message of this consumer, or None."""
        key = {"consumer": self.consumer, "source": source, "message_id": message_id}
        async with self._store.unit() as unit:
            rows = await unit.fetch("get", key)
        return Record.from_row(rows[0], self._store.timestamp) if rows else None

    async def records(self, *, status: Status | str | None = None, limit: int = 100) -> list[Record]:
        """This consumer's rows, newest first, optionally only those with `status`."""
        wanted = None if status is None else Status(status).value
        async with self._store.unit() as unit:
            rows = await unit.fetch("records", {"consumer": self.consumer, "status": wanted, "limit": limit})
        return [Record.from_row(row, self._store.timestamp) for row in rows]

    async def _keep(self, unit: AsyncUnit, messages: Sequence[Message]) -> None:
        """Keep the payloads of `messages`, processed in `unit`'s open transaction (the message store)."""
        indexed = self.dialect in INDEXED_ON_SETTLE  # SQLite: its words indexed after the commit
        rows = [keep_params(self.consumer, m, cap=self.payload_cap, indexed=indexed) for m in messages]
        kept = len(rows)
        if self.dialect == "postgresql":  # one statement over arrays, as the journal's batch insert
            await unit.run("payloads_keep_batch", keep_columns(self.consumer, rows))
        elif len(rows) == 1:
            kept = await unit.run("payloads_keep", rows[0])
        else:
            kept = await unit.run_many("payloads_keep", rows)
        if self.dialect == "sqlite" and kept < len(rows):  # a message kept before, then forgotten
            await fts.replace(unit, rows)

    async def payload(self, source: str, message_id: str) -> Kept | None:
        """The payload kept of one message of this consumer (`keep_payloads`), or None."""
        key = {"consumer": self.consumer, "source": source, "message_id": message_id}
        with self._kept_table():
            async with self._store.unit() as unit:
                rows = await unit.fetch("payloads_get", key)
        return Kept.from_row(rows[0], self._store.timestamp) if rows else None

    @contextlib.contextmanager
    def _kept_table(self) -> Iterator[None]:
        """Say "run migrate" when the kept payloads' table is missing beside an existing journal (one older than
        version 11, the message store)."""
        try:
            yield
        except SchemaError as exc:
            raise SchemaError(
                f"{self._table}_payloads is missing: this journal is older than the message store (version 11); "
                "run `edinbox migrate` (or migrate())"
            ) from exc

    async def index_payloads(self, *, limit: int = INDEX_BATCH) -> int:
        """Index up to `limit` kept payloads that a search cannot find yet (on SQLite their words are indexed after
        the settling transaction, in one of their own, those of every consumer of the journal in the order kept; on
        PostgreSQL the rows of this consumer that journal version 13 left waiting); return how many. A quick read
        first: with none waiting, no write lock is taken."""
        if self.dialect == "mysql":  # no row ever waits there (`text` is NOT NULL)
            return 0
        params = {"consumer": self.consumer, "limit": limit}
        with self._kept_table():
            async with self._store.unit() as unit:
                if not await unit.fetch("payloads_waiting", params):
                    return 0
        async with self._store.unit() as unit:
            await unit.begin()
            try:
                if self.dialect == "sqlite":
                    done = await fts.index_waiting(unit, limit)
                else:  # one statement over arrays, as `_keep`
                    rows = [index_params(self.consumer, row) for row in await unit.fetch("payloads_pending", params)]
                    if rows:
                        await unit.run("payloads_index_batch", index_columns(self.consumer, rows))
                    done = len(rows)
            except BaseException:
                await unit.rollback()
                raise
            await unit.commit()
        return done

    async def search(self, text: str, *, limit: int = 20) -> list[Hit]:
        """The kept payloads of this consumer holding `text` (a PO number, an invoice number, a GLN: every word of it
        of 3 or more letters or digits, as a whole word), newest first, at most `limit`; ConfigurationError for a
        search without such a word. The payloads kept but not indexed yet are indexed first (`index_payloads`), so
        a search finds every one settled before it."""
        if not isinstance(limit, int) or limit < 1:
            raise ConfigurationError(f"limit must be a positive integer, got {limit!r}")
        words = search_query(text)
        while await self.index_payloads():  # a batch of big payloads may hold fewer than INDEX_BATCH
            pass
        params = {
            "consumer": self.consumer,
            "words": " ".join(words),  # PostgreSQL: plainto_tsquery, every word
            "terms": " ".join(f'"{w}"' for w in words),  # SQLite: FTS5, every term
            "required": " ".join(f"+{w}" for w in words),  # MariaDB: boolean mode, every word required
            "pattern": words_pattern(words),  # MariaDB: the newest rows first (`payloads_search_newest`)
            "walk": WALK,
            "limit": limit,
        }
        async with self._store.unit() as unit:
            rows = await unit.fetch("payloads_search_newest", params) if self.dialect == "mysql" else []
            if len(rows) < limit:  # a word the newest rows do not hold `limit` times: the full-text index answers
                rows = await unit.fetch("payloads_search", params)
        return [Hit.from_row(row, self._store.timestamp) for row in rows]

    async def requeue(self, source: str, message_id: str) -> bool:
        """Make a dead or conflict row processable again by the next delivery; false when there was none.

        A dead row keeps its key and gets a fresh attempt count; a conflict row takes the conflicting
        fingerprint, so the next delivery runs the handler (deliberately, for the corrected message).
        """
        key = {"consumer": self.consumer, "source": source, "message_id": message_id}
        return await self._write("requeue", key) > 0

    async def forget(self, source: str, message_id: str) -> bool:
        """Delete one row so that the next delivery is processed again (deliberate reprocessing)."""
        key = {"consumer": self.consumer, "source": source, "message_id": message_id}
        return await self._write("forget", key) > 0


async def _with_password(
    send: Send, destinations: Sequence[str], destination: str, messages: Sequence[Outgoing]
) -> None:
    """`send` to `destination` with its password from `destinations` (ConfigurationError, which parks the rows,
    when none has it)."""
    await send(with_password(destination, destinations), messages)


async def _again(unit: AsyncUnit, work: Callable[[], Awaitable[T]], *, begin: bool = False) -> T:
    """`work()` on `unit`, run again while the server ends it in a lock conflict (a deadlock, a serialization failure,
    a lock wait timeout), rolled back first and after a pause with jitter, `LOCK_ATTEMPTS` times in all; then that
    StoreError (a TransientError) is raised. From the second run on, `begin` begins a transaction for `work` first.
    Only in a transaction of the unit's own: in the caller's (a savepoint), MariaDB rolled back the caller's work too,
    and the caller must know."""
    attempts = 1 if unit.nested else LOCK_ATTEMPTS
    first = True
    async for attempt in stamina.retry_context(
        on=lock_conflict, attempts=attempts, wait_initial=0.05, wait_max=1.0, wait_jitter=0.1
    ):
        with attempt:
            if begin and not first:
                await unit.begin()
            first = False
            try:
                return await work()
            except BaseException:
                await unit.rollback()
                raise
    raise AssertionError("unreachable: stamina raises the last error")  # pragma: no cover
