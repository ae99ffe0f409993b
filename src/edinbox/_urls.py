"""URLs for the whole package: the one database URL parser, and passwords that never leave the process in clear."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from edinbox._errors import ConfigurationError

__all__ = ["DatabaseUrl", "database_url", "mask"]

_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<password>[^@/\s]*)(?P<tail>@)")
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&;\s](?:password|passwd|pwd)=)(?P<password>[^&;\s]*)", re.IGNORECASE)

MEMORY = ":memory:"


def mask(text: str) -> str:
    """Return `text` with every password in a URL or DSN replaced by `***`."""
    text = _PASSWORD.sub(r"\g<head>***\g<tail>", text)
    return _QUERY_PASSWORD.sub(r"\g<head>***", text)


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
