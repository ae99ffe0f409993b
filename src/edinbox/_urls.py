"""URL helpers shared by stores, sources and the CLI: passwords never leave the process in clear.

A password in a URL may hold any character, raw or percent-encoded (`@`, `/`, `:`, a space), so the masked part
runs from the `:` after the user name to the LAST `@` on the line that is followed by a host name, never across
another `scheme://`. When in doubt it masks too much, never too little.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, unquote

__all__ = ["mask", "secrets"]

_HOST_AFTER = r"@(?=(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.%-]+)(?::\d+)?(?:[/?#\s,;:'\")\]>]|$))"
_PASSWORD = re.compile(
    r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<password>(?:(?!://)[^\n])*)" + "(?P<tail>" + _HOST_AFTER + ")"
)
_QUERY_PASSWORD = re.compile(
    r"(?P<head>[?&;\s](?:password|passwd|pwd|secret|token|access_token|api_key|apikey)=)(?P<password>[^&;\s]*)",
    re.IGNORECASE,
)


def mask(text: str) -> str:
    """Return `text` with every password in a URL or DSN replaced by `***`."""
    text = _PASSWORD.sub(r"\g<head>***\g<tail>", text)
    return _QUERY_PASSWORD.sub(r"\g<head>***", text)


def secrets(urls: Iterable[str]) -> set[str]:
    """The passwords of `urls` in every spelling a driver may print: as written, decoded and percent-encoded."""
    found: set[str] = set()
    for url in urls:
        for match in _PASSWORD.finditer(url):
            raw = match.group("password")
            found.update({raw, unquote(raw), quote(unquote(raw), safe="")})
    return {s for s in found if s}
