"""Named SQL statements, kept in `edinbox/sql/<dialect>/*.sql` as `-- name: <name>` sections."""

from __future__ import annotations

import re
import string
from importlib.resources import files

__all__ = ["FILES", "load_queries", "placeholders"]

FILES = ("queries", "schema", "outbox", "hub")
"""The statement files a store loads: the journal's, its schema, and those of tables beside it.

In a statement, `{table}` is the journal and `{table_name}` its name as a string literal, `{outbox}` the journal's
outbox (`<journal>_outbox`) and `{outbox_name}` its name as a string literal; any other `{x}` is the
table x beside the journal (in its schema) and `{x_name}` that table's name as a string literal.
"""


def load_queries(dialect: str, *names: str) -> dict[str, str]:
    """Return every named statement of the given files (`queries`, `schema`, `outbox`, `hub`) of one dialect."""
    queries: dict[str, str] = {}
    for name in names:
        text = files("edinbox").joinpath("sql", dialect, f"{name}.sql").read_text(encoding="utf-8")
        for section in re.split(r"^-- name: ", text, flags=re.MULTILINE)[1:]:
            title, _, body = section.partition("\n")
            queries[title.strip()] = body.strip()
    return queries


def placeholders(text: str) -> set[str]:
    """The `{name}` identifiers a statement's text uses."""
    return {field for _, field, _, _ in string.Formatter().parse(text) if field}
