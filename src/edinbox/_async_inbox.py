"""AsyncInbox: exactly-once effects on an at-least-once broker (the sync `Inbox` is generated from this module).

How a delivery is settled (every decision comes from `edinbox._core`):

- new key: one round trip begins the transaction and inserts the journal row (INSERT ... ON CONFLICT DO NOTHING);
  the handler runs on the same connection; the commit settles both: PROCESSED.
- known key: the row is locked and `_core.decide` says DUPLICATE, CONFLICT (recorded on the row for operators),
  DEAD, or retry. A concurrent duplicate waits on the unique index for the first transaction, then sees its row.
- handler exception: rollback, then who pays is decided by `_core.judge` (a driver error raised by the
  handler's own SQL is first mapped by the store to DataError or StoreError, chained from it):
  a PermanentError (DataError, LimitError, or the user's own subclass) parks the message at once, dead with the
  reason, and `process` returns DEAD (settled); a TransientError (StoreError, NotSettledError, SourceError), or
  a ConfigurationError or SchemaError (the operator's to fix), records nothing, counts no attempt and
  propagates; any other exception (the handler's own) counts one attempt,
  recorded in a separate transaction, and propagates unchanged. The failure that reaches `max_attempts` parks the
  row as dead at once (the exception still propagates, so the caller does not ack); the next delivery returns
  DEAD. When the failure itself cannot be recorded, StoreError propagates: not settled, nothing counted.
- caller's connection: the inbox works in a savepoint and never commits the caller's transaction (on a
  connection that is not autocommit and has none open yet, it opens the transaction and leaves it to the caller);
  a handler failure rolls back to the savepoint, re-raises, and records the attempt inside the caller's
  transaction, so it is kept only if the caller commits (and max_attempts only counts what was committed). On an
  autocommit connection with no transaction open there is nothing of the caller's to join: the inbox commits its
  own, as with a URL or a pool.
- batches: a handler failure charges no message of the batch; `isolate=True` then settles each message alone,
  so only the failing ones pay (see `process_batch`). Lease mode: see `process(lease=...)`.
"""
# sync-doc: Inbox: exactly-once effects on an at-least-once broker, on blocking connections.
# sync-doc:
# sync-doc: Every decision comes from `edinbox._core`; how a delivery is settled, and who pays for a failure, is written
# sync-doc: once, in the module this one is generated from.

from __future__ import annotations

import copy
import enum
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal, cast, overload

from edinbox import _trace
from edinbox._async_leases import Handler, _AsyncLeases, then, then_complete
from edinbox._async_session import JoinedInboxes, SessionStore, driver_connection, in_session
from edinbox._core import Action, Failure, Found, decide, judge
from edinbox._errors import ConfigurationError, DataError, RetryLater, StoreError
from edinbox._message import Message, Outcome
from edinbox._plan import (
    Key,
    describe,
    failure_rows,
    found_row,
    key_params,
    plan_batch,
    wait_error,
)
from edinbox._records import Tx
from edinbox._retry import failure_delay
from edinbox.stores._async_base import AsyncStore, AsyncUnit

__all__ = ["AsyncInbox"]

BatchHandler = Callable[[Tx, list[Message]], Awaitable[object]]
BatchHook = Callable[[Tx, list[Outcome]], Awaitable[object]]

_RETRIES = 3  # a row deleted (forget, purge) between the insert and the lock: start over


class _Next(enum.Enum):
    """What a batch attempt that returned no outcomes asks for."""

    RESTART = "restart"  # a row vanished between the insert and the lock
    ISOLATE = "isolate"  # the handler failed: settle each message alone


@dataclass(frozen=True, slots=True)
class _Ran:
    """A failed batch whose handler ran for one message only: the failure is that message's, its `attempt`-th."""

    index: int
    error: Exception
    attempt: int


class AsyncInbox(_AsyncLeases):
    """The journal of consumed messages of one consumer, in PostgreSQL or SQLite.

    `target` is a URL (`postgresql://...`, `sqlite:///relative.db`, `sqlite:////absolute.db`, `sqlite://` in
    memory), a psycopg pool, or the caller's own connection (psycopg or SQLite) so the journal row joins the
    caller's transaction. `horizon` is the longest time after which a message can still come back (broker
    redelivery, retry schedule, operator replay); `purge` refuses to forget anything younger. `pool_size` bounds
    the pool a URL inbox opens when calls overlap (threads, tasks; default `POOL_SIZE`, 16: it grows only while calls
    wait); one at a time, it uses one connection.
    """

    _joined: JoinedInboxes | None = None
    _last_tx: Tx | None = None

    def _join(self, connection: Any) -> AsyncInbox:
        """An inbox with these settings on a session's driver connection (its transaction is the session's)."""
        return AsyncInbox(
            connection,
            consumer=self.consumer,
            table=self._table,
            max_attempts=self.max_attempts,
            horizon=self.horizon,
            retry=self.retry,
            dead_letters=self.dead_letters,
            keep_payloads=self.keep_payloads,
            payload_cap=self.payload_cap,
        )

    async def _session_inbox(self, session: Any) -> AsyncInbox:
        """An inbox with these settings on the driver's connection under `session`'s transaction (begun if none),
        whose savepoints are the session's nested transactions."""
        if self._joined is None:
            self._joined = JoinedInboxes(self._join)
        joined: AsyncInbox = copy.copy(self._joined.get(await driver_connection(session)))
        joined._store = cast(AsyncStore, SessionStore(joined._store, session))  # the store's own, its units wrapped
        return joined

    async def process(
        self,
        message: Message,
        handler: Handler,
        *,
        lease: timedelta | None = None,
        at_most_once: bool = False,
        session: Any = None,
        on_complete: Callable[[Tx], Awaitable[object]] | None = None,
    ) -> Outcome:
        """Run `handler(tx, message)` once per key and return how the message settled; raise if it did not.

        Returns PROCESSED, DUPLICATE, CONFLICT, or DEAD (parked: by an earlier delivery, or now by a
        PermanentError of the handler). Raises, not settled: the handler's own exception (one attempt counted, and
        the row waits the `retry` policy's delay before the next), a TransientError (nothing counted),
        NotSettledError under a live lease elsewhere, and its subclass RetryLater for a delivery that came before
        the message's retry time (nothing runs, nothing is counted; hand it back to come again after `.delay`).

        With `lease`, the handler's effect is not transactional: the claim commits first, the handler runs
        outside any transaction with `tx.idempotency_key` (see `_core.idempotency_key`) and may call
        `tx.extend_lease()` as a heartbeat, and the completion commits after. A delivery during a live lease
        raises NotSettledError; after an expired lease the handler runs again with the same key, or the row is
        parked (DEAD) when `at_most_once` is set. `on_complete(tx)` then runs in the transaction that commits the
        completion (e.g. to publish to the outbox only with it); without `lease` it runs after the handler, in its
        transaction. Either way it shares the fate of the PROCESSED outcome.

        With an SQLAlchemy `session` (the session class of the inbox's kind), the journal row is written on the
        session's connection inside its transaction (begun if none), in a savepoint (the inbox's own, or the
        session's `begin_nested()` once the session flushes ORM state in it): the inbox never commits the
        transaction, the caller does. The handler gets the session as `tx.connection`, inside that savepoint (its
        failure discards its ORM work with the journal row).

        With OpenTelemetry installed, each call is a span `edinbox settle` (key, consumer, outcome, attempt) with
        children `edinbox handler` and `edinbox commit` (see `edinbox._trace`).
        """
        if session is not None:
            if lease is not None:
                raise ConfigurationError("lease mode runs the handler outside any transaction: no session to join")
            if on_complete is not None:
                handler = then(handler, on_complete)
            joined = await self._session_inbox(session)
            return await joined.process(message, in_session(session, handler))
        if on_complete is not None and lease is None:
            handler = then(handler, on_complete)
        if self.keep_payloads:  # kept in the transaction that settles the message
            if lease is None:
                handler = then(handler, partial(_keep, self, message))
            else:
                on_complete = then_complete(on_complete, partial(_keep, self, message))
        if not _trace.tracing():  # checked once per delivery: `traced` tells the steps below
            if lease is not None:
                return await self._process_leased(message, handler, lease, at_most_once, on_complete, traced=False)
            return await self._process(message, handler, traced=False)
        attributes = {"edinbox.key": f"{message.source}/{message.message_id}", "edinbox.consumer": self.consumer}
        with _trace.span(_trace.SETTLE, attributes):
            if lease is not None:
                outcome = await self._process_leased(message, handler, lease, at_most_once, on_complete, traced=True)
            else:
                outcome = await self._process(message, handler, traced=True)
            _trace.note(outcome=outcome.value)
            return outcome

    async def _process(self, message: Message, handler: Handler, *, traced: bool) -> Outcome:
        key = key_params(self.consumer, message, trace=_trace.traceparent() if traced else None)
        for _ in range(_RETRIES):
            async with self._store.unit() as unit:
                if await unit.insert("insert_processed", key):
                    if traced:
                        _trace.note(attempt=1)
                    return await self._run(unit, message, handler, traced=traced, attempt=1)
                found = await self._find(unit, key)
                if found is None:
                    await unit.rollback()
                    continue
                action = decide(found[0], key["fingerprint"], now=found[1], max_attempts=self.max_attempts)
                if traced:
                    _trace.note(attempt=found[0].attempts + (action is Action.RETRY))
                    if action is Action.DUPLICATE:
                        _trace.link(found[0].trace)
                if action is Action.WAIT:
                    await unit.rollback()
                    raise wait_error(message, *found)
                if action is not Action.RETRY:
                    return await self._settle(unit, action, message, key, traced=traced, attempts=found[0].attempts)
                await unit.run("retry", key)
                return await self._run(unit, message, handler, traced=traced, attempt=found[0].attempts + 1)
        raise StoreError(f"the journal row of {message.key} kept disappearing (concurrent forget or purge?)")

    async def _run(self, unit: AsyncUnit, message: Message, handler: Handler, *, traced: bool, attempt: int) -> Outcome:
        tx = self._last_tx  # a frozen value: made again only when the unit changes (the store reuses its own)
        if tx is None or tx.unit is not unit:
            tx = self._last_tx = Tx(unit.connection, self.dialect, unit=unit)
        try:
            if traced:
                with _trace.span(_trace.HANDLER):
                    await handler(tx, message)
            else:
                await handler(tx, message)
        except BaseException as exc:
            await unit.rollback()
            if isinstance(exc, Exception):
                return await self._failed(unit, message, exc, attempt=attempt)
            raise
        if traced:
            with _trace.span(_trace.COMMIT):
                await unit.commit()
        else:
            await unit.commit()
        return Outcome.PROCESSED

    async def _failed(self, unit: AsyncUnit, message: Message, exc: Exception, *, attempt: int) -> Outcome:
        """Charge a handler failure (already rolled back) of the message's `attempt`-th attempt: park the message
        (DEAD), count an attempt with the time it waits for the next (`Retry`), or nothing."""
        error = self._store.map_error(exc)
        failure = judge(error)
        if failure is Failure.UNSETTLED:
            raise error
        # A permanent failure is recorded as the attempt that reaches max_attempts: the row parks at once.
        limit = 1 if failure is Failure.PARK else self.max_attempts
        draw = random.random()  # noqa: S311 - jitter, not a secret
        delay = failure_delay(attempt, max_attempts=limit, retry=self.retry, draw=draw)
        row = failure_rows(self.consumer, [message], error, max_attempts=limit, delay=delay)[0]
        try:
            await unit.begin()
            try:
                if await unit.run("record_failure", row) and attempt >= limit:  # this failure parks the row
                    await self._dead_letter(unit, message, error, attempts=attempt)
            except BaseException:
                await unit.rollback()
                raise
            await unit.commit()
        except StoreError as store_error:
            raise StoreError(
                f"the handler failed ({describe(error)}) and recording that failure failed too: {store_error}"
            ) from store_error
        if failure is Failure.PARK:
            return Outcome.DEAD
        raise exc

    @overload
    async def process_batch(
        self,
        messages: Sequence[Message],
        handler: BatchHandler,
        *,
        isolate: Literal[False] = False,
        before_commit: BatchHook | None = None,
        session: Any = None,
        spans: Sequence[Any] | None = None,
    ) -> list[Outcome]: ...

    @overload
    async def process_batch(
        self,
        messages: Sequence[Message],
        handler: BatchHandler,
        *,
        isolate: bool,
        before_commit: BatchHook | None = None,
        session: Any = None,
        spans: Sequence[Any] | None = None,
    ) -> list[Outcome | Exception]: ...

    async def process_batch(
        self,
        messages: Sequence[Message],
        handler: BatchHandler,
        *,
        isolate: bool = False,
        before_commit: BatchHook | None = None,
        session: Any = None,
        spans: Sequence[Any] | None = None,
    ) -> list[Outcome] | list[Outcome | Exception]:
        """Record the batch in one statement, run `handler(tx, new_messages)` once, return one outcome each.

        The handler gets only the messages to process (new, or failed before), in one transaction with their
        journal rows; it is not called when there are none. Copies of one key in a batch: the first decides,
        the others are duplicates (or conflicts) of it. A live lease on any message raises NotSettledError
        for the whole batch, before the handler runs. A message that waits for its retry time (it failed before)
        raises its RetryLater for the whole batch without `isolate`, nothing run or counted; with `isolate`, the
        batch is settled message by message and that message alone holds its RetryLater.

        A handler failure is charged to no message of the batch: everything rolls back, no attempt is counted.
        Without `isolate`, the exception propagates (a driver error of the handler's SQL as DataError or
        StoreError chained from it; anything else unchanged) and the caller nacks the batch. With `isolate=True`,
        a TransientError still propagates so; any other failure settles each message of the batch alone (as
        `process` does, one transaction each, the handler called with a one-element list), so only the failing
        ones pay. The result holds, in each message's position, either its Outcome (settled: ack it; DEAD when
        a PermanentError parked it) or the exception that left it unsettled (nack exactly those): the handler's
        own exception (one attempt counted; it may be the one that parked the row), NotSettledError (a live
        lease), a TransientError, or a DataError: a value of that message the journal cannot hold (a payload too
        big for the database, to keep as a conflict or a failure), nothing of it recorded; without `isolate` it
        propagates for the batch. A StoreError stops the isolation: that message and every one after it hold
        that same StoreError, untried.

        `before_commit(tx, outcomes)`, when given, runs last in the batch's transaction with every outcome (the
        caller's own bookkeeping, committed with the batch; with no message, in a transaction of its own). If it
        raises, the batch rolls back and nothing is charged. An isolated batch commits message by message and
        does not call it: the caller records those outcomes itself.

        With an SQLAlchemy `session`, as with `process(session=)`: the journal rows are written on the session's
        connection inside its transaction (begun if none), in a savepoint, and the inbox never commits it; the
        handler and `before_commit` get the session as `tx.connection`, inside that savepoint. With `isolate`, each
        message's savepoint is released into the session's transaction, its failure recorded there too.

        Each row settled keeps the traceparent of the span that settled it, and a duplicate's span is linked to
        the trace that made the effect, as with `process`: by default the current span; `spans` (OpenTelemetry
        spans, by position) gives each message its own (a consumer that keeps one span per delivery), and an
        isolated message is settled under its own.
        """
        if session is not None:
            joined = await self._session_inbox(session)
            hook = None if before_commit is None else in_session(session, before_commit)
            return await joined.process_batch(
                messages, in_session(session, handler), isolate=isolate, before_commit=hook, spans=spans
            )
        batch = list(messages)
        if spans is not None and len(spans) != len(batch):
            raise ConfigurationError(f"spans must give one span per message: {len(spans)} for {len(batch)}")
        each = list(spans) if spans is not None else [None] * len(batch)  # None: the current span
        if not batch:
            if before_commit is not None:
                await self.transaction(lambda tx: before_commit(tx, []))
            return []
        for _ in range(_RETRIES):
            async with self._store.unit() as unit:
                result = await self._batch(
                    unit, batch, handler, isolate=isolate, before_commit=before_commit, spans=each
                )
            if result is _Next.ISOLATE or isinstance(result, _Ran):
                return await self._isolate(batch, handler, spans=each, ran=result if isinstance(result, _Ran) else None)
            if result is not _Next.RESTART:
                return result
        raise StoreError("journal rows of the batch kept disappearing (concurrent forget or purge?)")

    async def _batch(
        self,
        unit: AsyncUnit,
        batch: list[Message],
        handler: BatchHandler,
        *,
        isolate: bool,
        before_commit: BatchHook | None,
        spans: list[Any],
    ) -> list[Outcome] | _Next | _Ran:
        """Settle the batch in one transaction, or say why not: a vanished row, or a failure to isolate (the
        handler's, or a value of one message the journal cannot hold: a conflicting copy too big to keep); a handler
        that failed having run for one message only is that message's failure (`_Ran`)."""
        try:
            claimed = await self._claim_batch(unit, batch, spans)
        except (DataError, RetryLater):  # isolated, a message that waits holds its RetryLater alone
            if not isolate:
                raise
            return _Next.ISOLATE
        if claimed is None:
            await unit.rollback()
            return _Next.RESTART
        outcomes, tries = claimed
        new = [m for m, outcome in zip(batch, outcomes, strict=True) if outcome is Outcome.PROCESSED]
        tx = Tx(unit.connection, self.dialect, unit=unit)
        if new:
            try:
                await handler(tx, new)
                if self.keep_payloads:
                    await self._keep(unit, new)
            except BaseException as exc:
                await unit.rollback()
                if not isinstance(exc, Exception):
                    raise
                error = self._store.map_error(exc)
                if isolate and judge(error) is not Failure.UNSETTLED:
                    runs = [index for index, attempt in enumerate(tries) if attempt]
                    return _Ran(runs[0], exc, tries[runs[0]]) if len(runs) == 1 else _Next.ISOLATE
                if error is exc:
                    raise
                raise error from exc
        if before_commit is not None:
            try:
                await before_commit(tx, outcomes)
            except BaseException:
                await unit.rollback()
                raise
        await unit.commit()
        return outcomes

    async def _isolate(
        self, batch: list[Message], handler: BatchHandler, *, spans: list[Any], ran: _Ran | None
    ) -> list[Outcome | Exception]:
        """Settle each message of a failed batch alone, under its span; an unsettled one holds its exception.

        When the handler ran for one message only (`ran`), that failure is charged to it as it stands: its handler
        is not run a second time to find out whose it was."""

        async def single(tx: Tx, message: Message) -> object:
            return await handler(tx, [message])

        charged: dict[int, Outcome | Exception] = {}
        if ran is not None:
            async with self._store.unit() as unit:
                try:
                    charged[ran.index] = await self._failed(unit, batch[ran.index], ran.error, attempt=ran.attempt)
                except StoreError as exc:  # the database failed: nothing of the batch is tried
                    return [exc] * len(batch)
                except Exception as exc:
                    charged[ran.index] = exc
        results: list[Outcome | Exception] = []
        first: dict[Key, Outcome | Exception] = {}
        for index, message in enumerate(batch):
            earlier = first.get(message.key)
            if isinstance(earlier, Exception):  # a later copy of a key whose first copy did not settle
                results.append(earlier)
                continue
            try:
                with _trace.attached(spans[index]):
                    result: Outcome | Exception = (
                        charged[index] if index in charged else await self.process(message, single)
                    )
            except StoreError as exc:  # the database failed: the rest of the batch is not tried
                results.extend([exc] * (len(batch) - index))
                break
            except Exception as exc:
                result = exc
            results.append(result)
            first.setdefault(message.key, result)
        return results

    async def _claim_batch(
        self, unit: AsyncUnit, batch: list[Message], spans: list[Any]
    ) -> tuple[list[Outcome], list[int]] | None:
        """Insert the batch's keys, read back the others, and settle each message; None when a row vanished.

        Returns each message's outcome if the handler succeeds, and the attempt its run would be (1: new, 0: no run).
        A row it settles keeps the traceparent of its message's span (`spans`, by position; None: the current one),
        and a duplicate's span is linked to the trace that made the effect."""
        traces = [_trace.traceparent(span) for span in spans] if _trace.tracing() else [None] * len(spans)
        try:
            params = {"consumer": self.consumer, **self._store.batch_params(batch, traces)}
            inserted = {(row[0], row[1]) for row in await unit.begin_fetch("insert_batch", params)}
            if len(inserted) == len(batch):  # every key new, none twice: nothing to read back or decide
                return [Outcome.PROCESSED] * len(batch), [1] * len(batch)
            found: dict[Key, tuple[Found, datetime]] = {}
            if known := [m for m in batch if m.key not in inserted]:
                params = {"consumer": self.consumer, **self._store.batch_params(known)}
                for row in await unit.fetch("find_batch_for_update", params):
                    found[(row[0], row[1])] = found_row(row[2:], self._store.timestamp)
            plan = plan_batch(batch, inserted, found, max_attempts=self.max_attempts)
            if plan is None:
                return None
            outcomes, tries = [], []
            for message, action, trace, span in zip(batch, plan, traces, spans, strict=True):
                if action is Action.WAIT:
                    raise wait_error(message, *found[message.key])
                tries.append(found[message.key][0].attempts + 1 if action is Action.RETRY else int(action is None))
                if action is Action.RETRY:
                    await unit.run("retry", key_params(self.consumer, message, trace=trace))
                elif action is Action.DUPLICATE and message.key in found:
                    _trace.link(found[message.key][0].trace, on=span)
                if action is None or action is Action.RETRY:
                    outcomes.append(Outcome.PROCESSED)
                else:
                    params = key_params(self.consumer, message)
                    attempts = found[message.key][0].attempts if message.key in found else 0  # a copy: no row read
                    outcomes.append(await self._apply(unit, action, message, params, attempts=attempts))
        except BaseException:
            await unit.rollback()
            raise
        return outcomes, tries


async def _keep(inbox: AsyncInbox, message: Message, tx: Tx) -> None:
    """Keep `message`'s payload in the transaction of `tx`."""
    await inbox._keep(tx.unit, [message])
