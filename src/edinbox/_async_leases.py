"""How the inbox settles what `edinbox._core` decided without running a handler, and its lease mode.

A key already journaled is found and locked (`_find`); a decision that runs no handler is applied in the open
transaction (`_apply`: a duplicate, a conflict recorded on the row, a lease expired and parked, with its dead letter)
and committed (`_settle`). Lease mode (`process(lease=...)`) commits the claim first, runs the effect outside the
transaction while the lease is extended, and commits the completion after; a failure of the effect is recorded on
the claim (`_failed_claim`). `AsyncInbox` builds on this class.
"""
# sync-doc: How the inbox settles what `edinbox._core` decided without running a handler, and its lease mode, on
# sync-doc: blocking connections (`Inbox` builds on this class).

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from edinbox import _trace
from edinbox._async_journal import AsyncJournal
from edinbox._core import Action, Failure, Found, decide, idempotency_key, judge
from edinbox._dead import dead_letter
from edinbox._errors import ConfigurationError, NotSettledError
from edinbox._message import Message, Outcome
from edinbox._plan import (
    describe,
    found_row,
    key_params,
    wait_error,
)
from edinbox._records import Tx
from edinbox._retry import failure_delay
from edinbox.stores._async_base import AsyncUnit

__all__ = ["Handler", "then", "then_complete"]

Handler = Callable[[Tx, Message], Awaitable[object]]


class _AsyncLeases(AsyncJournal):
    """The journal's steps that settle a decision without a handler run, and lease mode's claims and completions."""

    async def _find(self, unit: AsyncUnit, key: dict[str, Any]) -> tuple[Found, datetime] | None:
        rows = await unit.fetch("find_for_update", key)
        return found_row(rows[0], self._store.timestamp) if rows else None

    async def _settle(
        self, unit: AsyncUnit, action: Action, message: Message, key: dict[str, Any], *, traced: bool, attempts: int
    ) -> Outcome:
        """Finish a delivery whose key was already journaled and whose handler does not run."""
        try:
            outcome = await self._apply(unit, action, message, key, attempts=attempts)
        except BaseException:
            await unit.rollback()
            raise
        if traced:
            with _trace.span(_trace.COMMIT):
                await unit.commit()
        else:
            await unit.commit()
        return outcome

    async def _process_leased(
        self,
        message: Message,
        handler: Handler,
        lease: timedelta,
        at_most_once: bool,
        on_complete: Callable[[Tx], Awaitable[object]] | None,
        *,
        traced: bool,
    ) -> Outcome:
        key = key_params(self.consumer, message, trace=_trace.traceparent() if traced else None)
        claim = {**key, "lease": lease}
        requeued: str | None = None
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
                if action is Action.WAIT:
                    await unit.rollback()
                    raise wait_error(message, *found)
                if traced and action is Action.DUPLICATE:
                    _trace.link(found[0].trace)
                if action is not Action.RETRY:
                    return await self._settle(unit, action, message, key, traced=traced, attempts=found[0].attempts)
                attempts, requeued = (await unit.fetch("reclaim", claim))[0]
            if traced:
                _trace.note(attempt=attempts)
            await unit.commit()
        held = {**key, "attempts": attempts}
        idempotency = idempotency_key(
            self.consumer, message.source, message.message_id, fingerprint=message.fingerprint, requeued=requeued
        )
        tx = Tx(None, self.dialect, idempotency, partial(self._extend, held, lease))
        try:
            if traced:
                with _trace.span(_trace.HANDLER):
                    await handler(tx, message)
            else:
                await handler(tx, message)
        except Exception as exc:
            return await self._failed_claim(message, held, exc)
        if traced:
            with _trace.span(_trace.COMMIT):
                completed = await self._complete(held, on_complete)
        else:
            completed = await self._complete(held, on_complete)
        if not completed:
            raise NotSettledError(f"the lease on {message.key} expired and another delivery took it over")
        return Outcome.PROCESSED

    async def _complete(self, held: dict[str, Any], on_complete: Callable[[Tx], Awaitable[object]] | None) -> bool:
        """Commit a lease-mode completion and `on_complete(tx)` in one transaction; False (nothing committed) when
        the lease was lost meanwhile."""
        if on_complete is None:
            return bool(await self._write("complete", held))
        async with self._store.unit() as unit:
            await unit.begin()
            try:
                if not await unit.run("complete", held):
                    await unit.rollback()
                    return False
                await on_complete(Tx(unit.connection, self.dialect, unit=unit))
            except BaseException:
                await unit.rollback()
                raise
            await unit.commit()
            return True

    async def _failed_claim(self, message: Message, held: dict[str, Any], exc: Exception) -> Outcome:
        """Charge a lease-mode handler failure: park the claim (DEAD), keep its attempt, or give it back."""
        error = self._store.map_error(exc)
        failure = judge(error)
        if failure is Failure.UNSETTLED:  # the claim's attempt is given back; the next delivery retries at once
            await self._write("release_claim", held)
            raise error
        # fail_claim parks when the claim's attempts reach the limit: 0 parks a permanent failure at once
        limit = 0 if failure is Failure.PARK else self.max_attempts
        delay = None
        if failure is not Failure.PARK:
            draw = random.random()  # noqa: S311 - jitter, not a secret
            delay = failure_delay(held["attempts"], max_attempts=limit, retry=self.retry, draw=draw)
        failure_row = {
            **held,
            "error": describe(error),
            "max_attempts": limit,
            "payload": bytes(message.payload),
            "delay": delay,
        }
        parks = failure is Failure.PARK or held["attempts"] >= limit
        if await self._fail_claim(message, failure_row, error, parks=parks) == 0 and failure is Failure.PARK:
            raise NotSettledError(f"the lease on {message.key} was lost before its failure was recorded") from error
        if failure is Failure.PARK:
            return Outcome.DEAD
        raise exc

    async def _fail_claim(self, message: Message, row: dict[str, Any], error: Exception, *, parks: bool) -> int:
        """Record a lease-mode failure (`fail_claim`), with the message's dead letter when it parks the row; return
        the rows changed (0: the claim was lost meanwhile)."""
        if not parks or self.dead_letters is None:
            return await self._write("fail_claim", row)
        async with self._store.unit() as unit:
            await unit.begin()
            try:
                changed = await unit.run("fail_claim", row)
                if changed:
                    await self._dead_letter(unit, message, error, attempts=row["attempts"])
            except BaseException:
                await unit.rollback()
                raise
            await unit.commit()
            return changed

    async def _dead_letter(
        self, unit: AsyncUnit, message: Message, error: BaseException | str, *, attempts: int
    ) -> None:
        """Store the dead letter of `message`, parked now in `unit`'s transaction, when `dead_letters` is set."""
        if self.dead_letters is not None:
            letter = dead_letter(self.dead_letters, message, error=error, attempts=attempts)
            await unit.run("outbox_insert", letter)

    async def _extend(self, held: dict[str, Any], lease: timedelta, duration: timedelta | None) -> None:
        """Commit a new deadline for a claim still held (`tx.extend_lease`); NotSettledError when it was lost."""
        if duration is None:
            duration = lease
        elif not isinstance(duration, timedelta) or duration <= timedelta(0):
            raise ConfigurationError(f"extend_lease() needs a positive timedelta, got {duration!r}")
        if not await self._write("extend", {**held, "lease": duration}):
            raise NotSettledError(
                f"the lease on {(held['source'], held['message_id'])} was lost: another delivery took it over"
            )

    async def _apply(
        self, unit: AsyncUnit, action: Action, message: Message, key: dict[str, Any], *, attempts: int
    ) -> Outcome:
        """Write what a decision without a handler run needs, inside the open transaction."""
        if action is Action.BUSY:
            raise NotSettledError(f"message {message.key} is leased by another delivery; do not ack it")
        if action is Action.CONFLICT:
            await unit.run("record_conflict", {**key, "payload": bytes(message.payload)})
            return Outcome.CONFLICT
        if action is Action.PARK:
            error = "lease expired: the effect may or may not have happened; parked for reconciliation"
            if await unit.run("park", {**key, "error": error, "payload": bytes(message.payload)}):
                await self._dead_letter(unit, message, error, attempts=attempts)
            return Outcome.DEAD
        return Outcome.DUPLICATE if action is Action.DUPLICATE else Outcome.DEAD


def then_complete(
    first: Callable[[Tx], Awaitable[object]] | None, after: Callable[[Tx], Awaitable[object]]
) -> Callable[[Tx], Awaitable[object]]:
    """`first(tx)` (when given), then `after(tx)`, in the transaction that commits a lease's completion."""

    async def both(tx: Tx) -> None:
        if first is not None:
            await first(tx)
        await after(tx)

    return both


def then(handler: Handler, after: Callable[[Tx], Awaitable[object]]) -> Handler:
    """`handler`, then `after(tx)` in the same transaction."""

    async def both(tx: Tx, message: Message) -> object:
        result = await handler(tx, message)
        await after(tx)
        return result

    return both
