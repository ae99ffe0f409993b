"""URLs for the whole package: the one database URL parser, and passwords that never leave the process in clear.

A password in a URL may hold any character, raw or percent-encoded (`@`, `/`, `:`, a space), so the masked part
runs from the `:` after the user name to the LAST `@` on the line that is followed by a host name, never across
another `scheme://`. When in doubt it masks too much, never too little.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote

from edinbox._errors import ConfigurationError

__all__ = ["DatabaseUrl", "database_url", "mask", "secrets"]

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
    """"postgresql" or "sqlite"."""
    target: str
    """PostgreSQL: the URL as given (libpq parses it). SQLite: the file, percent-escapes decoded, or ":memory:"."""

    @property
    def in_memory(self) -> bool:
        """True for an in-memory SQLite database (`sqlite://`)."""
        return self.dialect == "sqlite" and self.target == MEMORY


def database_url(url: str) -> DatabaseUrl:
    """Parse `postgresql://...`, `sqlite:///relative.db`, `sqlite:////absolute.db` or `sqlite://` (memory).

    A SQLite path is percent-decoded once, here, so `sqlite:///my%20db.db` is the file `my db.db` for every part
    of the package. Anything else is a ConfigurationError naming the URL with its password masked.
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if sep and scheme in ("postgresql", "postgres"):
        return DatabaseUrl("postgresql", url)
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
        "use postgresql://..., sqlite:///relative.db, sqlite:////absolute.db or sqlite:// (memory)"
    )


def secrets(urls: Iterable[str]) -> set[str]:
    """The passwords of `urls` in every spelling a driver may print: as written, decoded and percent-encoded."""
    found: set[str] = set()
    for url in urls:
        for match in _PASSWORD.finditer(url):
            raw = match.group("password")
            found.update({raw, unquote(raw), quote(unquote(raw), safe="")})
    return {s for s in found if s}
