"""Joining an SQLAlchemy session's transaction (async; the sync twin is generated from this module).

`AsyncInbox.process(message, handler, session=session)` runs the journal's statements on the driver's connection
under the session's current transaction, in a savepoint, as with a caller's own connection: the inbox never
commits the session's transaction. The handler gets the session as `tx.connection` and runs inside a nested
transaction of the session (`begin_nested()`), so a handler failure also discards the ORM objects it added, and
its pending objects are flushed (any database error raised then is the handler's) before the journal's savepoint
is released.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from edinbox._records import Tx

__all__ = ["JoinedInboxes", "driver_connection", "in_session"]

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
    """`handler` (of a message, a batch, or a batch's outcomes) run with the session as `tx.connection`, in a
    nested transaction of the session, flushed."""
    from sqlalchemy.exc import DBAPIError

    async def run(tx: Tx, argument: T) -> None:
        try:
            async with session.begin_nested():
                await handler(replace(tx, connection=session), argument)
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
