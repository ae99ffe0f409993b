"""AsyncInbox: exactly-once effects on an at-least-once broker (the sync `Inbox` is generated from this module).

How a delivery is settled (every decision comes from `edinbox._core`):

- new key: one round trip begins the transaction and inserts the journal row (INSERT ... ON CONFLICT DO NOTHING);
  the handler runs on the same connection; the commit settles both: PROCESSED.
- known key: the row is locked and `_core.decide` says DUPLICATE, CONFLICT (recorded on the row for operators),
  DEAD, or retry. A concurrent duplicate waits on the unique index for the first transaction, then sees its row.
- handler exception: rollback, then the attempt and error are recorded in a separate transaction and the
  exception propagates unchanged. The failure that reaches `max_attempts` parks the row as dead at once (the
  exception still propagates, so the caller does not ack); the next delivery returns DEAD.
- caller's connection: the inbox works in a savepoint and never commits the caller's transaction (on a
  connection that is not autocommit and has none open yet, it opens the transaction and leaves it to the caller);
  a handler failure rolls back to the savepoint, re-raises, and records the attempt inside the caller's
  transaction, so it is kept only if the caller commits (and max_attempts only counts what was committed). On an
  autocommit connection with no transaction open there is nothing of the caller's to join: the inbox commits its
  own, as with a URL or a pool.
- batches and lease mode follow the same rules; see `process_batch` and `process(lease=...)`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from edinbox._async_journal import AsyncJournal
from edinbox._core import Action, Found, decide, idempotency_key
from edinbox._errors import NotSettledError, StoreError
from edinbox._message import Message, Outcome
from edinbox._plan import (
    Key,
    describe,
    failure_rows,
    found_row,
    key_params,
    plan_batch,
)
from edinbox._records import Tx
from edinbox.stores._async_base import AsyncUnit

__all__ = ["AsyncInbox"]

Handler = Callable[[Tx, Message], Awaitable[object]]
BatchHandler = Callable[[Tx, list[Message]], Awaitable[object]]
BatchHook = Callable[[Tx, list[Outcome]], Awaitable[object]]

_RETRIES = 3  # a row deleted (forget, purge) between the insert and the lock: start over


class AsyncInbox(AsyncJournal):
    """The journal of consumed messages of one consumer, in PostgreSQL or SQLite.

    `target` is a URL (`postgresql://...`, `sqlite:///relative.db`, `sqlite:////absolute.db`, `sqlite://` in
    memory), a psycopg pool, or the caller's own connection (psycopg or SQLite) so the journal row joins the
    caller's transaction. `horizon` is the longest time after which a message can still come back (broker
    redelivery, retry schedule, operator replay); `purge` refuses to forget anything younger. `pool_size` bounds
    the pool a URL inbox opens when calls overlap (threads, tasks); one at a time, it uses one connection.
    """

    async def process(
        self, message: Message, handler: Handler, *, lease: timedelta | None = None, at_most_once: bool = False
    ) -> Outcome:
        """Run `handler(tx, message)` once per key and return how the message settled; raise if it did not.

        With `lease`, the handler's effect is not transactional: the claim commits first, the handler runs
        outside any transaction with `tx.idempotency_key`, and the completion commits after. A delivery during
        a live lease raises NotSettledError; after an expired lease the handler runs again with the same key,
        or the row is parked (DEAD) when `at_most_once` is set.
        """
        if lease is not None:
            return await self._process_leased(message, handler, lease=lease, at_most_once=at_most_once)
        key = key_params(self.consumer, message)
        for _ in range(_RETRIES):
            async with self._store.unit() as unit:
                if await unit.insert("insert_processed", key):
                    return await self._run(unit, message, handler)
                found = await self._find(unit, key)
                if found is None:
                    await unit.rollback()
                    continue
                action = decide(found[0], key["fingerprint"], now=found[1], max_attempts=self.max_attempts)
                if action is not Action.RETRY:
                    return await self._settle(unit, action, message, key)
                await unit.run("retry", key)
                return await self._run(unit, message, handler)
        raise StoreError(f"the journal row of {message.key} kept disappearing (concurrent forget or purge?)")

    async def _run(self, unit: AsyncUnit, message: Message, handler: Handler) -> Outcome:
        try:
            await handler(Tx(unit.connection, self.dialect, unit=unit), message)
        except BaseException as exc:
            await unit.rollback()
            if isinstance(exc, Exception):
                await self._record_failures(unit, [message], exc)
            raise
        await unit.commit()
        return Outcome.PROCESSED

    async def _find(self, unit: AsyncUnit, key: dict[str, Any]) -> tuple[Found, datetime] | None:
        rows = await unit.fetch("find_for_update", key)
        return found_row(rows[0], self._store.timestamp) if rows else None

    async def _settle(self, unit: AsyncUnit, action: Action, message: Message, key: dict[str, Any]) -> Outcome:
        """Finish a delivery whose key was already journaled and whose handler does not run."""
        try:
            outcome = await self._apply(unit, action, message, key)
        except BaseException:
            await unit.rollback()
            raise
        await unit.commit()
        return outcome

    async def _record_failures(self, unit: AsyncUnit, messages: Sequence[Message], exc: Exception) -> None:
        """Count the failed attempt of each message in a transaction of its own; the handler error wins."""
        rows = failure_rows(self.consumer, messages, exc, max_attempts=self.max_attempts)
        try:
            await unit.begin()
            try:
                if len(rows) == 1:
                    await unit.run("record_failure", rows[0])
                else:
                    await unit.run_many("record_failure", rows)
            except BaseException:
                await unit.rollback()
                raise
            await unit.commit()
        except StoreError as store_error:
            exc.add_note(f"edinbox could not record this failed attempt: {store_error}")

    async def _process_leased(
        self, message: Message, handler: Handler, *, lease: timedelta, at_most_once: bool
    ) -> Outcome:
        key = key_params(self.consumer, message)
        claim = {**key, "lease": lease}
        async with self._store.unit() as unit:
            if await unit.insert("insert_claimed", claim):
                attempts = 1
            else:
                found = await self._find(unit, key)
                if found is None:
                    await unit.rollback()
                    raise NotSettledError(f"the journal row of {message.key} was deleted meanwhile; redeliver it")
                action = decide(
                    found[0],
                    key["fingerprint"],
                    now=found[1],
                    max_attempts=self.max_attempts,
                    at_most_once=at_most_once,
                )
                if action is not Action.RETRY:
                    return await self._settle(unit, action, message, key)
                attempts = (await unit.fetch("reclaim", claim))[0][0]
            await unit.commit()
        tx = Tx(None, self.dialect, idempotency_key(self.consumer, message.source, message.message_id))
        try:
            await handler(tx, message)
        except Exception as exc:
            failure = {**key, "attempts": attempts, "error": describe(exc), "max_attempts": self.max_attempts}
            await self._write("fail_claim", {**failure, "payload": bytes(message.payload)})
            raise
        if not await self._write("complete", {**key, "attempts": attempts}):
            raise NotSettledError(f"the lease on {message.key} expired and another delivery took it over")
        return Outcome.PROCESSED

    async def process_batch(
        self, messages: Sequence[Message], handler: BatchHandler, *, before_commit: BatchHook | None = None
    ) -> list[Outcome]:
        """Record the batch in one statement, run `handler(tx, new_messages)` once, return one outcome each.

        The handler gets only the messages to process (new, or failed before), in one transaction with their
        journal rows; it is not called when there are none. A live lease on any message raises NotSettledError
        for the whole batch, and a handler exception fails the whole batch (each new message counts an attempt).
        `before_commit(tx, outcomes)`, when given, runs last in the same transaction with every outcome (the
        caller's own bookkeeping, committed with the batch); if it raises, the batch rolls back and nothing is
        charged.
        """
        batch = list(messages)
        if not batch:
            if before_commit is not None:
                await self.transaction(lambda tx: before_commit(tx, []))
            return []
        for _ in range(_RETRIES):
            async with self._store.unit() as unit:
                outcomes = await self._claim_batch(unit, batch)
                if outcomes is None:
                    await unit.rollback()
                    continue
                new = [m for m, outcome in zip(batch, outcomes, strict=True) if outcome is Outcome.PROCESSED]
                tx = Tx(unit.connection, self.dialect, unit=unit)
                if new:
                    try:
                        await handler(tx, new)
                    except BaseException as exc:
                        await unit.rollback()
                        if isinstance(exc, Exception):
                            await self._record_failures(unit, new, exc)
                        raise
                if before_commit is not None:
                    try:
                        await before_commit(tx, outcomes)
                    except BaseException:
                        await unit.rollback()
                        raise
                await unit.commit()
                return outcomes
        raise StoreError("journal rows of the batch kept disappearing (concurrent forget or purge?)")

    async def _claim_batch(self, unit: AsyncUnit, batch: list[Message]) -> list[Outcome] | None:
        """Insert the batch's keys, read back the others, and settle each message; None when a row vanished."""
        try:
            params = {"consumer": self.consumer, **self._store.batch_params(batch)}
            inserted = {(row[0], row[1]) for row in await unit.begin_fetch("insert_batch", params)}
            found: dict[Key, tuple[Found, datetime]] = {}
            if known := [m for m in batch if m.key not in inserted]:
                params = {"consumer": self.consumer, **self._store.batch_params(known)}
                for row in await unit.fetch("find_batch_for_update", params):
                    found[(row[0], row[1])] = found_row(row[2:], self._store.timestamp)
            plan = plan_batch(batch, inserted, found, max_attempts=self.max_attempts)
            if plan is None:
                return None
            outcomes = []
            for message, action in zip(batch, plan, strict=True):
                if action is Action.RETRY:
                    await unit.run("retry", key_params(self.consumer, message))
                if action is None or action is Action.RETRY:
                    outcomes.append(Outcome.PROCESSED)
                else:
                    outcomes.append(await self._apply(unit, action, message, key_params(self.consumer, message)))
        except BaseException:
            await unit.rollback()
            raise
        return outcomes

    async def _apply(self, unit: AsyncUnit, action: Action, message: Message, key: dict[str, Any]) -> Outcome:
        """Write what a decision without a handler run needs, inside the open transaction."""
        if action is Action.BUSY:
            raise NotSettledError(f"message {message.key} is leased by another delivery; do not ack it")
        if action is Action.CONFLICT:
            await unit.run("record_conflict", {**key, "payload": bytes(message.payload)})
            return Outcome.CONFLICT
        if action is Action.PARK:
            error = "lease expired: the effect may or may not have happened; parked for reconciliation"
            await unit.run("park", {**key, "error": error, "payload": bytes(message.payload)})
            return Outcome.DEAD
        return Outcome.DUPLICATE if action is Action.DUPLICATE else Outcome.DEAD
