"""MariaDB / MySQL pieces shared by the async store (asyncmy) and its generated sync twin (PyMySQL)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

from edinbox._application import Application
from edinbox._core import TableName
from edinbox._errors import ConfigurationError, DataError
from edinbox._urls import mask
from edinbox.stores._mapping import MappedErrors, mysql_kind
from edinbox.stores._queries import placeholders, statements

__all__ = [
    "DIALECT",
    "DUPLICATE_KEY_NAME",
    "MULTI_STATEMENTS",
    "MySQLErrors",
    "Statements",
    "bulky",
    "connect_options",
    "connection_lost",
    "fitting",
    "has_returning",
    "literals",
    "lock_name",
    "packet_refused",
    "params",
    "timestamp",
]

DIALECT = "mysql"

MULTI_STATEMENTS = 1 << 16
"""The protocol's CLIENT_MULTI_STATEMENTS capability (the same bit in PyMySQL's and asyncmy's constants)."""

_STATEMENT_END = re.compile(r";\s*\n")
_COMMENT = re.compile(r"^\s*--[^\n]*\n", re.MULTILINE)
_DDL = re.compile(r"\s*(?:--[^\n]*\n\s*)*(?:CREATE|ALTER|DROP)\b", re.IGNORECASE)
_CREATE_INDEX = re.compile(r"\s*CREATE\s+(?:UNIQUE\s+)?INDEX\b", re.IGNORECASE)
_LIST = re.compile(r"\bIN \(%\((\w+)\)s\)", re.IGNORECASE)
"""`IN (%(name)s)`: parameter `name` is a list of values, each bound as a parameter of its own."""

_LOST = ((2006,), (2013,))  # CR_SERVER_GONE_ERROR, CR_SERVER_LOST
_TOO_BIG = (1153,)  # ER_NET_PACKET_TOO_LARGE: the server closes the connection after it

BULKY = 1 << 20
"""Characters and bytes of values a statement may bind unchecked: escaped (each byte at most doubled) and encoded
(at most 4 bytes a character), 1 MiB stays under 8 MiB, below the servers' max_allowed_packet (16 MiB by default on
MariaDB, 64 MiB on MySQL). A statement binding more is measured before it is sent (`bulky`)."""

_MICROSECOND = timedelta(microseconds=1)

DUPLICATE_KEY_NAME = 1061
"""ER_DUP_KEYNAME: CREATE INDEX found an index of that name (what IF NOT EXISTS, which MySQL 8 lacks, would skip)."""


def _quote(identifier: str) -> str:
    # Only ever called on names that passed _core.parse_table's strict pattern (letters, digits, "_").
    return "`" + identifier.replace("`", "``") + "`"


class Statements:
    """Every statement of the journal, with its (validated) identifiers quoted; a section may be several.

    A qualified table (`edi.inbox`) lives in that database (MariaDB's schemas), with the hub's tables beside it;
    an unqualified one in the URL's database.
    """

    def __init__(self, table: TableName, applications: tuple[Application, ...] = ()) -> None:
        """Compose the statements for `table`, with those of `applications` (`edinbox.Application`)."""
        self.table = table
        self.schema = table.schema
        self.version_name = f"{table.name}_version"
        identifiers = {
            "schema": _quote(table.schema or ""),
            "schema_name": f"'{table.schema}'" if table.schema else "DATABASE()",
            "table": self.beside(table.name),
            "key_index": _quote(f"{table.name}_key"),
            "version_table": self.beside(self.version_name),
            "outbox": self.beside(f"{table.name}_outbox"),
            "payloads": self.beside(f"{table.name}_payloads"),
            "outbox_pending": _quote(f"{table.name}_outbox_pending"),
            "outbox_unsent": _quote(f"{table.name}_outbox_unsent"),
            "table_name": "'" + table.name + "'",
        }
        self._text: dict[str, list[str]] = {}
        self.lists: dict[str, frozenset[str]] = {}
        """The statements with list parameters (`IN (%(ids)s)`): the names of those parameters."""
        for name, text in statements(DIALECT, applications).items():
            # any other `{x}` is table x beside the journal, `{x_name}` its name as a string literal, `{x_index}` an
            # index of this journal's tables
            beside = {p: self._placeholder(p) for p in placeholders(text) - identifiers.keys()}
            body = _COMMENT.sub("", text.format(**identifiers, **beside))  # the comments stay in the file
            self._text[name] = [s for s in _STATEMENT_END.split(body) if s.strip()]
            if listed := frozenset(_LIST.findall(body)):
                self.lists[name] = listed
        self.lock_name = lock_name(str(table))
        self.packet: int | None = None
        """The server's max_allowed_packet, read once when a statement first binds `BULKY` values (a global the
        server's connections take when they open: a change takes effect for new connections)."""
        self.returning: bool | None = None
        """Whether a batch is inserted with `INSERT ... RETURNING`: None decides by the server (`has_returning`);
        False takes MySQL's path on any server (one INSERT IGNORE per message)."""
        self.ddl = frozenset(n for n, texts in self._text.items() if _DDL.match(texts[0]))
        """The statements MariaDB commits implicitly (CREATE, ALTER, DROP): a transaction ends with them."""
        self.create_index = frozenset(n for n, texts in self._text.items() if _CREATE_INDEX.match(texts[0]))
        """The `CREATE INDEX` statements: done when the index exists (DUPLICATE_KEY_NAME), as IF NOT EXISTS."""

    def _placeholder(self, name: str) -> str:
        """`{x_index}`: `<journal>_x_index` (named after the journal, as on PostgreSQL); `{x_name}`: table x's name
        as a string literal; `{x}`: table x beside the journal."""
        if name.endswith("_index"):
            return _quote(f"{self.table.name}_{name}")
        if name.endswith("_name"):
            return "'" + name.removesuffix("_name") + "'"
        return self.beside(name)

    def beside(self, name: str) -> str:
        """The quoted name of table `name` beside the journal (in its database)."""
        return f"{_quote(self.schema)}.{_quote(name)}" if self.schema else _quote(name)

    def __getitem__(self, name: str) -> list[str]:
        """The statements called `name`, in the order they run."""
        return self._text[name]

    def bind(self, name: str, values: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
        """The statements called `name` with each list parameter spelled as one placeholder per item
        (`IN (%(ids)s)` with three ids: `IN (%(ids_0)s, %(ids_1)s, %(ids_2)s)`), and the values that bind them, each
        item escaped by the driver as any other value; an empty list matches nothing (`IN (NULL)`)."""
        texts = self._text[name]
        bound = dict(values)
        for key in self.lists[name]:
            items = list(bound.pop(key))
            spelled = ", ".join(f"%({key}_{n})s" for n in range(len(items))) or "NULL"
            bound.update((f"{key}_{n}", item) for n, item in enumerate(items))
            texts = [text.replace(f"%({key})s", spelled) for text in texts]
        return texts, bound


def has_returning(server_version: str) -> bool:
    """True for MariaDB (`INSERT ... RETURNING` since 10.5), false for MySQL, which has none; from the version
    string of the connection's handshake (MariaDB's reads like "5.5.5-10.11.6-MariaDB", MySQL's like "8.0.36")."""
    return "mariadb" in server_version.lower()


def connection_lost(exc: BaseException | None) -> bool:
    """True when `exc`, or the driver error it was mapped from, says the server went away (2006, 2013, a socket
    error): every other connection to it is broken too."""
    for error in (exc, exc.__cause__ if exc is not None else None):
        if isinstance(error, OSError) or (error is not None and error.args[:1] in _LOST):
            return True
    return False


def packet_refused(exc: BaseException | None) -> bool:
    """True when the driver error `exc` was mapped from says the server refused a packet over its
    max_allowed_packet (1153): the server closed that connection."""
    cause = exc.__cause__ if exc is not None else None
    return cause is not None and cause.args[:1] == _TOO_BIG


def bulky(values: Mapping[str, Any]) -> bool:
    """Whether the text and bytes among `values` hold more than `BULKY` characters and bytes in all (a statement
    binding them may exceed the server's max_allowed_packet: it is measured before it is sent)."""
    size = 0
    for value in values.values():
        if isinstance(value, str | bytes | bytearray):
            size += len(value)
    return size > BULKY


def fitting(name: str, statement: str, *, limit: int) -> str:
    """`statement` (its values bound) when a server reading at most `limit` bytes a packet reads it whole; else
    DataError, and nothing is sent.

    MariaDB refuses a packet (the command's byte and the statement) of max_allowed_packet bytes or more with error
    1153 and closes the connection, which a client still sending sees as a lost connection (2006, 2013, a broken
    pipe): a StoreError, retried for ever. Measured before it is sent, the value too big is the message's fault.
    """
    size = len(statement.encode("utf-8", "surrogateescape"))
    if size + 1 >= limit:
        raise DataError(
            f"MariaDB cannot run {name}: the statement and its values take {size} bytes, too many for the server's "
            f"max_allowed_packet ({limit} bytes)"
        )
    return statement


def lock_name(text: str) -> str:
    """A GET_LOCK name for `text` (MySQL refuses names over 64 characters)."""
    return "edinbox:" + hashlib.sha256(text.encode()).hexdigest()[:40]


def connect_options(url: str) -> dict[str, Any]:
    """The driver's keyword arguments for `mysql://user:password@host:port/database` (or `mariadb://`)."""
    parts = urlsplit(url)
    database = unquote(parts.path.lstrip("/"))
    try:
        port = parts.port or 3306
    except ValueError as exc:
        raise ConfigurationError(f"invalid port in {mask(url)!r}") from exc
    if not database or "/" in database or parts.query:
        raise ConfigurationError(f"invalid MariaDB URL {mask(url)!r}: use mysql://user:password@host:port/database")
    return {
        "host": unquote(parts.hostname or "localhost"),
        "port": port,
        "user": unquote(parts.username or "root"),
        # bytes: given a text, both drivers encode it as Latin-1 and raise UnicodeEncodeError for any other character
        "password": unquote(parts.password or "").encode(),
        "database": database,
        "charset": "utf8mb4",
        # a transaction's first statement opens it (no BEGIN round trip); the units commit or roll back each one
        "autocommit": False,
        # MySQL's batch (no RETURNING): one INSERT IGNORE per message, all in one query (one round trip); every value
        # in it is escaped by the driver
        "client_flag": MULTI_STATEMENTS,
    }


def params(values: Mapping[str, Any]) -> dict[str, Any]:
    """Bindable parameters: durations (timedelta) as whole microseconds, for `INTERVAL ... MICROSECOND`.

    A dict with no duration is passed as it is (the driver only reads it): no copy on the hot path.
    """
    if isinstance(values, dict):
        for value in values.values():
            if isinstance(value, timedelta):
                break
        else:
            return values
    bound = dict(values)
    for key, value in bound.items():
        if isinstance(value, timedelta):
            bound[key] = value // _MICROSECOND
    return bound


def literals(values: Mapping[str, Any], escape: Callable[[Any], str]) -> dict[str, str]:
    """Each value as the SQL literal the driver's `escape` makes of it (what its cursor binds a dict with), durations
    as `params` binds them: for a statement the store sends without a cursor (`statement % literals(...)`)."""
    bound = {}  # a loop, not a comprehension: one call less on every delivery
    for key, value in values.items():
        bound[key] = escape(value // _MICROSECOND if isinstance(value, timedelta) else value)
    return bound


def timestamp(value: Any) -> datetime | None:
    """A DATETIME(6) column (UTC, naive) as an aware UTC datetime."""
    return value.replace(tzinfo=UTC) if isinstance(value, datetime) else None


class MySQLErrors(MappedErrors):
    """The mapping of both drivers' errors: by MariaDB's error number (each store names its driver's classes)."""

    __slots__ = ()
    database = "MariaDB"
    kind = staticmethod(mysql_kind)
