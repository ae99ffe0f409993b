"""The one place a driver's exceptions become edinbox's: DataError (permanent) or StoreError (transient), and
the operator's errors (a missing grant, a missing table) that no wait will fix.

Every driver error raised by the inbox's statements or by a handler's own SQL goes through `MappedErrors`.
The tables below decide by the error's code (PostgreSQL's SQLSTATE, SQLite's result code, MariaDB's error number),
first match wins;
an error no row names is a StoreError: the database refused or failed, nothing is charged to the message.
"""

from __future__ import annotations

from types import TracebackType
from typing import ClassVar

from edinbox._errors import ConfigurationError, DataError, InboxError, SchemaError, StoreError
from edinbox._urls import mask

__all__ = [
    "MYSQL_CODES",
    "POSTGRESQL_CODES",
    "READ_ONLY",
    "SQLITE_CODES",
    "MappedErrors",
    "lock_conflict",
    "mysql_kind",
    "read_only",
]

POSTGRESQL_CODES: tuple[tuple[str, type[InboxError]], ...] = (
    ("22", DataError),  # data exception: numeric value out of range, string too long, invalid byte sequence, ...
    ("54", DataError),  # program limit exceeded: index row too large, too many columns or arguments
    ("08", StoreError),  # connection exception
    ("25006", StoreError),  # read-only SQL transaction: a standby, or a primary fenced read-only in a failover
    ("40", StoreError),  # transaction rollback: serialization failure, deadlock detected
    ("53", StoreError),  # insufficient resources: disk full, out of memory, too many connections
    ("55P03", StoreError),  # lock not available (lock_timeout)
    ("57", StoreError),  # operator intervention: admin or crash shutdown, query canceled (statement_timeout)
    ("42501", ConfigurationError),  # insufficient privilege: a grant is missing, no wait will bring it
    ("42P01", SchemaError),  # undefined table: the schema was never created (or dropped), no wait will bring it
    ("3F000", SchemaError),  # invalid schema name: the same, one level up
)
"""SQLSTATE prefixes of PostgreSQL errors and what they mean for the message."""

SQLITE_ERROR = 1
SQLITE_TOOBIG = 18
SQLITE_MISMATCH = 20
SQLITE_CONSTRAINT_DATATYPE = 3091

SQLITE_CODES: tuple[tuple[int, type[InboxError]], ...] = (
    (SQLITE_TOOBIG, DataError),  # string or blob too big
    (SQLITE_MISMATCH, DataError),  # datatype mismatch
    (SQLITE_CONSTRAINT_DATATYPE, DataError),  # a STRICT table cannot store this value in the column
)
"""SQLite result codes (extended first, then primary) and what they mean; busy, locked, I/O: StoreError."""

SQLITE_MISSING = ("no such table:",)
"""The start of SQLite's message for a missing table: its generic SQLITE_ERROR code tells nothing more, and this
text has been stable across SQLite releases. A SchemaError, as PostgreSQL's 42P01: no wait brings a table back."""


MYSQL_CODES: dict[int, type[InboxError]] = {
    1406: DataError,  # data too long for column
    1264: DataError,  # out of range value for column
    1690: DataError,  # BIGINT (or DOUBLE, DECIMAL) value is out of range in an expression
    1366: DataError,  # incorrect string value (an invalid or unstorable character)
    1265: DataError,  # data truncated for column
    1292: DataError,  # truncated incorrect value (a bad date, number or time)
    1365: DataError,  # division by 0 (strict mode)
    1071: DataError,  # specified key was too long (max key length is 3072 bytes)
    1118: DataError,  # row size too large
    1153: DataError,  # a packet bigger than max_allowed_packet (a value too big to send)
    1213: StoreError,  # deadlock found when trying to get lock: the transaction was rolled back, try again
    1205: StoreError,  # lock wait timeout exceeded
    2006: StoreError,  # server has gone away
    2013: StoreError,  # lost connection to server during query
    1044: ConfigurationError,  # access denied for user to database
    1045: ConfigurationError,  # access denied for user (using password)
    1142: ConfigurationError,  # command denied to user for table
    1143: ConfigurationError,  # command denied to user for column
    1227: ConfigurationError,  # access denied: you need (at least one of) the privilege(s)
    1698: ConfigurationError,  # access denied for user (no password given, unix_socket)
    1146: SchemaError,  # table doesn't exist: the schema was never created (or dropped), no wait will bring it
    1049: SchemaError,  # unknown database: the same, one level up
}
"""MariaDB / MySQL error numbers and what they mean; connection failures, server shutdown: StoreError."""


def mysql_kind(exc: BaseException) -> type[InboxError]:
    """What a PyMySQL or asyncmy error means, by its MariaDB error number (its first argument)."""
    code = exc.args[0] if exc.args else None
    return MYSQL_CODES.get(code, StoreError) if isinstance(code, int) else StoreError


POSTGRESQL_CONFLICTS = frozenset({"40001", "40P01", "55P03"})
"""SQLSTATEs of a lock conflict the server ended: serialization failure, deadlock detected, lock not available."""
MYSQL_CONFLICTS = frozenset({1205, 1213})
"""MariaDB / MySQL error numbers of a lock conflict the server ended: lock wait timeout, deadlock."""


READ_ONLY = "25006"
"""PostgreSQL's SQLSTATE for a write on a server that takes none: a standby (a URL without
`target_session_attrs=read-write`), or the old primary fenced read-only while a standby is promoted."""


def read_only(error: BaseException) -> bool:
    """Whether `error` (an edinbox error or the driver's) says the server took no write because it is read-only:
    its connection is then dropped, so the next one finds the primary again (libpq's `target_session_attrs`)."""
    cause = error.__cause__ if isinstance(error, InboxError) else error
    return getattr(cause, "sqlstate", None) == READ_ONLY


def lock_conflict(error: BaseException) -> bool:
    """Whether `error` is a StoreError the server raised in a lock conflict (a deadlock, a serialization failure, a
    lock wait timeout; the driver's error is its cause): the transaction was rolled back, or (a lock wait timeout on
    MariaDB) its statement, and may succeed when run again once the other transaction is done."""
    cause = error.__cause__
    if not isinstance(error, StoreError) or cause is None:
        return False
    sqlstate = getattr(cause, "sqlstate", None)
    if isinstance(sqlstate, str):
        return sqlstate in POSTGRESQL_CONFLICTS
    code = cause.args[0] if cause.args else None
    return isinstance(code, int) and code in MYSQL_CONFLICTS  # SQLite's first argument is its message


_SCHEMA_HINT = "create the schema first: `create_schema()`, or `edinbox init` for the hub"


def _classify(exc: BaseException) -> type[InboxError]:
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str):
        for prefix, error in POSTGRESQL_CODES:
            if sqlstate.startswith(prefix):
                return error
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        if code == SQLITE_ERROR and str(exc).startswith(SQLITE_MISSING):
            return SchemaError
        codes = dict(SQLITE_CODES)
        return codes.get(code) or codes.get(code & 0xFF) or StoreError
    return StoreError


class MappedErrors:
    """Turn the driver's errors raised while doing `action` into DataError or StoreError (credentials masked).

    A class rather than a generator-based context manager: it wraps every statement on the hot path.
    """

    __slots__ = ("action",)

    database: ClassVar[str]
    """How messages name the database."""
    driver_error: ClassVar[type[Exception]]
    """The driver's base exception class."""
    data_error: ClassVar[type[Exception]]
    """The driver's class for values the store cannot hold (psycopg also raises it for a NUL in text)."""

    @staticmethod
    def kind(exc: BaseException) -> type[InboxError]:
        """What a driver error that is not a `data_error` means for the message (by its code)."""
        return _classify(exc)

    def __init__(self, action: str) -> None:
        self.action = action

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if isinstance(exc, self.driver_error):
            raise self.convert(exc, self.action) from exc

    @classmethod
    def convert(cls, exc: Exception, action: str) -> InboxError:
        """The edinbox error for the driver error `exc` raised while doing `action` (not chained yet)."""
        error = DataError if isinstance(exc, cls.data_error) else cls.kind(exc)
        hint = f" ({_SCHEMA_HINT})" if error is SchemaError else ""
        return error(f"{cls.database} failed to {action}: {mask(str(exc)).strip()}{hint}")

    @classmethod
    def map(cls, exc: Exception, action: str) -> Exception:
        """`exc` as edinbox sees it: a driver error converted and chained from it, anything else unchanged."""
        if not isinstance(exc, cls.driver_error):
            return exc
        error = cls.convert(exc, action)
        error.__cause__ = exc
        return error
