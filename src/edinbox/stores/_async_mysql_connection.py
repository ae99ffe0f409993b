"""The MariaDB / MySQL store's own connection on asyncmy, and how the driver's errors are mapped (async; the sync
twin on PyMySQL is generated from this module).

The store's own connections run with autocommit off, and each notes when the transaction a unit began ended before
the unit's COMMIT (`_AsyncOwnConnection`): MariaDB rolled it back by itself under a handler that swallowed the error,
or the handler ended it. Then the unit rolls back instead.
"""
# sync-doc: The MariaDB / MySQL store's own connection on PyMySQL, and how the driver's errors are mapped.
# sync-doc:
# sync-doc: Each of the store's own connections notes when the transaction a unit began ended before the unit's
# sync-doc: COMMIT (`_OwnConnection`): then the unit rolls back instead.

from __future__ import annotations

from typing import Any

import asyncmy

# sync: from edinbox.stores._pymysql_replies import QuickReplies as _Driver
from asyncmy import Connection as _Driver  # async-only
from asyncmy.constants.COMMAND import COM_QUERY
from asyncmy.constants.SERVER_STATUS import SERVER_STATUS_IN_TRANS

from edinbox._errors import TransientError
from edinbox.stores._mysql_sql import MySQLErrors

__all__ = ["BREAKING", "close_quietly", "in_transaction", "mapped_errors"]


class mapped_errors(MySQLErrors):
    """Turn the driver's errors raised while doing `action` into DataError, StoreError or ConfigurationError."""

    __slots__ = ()
    driver_error = asyncmy.MySQLError
    data_error = asyncmy.DataError


BREAKING = (TransientError, asyncmy.MySQLError, OSError)  # failures after which a connection may be broken


def in_transaction(connection: Any) -> bool:
    """Whether the server said, in its last reply, that a transaction is open on `connection`."""
    return bool(connection.server_status & SERVER_STATUS_IN_TRANS)


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


def close_quietly(connection: asyncmy.Connection) -> None:
    """Close `connection`; a broken one is dropped without an error."""
    try:
        connection.close()
    except (asyncmy.MySQLError, OSError):
        return
