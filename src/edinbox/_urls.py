"""URL helpers shared by stores, sources and the CLI: passwords never leave the process in clear."""

from __future__ import annotations

import re

__all__ = ["mask"]

_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<password>[^@/\s]*)(?P<tail>@)")
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&;\s](?:password|passwd|pwd)=)(?P<password>[^&;\s]*)", re.IGNORECASE)


def mask(text: str) -> str:
    """Return `text` with every password in a URL or DSN replaced by `***`."""
    text = _PASSWORD.sub(r"\g<head>***\g<tail>", text)
    return _QUERY_PASSWORD.sub(r"\g<head>***", text)
