"""Joining an SQLAlchemy session's transaction (async; the sync twin is generated from this module).

`AsyncInbox.process(message, handler, session=session)` runs the journal's statements on the driver's connection
under the session's current transaction, and never commits that transaction. One savepoint per delivery holds the
journal row and the handler's work together: the store's own (`SAVEPOINT edinbox`, sent with the journal's INSERT,
as on a caller's driver connection) while the session has no ORM state to flush, with the session's own nested
transaction opened inside it when the session flushes (`edinbox._session_orm`), or the session's nested transaction
(`session.begin_nested()`) from the start when the session held pending state already. Either way a handler failure
rolls both back and discards the ORM objects the handler added, and a failed flush rolls back to a savepoint inside
the delivery's, not the caller's transaction. The handler gets the session as `tx.connection`; its pending objects
are flushed when it returns (a database error raised then is the handler's), before the savepoint is released.
"""
# sync-doc: Joining an SQLAlchemy session's transaction, on a blocking session.
# sync-doc:
# sync-doc: `Inbox.process(message, handler, session=session)` runs the journal's statements under the session's current
# sync-doc: transaction, in a savepoint of its own per delivery, and never commits that transaction.

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import replace
from typing import Any, TypeVar

from edinbox._errors import StoreError
from edinbox._records import Tx
from edinbox._session_orm import Delivery, pending, watch

__all__ = ["JoinedInboxes", "SessionStore", "driver_connection", "in_session"]

T = TypeVar("T")

_KEPT = 32
"""How many driver connections' joined inboxes to keep (a pool's connections come back; each keeps its
prepared statements)."""


async def driver_connection(session: Any) -> Any:
    """The driver's connection under the session's transaction (begun now if it has none)."""
    connection = await session.connection()
    # sync: return connection.connection.driver_connection
    return connection.sync_connection.connection.driver_connection  # async-only


def in_session(session: Any, handler: Callable[[Tx, T], Awaitable[object]]) -> Callable[[Tx, T], Awaitable[object]]:
    """`handler` (of a message, a batch, or a batch's outcomes) run with the session as `tx.connection`, then the
    session flushed (it runs inside the unit's savepoint)."""
    from sqlalchemy.exc import DBAPIError

    async def run(tx: Tx, argument: T) -> None:
        try:
            await handler(replace(tx, connection=session), argument)
            await session.flush()
        except DBAPIError as exc:
            # the driver's own error, so the store maps it (DataError parks the message, StoreError does not)
            raise (exc.orig if isinstance(exc.orig, Exception) else exc) from exc

    return run


class JoinedInboxes:
    """The inboxes on the driver's connections of sessions, one per connection, the most recent kept."""

    def __init__(self, make: Callable[[Any], Any]) -> None:
        """`make(driver_connection)` builds an inbox with the same settings on that connection."""
        self._make = make
        self._inboxes: OrderedDict[int, tuple[Any, Any]] = OrderedDict()

    def get(self, connection: Any) -> Any:
        """The inbox on `connection` (made on first use)."""
        found = self._inboxes.get(id(connection))
        if found is not None and found[0] is connection:
            self._inboxes.move_to_end(id(connection))
            return found[1]
        inbox = self._make(connection)
        self._inboxes[id(connection)] = (connection, inbox)
        while len(self._inboxes) > _KEPT:
            self._inboxes.popitem(last=False)
        return inbox


def _orm(session: Any) -> Any:
    """The ORM session whose events are listened for: `session`, or the blocking one under it."""
    # sync: return session
    return session.sync_session  # async-only


class _SessionUnit:
    """A store's unit on the session's driver connection, in a savepoint under the session's transaction.

    When the session holds no pending ORM state as a unit begins (the usual case), the savepoint is the store's own,
    as on a caller's driver connection: `SAVEPOINT edinbox`, sent with the journal's first statement; the session's
    nested transaction is opened inside it only if the session flushes (`edinbox._session_orm`). With pending ORM
    state at the start, the savepoint is the session's nested transaction from the start (it flushes that state
    first).
    """

    nested = True
    """Always in the session's transaction."""

    def __init__(self, unit: Any, session: Any) -> None:
        self.connection = unit.connection
        self._unit = unit
        self._session = session
        self._nested: Any = None  # the session's nested transaction, opened at the start
        self._delivery: Delivery | None = None  # the ORM bookkeeping in the store's own savepoint

    def _start(self) -> bool:
        """Choose the savepoint of the unit beginning now: true for the store's own (the session holds no pending ORM
        state), false for the session's nested transaction."""
        orm = _orm(self._session)
        if pending(orm):
            self._unit.managed = True
            return False
        self._unit.managed = False
        watch(orm)
        self._delivery = Delivery(orm)
        return True

    def stop(self) -> None:
        """The unit's savepoint ended: the session's flushes are its own again."""
        delivery, self._delivery = self._delivery, None
        if delivery is not None:
            delivery.stop()

    async def _begin_nested(self) -> None:
        """Open the session's nested transaction (its SAVEPOINT is sent when the session takes its connection)."""
        await self._unit.begin()
        self._nested = await self._session.begin_nested()
        await self._session.connection()

    async def begin(self) -> None:
        """Open the unit's savepoint, inside a transaction the store made sure is open."""
        if self._start():
            await self._unit.begin()
        else:
            await self._begin_nested()

    async def insert(self, name: str, params: Any) -> bool:
        """Begin, then run the named INSERT ... ON CONFLICT DO NOTHING (or INSERT IGNORE); true when it inserted."""
        if not self._start():
            await self._begin_nested()
        return bool(await self._unit.insert(name, params))  # the store's own savepoint: sent with the INSERT

    async def begin_fetch(self, name: str, params: Any) -> list[tuple[Any, ...]]:
        """Begin, then run the named statement; return its rows."""
        if not self._start():
            await self._begin_nested()
        return list(await self._unit.begin_fetch(name, params))

    async def fetch(self, name: str, params: Any) -> list[tuple[Any, ...]]:
        """Run the named statement and return its rows."""
        return list(await self._unit.fetch(name, params))

    async def run(self, name: str, params: Any) -> int:
        """Run the named statement and return the number of rows it changed."""
        return int(await self._unit.run(name, params))

    async def run_many(self, name: str, params: Sequence[Any]) -> int:
        """Run the named statement once per parameter set; return the rows changed in all."""
        return int(await self._unit.run_many(name, params))

    async def commit(self) -> None:
        """Release the savepoint (and the session's nested transaction in it); StoreError when it cannot be (the
        database rolled the transaction back)."""
        from sqlalchemy.exc import DBAPIError

        delivery = self._delivery
        nested, self._nested = self._nested, None
        self.stop()
        try:
            if delivery is None:
                if nested is not None:
                    await nested.commit()
            elif delivery.nested is not None:
                inner = delivery.nested
                # sync: inner.commit()
                await self._session.run_sync(lambda _: inner.commit())  # async-only
        except DBAPIError as exc:
            if delivery is not None:
                await self._unit.rollback()
            raise StoreError(
                f"the session's savepoint could not be released (was its transaction rolled back?): {exc.orig}"
            ) from exc
        if delivery is not None:
            await self._unit.commit()

    async def rollback(self) -> None:
        """Roll back to the savepoint, discarding the ORM objects added since; never raises."""
        delivery = self._delivery
        nested, self._nested = self._nested, None
        self.stop()
        # a broken connection surfaces on the caller's next use of the session
        with suppress(Exception):
            if delivery is None:
                if nested is not None:
                    await nested.rollback()
                return
            inner = delivery.nested
            if inner is not None:
                # sync: inner.rollback()
                await self._session.run_sync(lambda _: inner.rollback())  # async-only
        if delivery is not None:
            await self._unit.rollback()
            with suppress(Exception):  # the session's objects, as good as SQLAlchemy leaves them after its own errors
                delivery.discard()


class SessionStore:
    """A store whose units run in `session`'s transaction, each in a savepoint of its own (`_SessionUnit`)."""

    def __init__(self, store: Any, session: Any) -> None:
        """Wrap `store` (a store on the session's driver connection) for `session`."""
        self._store = store
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @asynccontextmanager
    async def unit(self) -> AsyncIterator[_SessionUnit]:
        """Hold the driver's connection for one operation; its transactions are savepoints in the session's."""
        async with self._store.unit() as unit:
            joined = _SessionUnit(unit, self._session)
            try:
                yield joined
            finally:
                joined.stop()
                unit.managed = False
