"""Named SQL statements, kept in `edinbox/sql/<dialect>/*.sql` as `-- name: <name>` sections."""

from __future__ import annotations

import re
from importlib.resources import files

__all__ = ["load_queries"]


def load_queries(dialect: str, *names: str) -> dict[str, str]:
    """Return every named statement of the given files (`queries`, `schema`) of one dialect."""
    queries: dict[str, str] = {}
    for name in names:
        text = files("edinbox").joinpath("sql", dialect, f"{name}.sql").read_text(encoding="utf-8")
        for section in re.split(r"^-- name: ", text, flags=re.MULTILINE)[1:]:
            title, _, body = section.partition("\n")
            queries[title.strip()] = body.strip()
    return queries
