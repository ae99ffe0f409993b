"""URLs for the whole package: the one database URL parser, and passwords that never leave the process in clear.

A password in a URL may hold any character, raw or percent-encoded (`@`, `/`, `:`, a space), so the masked part
runs from the `:` after the user name to the LAST `@` on the line that is followed by a host name, never across
another `scheme://`. When in doubt it masks too much, never too little.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from edinbox._errors import ConfigurationError

__all__ = ["DatabaseUrl", "database_url", "engine_url", "mask", "secrets", "with_password"]

_HOST_AFTER = r"@(?=(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.%-]+)(?::\d+)?(?:[/?#\s,;:'\")\]>]|$))"
_PASSWORD = re.compile(
    r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<password>(?:(?!://)[^\n])*)" + "(?P<tail>" + _HOST_AFTER + ")"
)
_QUERY_PASSWORD = re.compile(
    r"(?P<head>[?&;\s](?:password|passwd|pwd|secret|token|access_token|api_key|apikey)=)(?P<password>[^&;\s]*)",
    re.IGNORECASE,
)

# a part of each parameter name of _QUERY_PASSWORD: a text with none of them has nothing for it to mask. The text is
# lowered, and the two letters that re.IGNORECASE also takes for "s" and "i" (long s, dotless i) are folded to them.
_QUERY_WORDS = ("pass", "pwd", "secret", "token", "api")

MEMORY = ":memory:"


def mask(text: str) -> str:
    """Return `text` with every password in a URL or DSN replaced by `***`.

    Each pattern runs only when the text holds what it cannot match without (`://`; one of the parameter words),
    so an ordinary log line costs two substring searches instead of two regex scans.
    """
    if "://" in text:
        text = _PASSWORD.sub(r"\g<head>***\g<tail>", text)
    lower = text.lower()
    if not text.isascii():
        lower = lower.replace("\u017f", "s").replace("\u0131", "i")
    if any(word in lower for word in _QUERY_WORDS):
        text = _QUERY_PASSWORD.sub(r"\g<head>***", text)
    return text


@dataclass(frozen=True, slots=True)
class DatabaseUrl:
    """A parsed database URL: its dialect, and what the driver opens (the URL itself, or a SQLite file)."""

    dialect: str
    """"postgresql", "mysql" (MariaDB or MySQL) or "sqlite"."""
    target: str
    """PostgreSQL and MySQL: the URL as given. SQLite: the file, percent-escapes decoded, or ":memory:"."""

    @property
    def in_memory(self) -> bool:
        """True for an in-memory SQLite database (`sqlite://`)."""
        return self.dialect == "sqlite" and self.target == MEMORY


def database_url(url: str) -> DatabaseUrl:
    """Parse `postgresql://...`, `mysql://...` or `mariadb://...`, `sqlite:///relative.db`, `sqlite:////absolute.db`
    or `sqlite://` (memory).

    A SQLite path is percent-decoded once, here, so `sqlite:///my%20db.db` is the file `my db.db` for every part
    of the package. Anything else is a ConfigurationError naming the URL with its password masked.
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if sep and scheme in ("postgresql", "postgres"):
        return DatabaseUrl("postgresql", url)
    if sep and scheme in ("mysql", "mariadb"):
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
    raise ConfigurationError(
        f"unsupported database URL {mask(url)!r}: "
        "use postgresql://..., mysql://..., mariadb://..., sqlite:///relative.db, sqlite:////absolute.db "
        "or sqlite:// (memory)"
    )


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
    """The passwords of `urls` in every spelling a driver may print: as written, decoded and percent-encoded."""
    found: set[str] = set()
    for url in urls:
        for match in _PASSWORD.finditer(url):
            raw = match.group("password")
            found.update({raw, unquote(raw), quote(unquote(raw), safe="")})
    return {s for s in found if s}


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
        for match in _QUERY_PASSWORD.finditer(url):
            restored = restored.replace(f"{match.group('head')}{MASKED}", match.group(0), 1)
        if MASKED not in restored:
            return restored
    raise ConfigurationError(
        f"no password for the outbox's destination {destination}: give the relay that broker's URL with its "
        "password (--destinations, EDINBOX_DESTINATIONS, or `destinations` in the settings)"
    )
