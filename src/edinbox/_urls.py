"""URLs for the whole package: the one database URL parser, and passwords that never leave the process in clear.

A password in a URL may hold any character, raw or percent-encoded (`@`, `/`, `:`, a space, quotes), and the host
after it may be missing (libpq's `postgresql://user:PW@/db?host=/run/postgresql`, `redis://:PW@/0`) or unusual, so
the masked part runs from the `:` after the user name to the LAST `@` on the line that is followed by a host (or by
none), never across another `scheme://`. A query or DSN option whose name says it carries a secret (`password=`,
`sasl.password=`, `ssl.key.password=`, `sasl.oauthbearer.client.secret=`, `*token*`, `*secret*`, ...) is masked up
to the next `&`, `;` or blank (or to its closing quote). When in doubt it masks too much, never too little.
`secrets(urls)` lists the exact passwords of configured URLs in every spelling, for the text that quotes them
outside any URL (a driver's error).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, unquote_plus, urlsplit

from edinbox._errors import ConfigurationError

__all__ = [
    "Address",
    "DatabaseUrl",
    "addresses",
    "database_url",
    "engine_url",
    "mask",
    "secrets",
    "with_password",
]

# After the `@` that ends a password: a host (a bracketed address, or a name of any characters but the URL's
# delimiters: non-ASCII and unusual ones included) and an optional port, then the end of the authority; or no host at
# all (libpq's socket form), then a path, query, fragment, blank or the end (not a quote: MariaDB's "for user
# 'root'@'127.0.0.1'" after a URL is no host).
_HOST_AFTER = (
    r"@(?=(?:\[[^\]\s]*\]|[^\s/?#@\[\]:,;&='\"<>()]+)(?::[0-9]*)?(?:[/?#\s,;:'\")\]>]|$)"
    r"|(?::[0-9]*)?(?:[/?#\s]|$))"
)
_PASSWORD = re.compile(
    r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<password>(?:(?!://)[^\n])*)" + "(?P<tail>" + _HOST_AFTER + ")"
)
# The name of an option that carries a secret: a word of _SECRET_WORDS anywhere in it (`sasl.password`,
# `ssl.key.password`, `sasl.oauthbearer.client.secret`, `access_token`, `api_key`, `ssl.key.pem`).
_SECRET_WORDS = ("pass", "pwd", "secret", "token", "api", "credential", "key.pem", "private", "jaas")
_NAME = r"[\w.-]*?(?:password|passwd|pwd|secret|token|api_key|apikey|credential|key\.pem|private|jaas)[\w.-]*"
_VALUE = r"""(?:'(?:[^'\\]|\\.)*'(?=[&;\s,)]|$)|"(?:[^"\\]|\\.)*"(?=[&;\s,)]|$)|[^&;\s]*)"""
_QUERY_PASSWORD = re.compile(rf"(?P<head>(?:^|[?&;\s,(])(?:{_NAME})\s?=\s?)(?P<password>{_VALUE})", re.IGNORECASE)
# the same option as a mapping's item, as a driver prints its settings: `'sasl.password': 'x'`, `"token": "x"`
_QUOTED_PASSWORD = re.compile(
    rf"""(?P<head>(?P<q>['"])(?:{_NAME})(?P=q)\s*[:=]\s*)(?P<password>'(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?)""",
    re.IGNORECASE,
)

MEMORY = ":memory:"

MAX_HOST = 253
"""The longest host name (RFC 1035), in characters."""
_HOST_NAME = re.compile(r"^[\w%-](?:[\w.%-]{0,251}[\w%-])?\.?$")
_PORT = re.compile(r"^[0-9]{1,5}$")


def mask(text: str) -> str:
    """Return `text` with every password in a URL, and every value of a secret option, replaced by `***`.

    Each pattern runs only when the text holds what it cannot match without (`://`; one of the option words), so an
    ordinary log line costs a few substring searches instead of regex scans.
    """
    if "://" in text:
        text = _PASSWORD.sub(r"\g<head>***\g<tail>", text)
    lower = text.lower()
    if not text.isascii():  # the two letters re.IGNORECASE also takes for "s" and "i": long s, dotless i
        lower = lower.replace("\u017f", "s").replace("\u0131", "i")
    if any(word in lower for word in _SECRET_WORDS):
        text = _QUERY_PASSWORD.sub(r"\g<head>***", text)
        text = _QUOTED_PASSWORD.sub(r"\g<head>***", text)
    return text


@dataclass(frozen=True, slots=True)
class DatabaseUrl:
    """A parsed database URL: its dialect, and what the driver opens (the URL itself, or a SQLite file)."""

    dialect: str
    """"postgresql", "mysql" (MariaDB or MySQL) or "sqlite"."""
    target: str
    """PostgreSQL: the URL, its password percent-encoded where libpq would misread it. MySQL: the URL as given.
    SQLite: the file, percent-escapes decoded, or ":memory:"."""

    @property
    def in_memory(self) -> bool:
        """True for an in-memory SQLite database (`sqlite://`)."""
        return self.dialect == "sqlite" and self.target == MEMORY


def database_url(url: str) -> DatabaseUrl:
    """Parse `postgresql://...`, `mysql://...` or `mariadb://...`, `sqlite:///relative.db`, `sqlite:////absolute.db`
    or `sqlite://` (memory).

    A server's hosts and ports are checked (`addresses`), a PostgreSQL URL as libpq reads it (`_postgres`). A SQLite
    path is percent-decoded once, here, so `sqlite:///my%20db.db` is the file `my db.db` for every part of the
    package. Anything else is a ConfigurationError naming the URL with its password masked (a libpq keyword string,
    `host=a,b port=x,y`, is told how to write it as a URL).
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if sep and scheme in ("postgresql", "postgres"):
        target = _encoded_password(url)
        _postgres(target)  # several hosts for libpq's failover; none: a local socket
        return DatabaseUrl("postgresql", target)
    if sep and scheme in ("mysql", "mariadb"):
        checked = _encoded_password(url)
        addresses(checked, what="database URL")  # the password may hold any character
        try:  # asyncmy and PyMySQL send the password in Latin-1
            unquote(urlsplit(checked).password or "", errors="strict").encode("latin-1")
        except (UnicodeError, ValueError):
            raise ConfigurationError(
                f"database URL {_hidden(url)!r}: a MariaDB password holds Latin-1 characters only (the drivers send "
                "it in Latin-1)"
            ) from None
        return DatabaseUrl("mysql", url)
    if sep and scheme == "sqlite":
        rest = rest.split("?", 1)[0]
        if rest in ("", "/", "/" + MEMORY):
            return DatabaseUrl("sqlite", MEMORY)
        if not rest.startswith("/"):
            raise ConfigurationError(
                f"invalid SQLite URL {mask(url)!r}: use sqlite:///relative.db or sqlite:////absolute.db"
            )
        return DatabaseUrl("sqlite", unquote(rest[1:]))
    if not sep and re.match(r"\s*(host|hostaddr|dbname|port|user)\s*=", url):
        raise ConfigurationError(
            "the database URL is a libpq keyword string (host=... port=...), not a URL: write its keywords as the "
            "URL's query: postgresql:///DB?host=HOST1,HOST2&port=PORT1,PORT2&target_session_attrs=read-write"
        )
    raise ConfigurationError(
        f"unsupported database URL {mask(url)!r}: "
        "use postgresql://..., mysql://..., mariadb://..., sqlite:///relative.db, sqlite:////absolute.db "
        "or sqlite:// (memory)"
    )


def _encoded_password(url: str) -> str:
    """`url` with the characters of its password that libpq would misread percent-encoded (a space, which psycopg
    quotes back in its error; an `@` or `/`, whose tail libpq takes for the host; a `%` not starting an escape),
    the escapes already written kept: the password reaches the server as written, and no driver prints it."""

    def encode(match: re.Match[str]) -> str:
        password = re.sub(r"%(?![0-9A-Fa-f]{2})", "%25", match.group("password"))
        return match.group("head") + quote(password, safe="%") + match.group("tail")

    return _PASSWORD.sub(encode, url, count=1)


_LIBPQ_NUMBERS = (
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)
"""libpq's parameters that take a whole number; a bad one fails every connection, found only when it is tried."""
_LIBPQ_CHOICES = {
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby", "prefer-standby"),
    "load_balance_hosts": ("disable", "random"),
}
"""libpq's parameters that take one of a few words (a failover URL's); another fails every connection."""


def _postgres(url: str) -> None:
    """Check a PostgreSQL URL as libpq reads it, without connecting (psycopg's `conninfo_to_dict`): an unknown
    parameter, a malformed host, a port (in the authority or `port=`) out of 1-65535, a word where a number belongs,
    a list of ports that matches neither one host nor each, or a `target_session_attrs` / `load_balance_hosts` word
    libpq does not know (a failover URL's) is a ConfigurationError, not a connection failure waited out as an
    outage. Without psycopg, the hosts and ports as `addresses` reads them. No value of the URL is quoted back (a
    misread password could be one)."""
    try:
        from psycopg import Error
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # pragma: no cover - depends on the installed extras
        addresses(url, what="database URL", many=True)
        return
    shown = _hidden(url)
    try:
        params = conninfo_to_dict(url)
    except Error as exc:  # libpq quotes the URL or the parameter
        text = " ".join(str(exc).replace(url, "<the URL>").split())
        raise ConfigurationError(f"database URL {shown!r}: {mask(text)}") from None
    except UnicodeDecodeError:  # psycopg decodes each percent-encoded value as UTF-8, as it would to connect
        raise ConfigurationError(f"database URL {shown!r}: a percent-encoded value is not UTF-8") from None
    ports = str(params.get("port") or "").split(",")
    for port in ports:
        if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            raise ConfigurationError(f"database URL {shown!r}: a port is not a number from 1 to 65535")
    hosts = str(params.get("host") or params.get("hostaddr") or "").split(",")
    if len(ports) > 1 and len(ports) != len(hosts):  # libpq: one port for every host, or one for them all
        raise ConfigurationError(f"database URL {shown!r}: {len(ports)} ports for {len(hosts)} hosts")
    for name, words in _LIBPQ_CHOICES.items():
        if name in params and params[name] not in words:
            raise ConfigurationError(f"database URL {shown!r}: {name} must be one of {', '.join(words)}")
    for name in _LIBPQ_NUMBERS:
        number = str(params.get(name) or "0")
        if not (number.isascii() and number.lstrip("-").isdigit() and len(number) < 10):
            raise ConfigurationError(f"database URL {shown!r}: {name} must be a whole number of seconds")


def engine_url(engine: Any) -> str:
    """The database URL of an SQLAlchemy Engine or AsyncEngine, without its driver (`postgresql+psycopg://` ->
    `postgresql://`), for an inbox of its own on the same database; an in-memory SQLite engine is refused (each
    connection would be another database)."""
    url = engine.url
    backend = url.get_backend_name()
    plain = str(url.set(drivername=backend).render_as_string(hide_password=False))
    parsed = database_url(plain)
    if parsed.in_memory:
        raise ConfigurationError(
            "an in-memory SQLite engine has one database per connection: use a file, or pass session= to process()"
        )
    return plain


def secrets(urls: Iterable[str]) -> set[str]:
    """The passwords and secret options of `urls` in every spelling a driver may print: as written, decoded,
    percent-encoded, and escaped as JSON or a Python repr quotes them."""
    found: set[str] = set()
    for url in urls:
        raw = [m.group("password") for m in _PASSWORD.finditer(url)]
        raw += [m.group("password").strip("'\"") for m in _QUERY_PASSWORD.finditer(url)]
        for value in raw:
            for plain in {value, unquote(value), unquote_plus(value)}:
                found.update({plain, quote(plain, safe=""), quote(plain), json.dumps(plain)[1:-1], repr(plain)[1:-1]})
                found.add(json.dumps(plain, ensure_ascii=False)[1:-1])
    return {s for s in found if s and s != "***"}


@dataclass(frozen=True, slots=True)
class Address:
    """One host and port of a URL, as checked by `addresses` (port None: the scheme's default)."""

    host: str
    port: int | None


def addresses(url: str, *, what: str, host: bool = False, many: bool = False) -> list[Address]:
    """The hosts and ports of `url`, each checked without any I/O; a ConfigurationError naming `what` (masked).

    Every port is a number from 1 to 65535, every host a name of letters, digits, `.`, `-` and `_` or an IP address
    in brackets, the user, password and hosts without a raw space or control character; with `host`, at least one
    host is required (an HTTP API, a Kafka broker); with `many`, the URL may list several `host:port` separated by
    commas (PostgreSQL, Kafka). Without a host the driver's default applies (a local socket, localhost).
    """
    if not isinstance(url, str):
        raise ConfigurationError(f"{what} must be text, got {type(url).__name__}")
    try:
        netloc = urlsplit(url).netloc
    except ValueError as exc:  # an unclosed [IPv6 bracket
        raise ConfigurationError(f"{what} {_hidden(url)!r}: {exc}") from None
    if any(ch.isspace() or not ch.isprintable() for ch in netloc):
        raise ConfigurationError(
            f"{what} {_hidden(url)!r}: a space or control character before the path must be percent-encoded (%20)"
        )
    hosts = netloc.rpartition("@")[2]
    found = [_address(part, url=url, what=what) for part in (hosts.split(",") if many else [hosts]) if part or not many]
    found = [a for a in found if a.host or a.port is not None]
    if host and not any(a.host for a in found):
        raise ConfigurationError(f"{what} {_hidden(url)!r}: a host is required (scheme://host:port/...)")
    return found


def _address(text: str, *, url: str, what: str) -> Address:
    """One `host`, `host:port`, `[v6]` or `[v6]:port`."""
    if text.startswith("["):
        literal, sep, rest = text[1:].partition("]")
        if not sep or not literal or not re.fullmatch(r"[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?", literal):
            raise ConfigurationError(f"{what} {_hidden(url)!r}: {text!r} is not an IP address in brackets")
        name, port = f"[{literal}]", rest.removeprefix(":") if rest.startswith(":") else None
        if rest and port is None:
            raise ConfigurationError(f"{what} {_hidden(url)!r}: {text!r} is not [address]:port")
    else:
        name, sep, port_text = text.partition(":")
        port = port_text if sep else None
        if name and not _HOST_NAME.match(name):
            raise ConfigurationError(f"{what} {_hidden(url)!r}: {name[:80]!r} is not a host name")
    if port is None:
        return Address(name, None)
    if not _PORT.match(port) or not 1 <= int(port) <= 65535:
        named = f"the port {port!r}" if re.fullmatch(r"-?[0-9]{0,12}", port) else "a port"  # never a password's tail
        raise ConfigurationError(f"{what} {_hidden(url)!r}: {named} is not a number from 1 to 65535")
    return Address(name, int(port))


def _hidden(url: str) -> str:
    """`url` for an error about its address: anything before its last `@` (a user and password, however written,
    with or without a host after it) shown as `***`."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.rpartition("@")[2]
    return mask(f"{scheme}{sep}{rest}")


MASKED = "***"
"""What `mask` puts in a password's place: in an outbox row's destination, a password the relay supplies."""

_ORIGIN = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*")


def with_password(destination: str, urls: Iterable[str]) -> str:
    """`destination` as the outbox keeps it (`mask`ed: `amqp://guest:***@host/?queue=q`) with its passwords taken
    from the first of `urls` (full URLs) that names the same scheme, user, host and port; unchanged when it has no
    masked password. ConfigurationError (the row is parked) when none of `urls` has its password."""
    if MASKED not in destination:
        return destination
    origin = _ORIGIN.match(destination)
    for url in urls:
        found = _ORIGIN.match(mask(url))
        if origin is None or found is None or found.group(0) != origin.group(0):
            continue
        restored = destination
        if (given := _PASSWORD.search(url)) is not None:
            restored = restored.replace(f":{MASKED}@", f":{given.group('password')}@", 1)
        for match in _QUERY_PASSWORD.finditer(url):  # an option by its name, whatever delimiter is before it
            head = match.group("head").lstrip("?&;, (\t\n")
            found_at = re.search(rf"(?<=[?&;]){re.escape(head + MASKED)}", restored)
            if found_at is not None:
                value = head + match.group("password")
                restored = restored[: found_at.start()] + value + restored[found_at.end() :]
        if MASKED not in restored:
            return restored
    raise ConfigurationError(
        f"no password for the outbox's destination {destination}: give the relay that broker's URL with its "
        "password (--destinations, EDINBOX_DESTINATIONS, or `destinations` in the settings)"
    )
