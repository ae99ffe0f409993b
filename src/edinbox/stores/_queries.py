"""Named SQL statements, kept in `edinbox/sql/<dialect>/*.sql` as `-- name: <name>` sections."""

from __future__ import annotations

import re
import string
from importlib.resources import files

from edinbox._application import Application
from edinbox._errors import ConfigurationError

__all__ = [
    "FILES",
    "application_steps",
    "load_queries",
    "migration_queries",
    "named_queries",
    "payloads_ddl",
    "placeholders",
    "statements",
]

FILES = ("queries", "schema", "outbox", "payloads", "migrations", "applications")
"""The library's statement files: the journal's, its schema, its outbox's, its kept payloads', the migrations, and
the applications'
version rows (an application's own statements come with it: `edinbox.Application`).

In a statement, `{table}` is the journal and `{table_name}` its name as a string literal, `{outbox}` the journal's
outbox (`<journal>_outbox`) and `{outbox_name}` its name as a string literal; any other `{x}` is the table x beside
the journal (in its schema), `{x_name}` that table's name as a string literal, and `{x_index}` an index of this
journal's tables (named after the journal, so two journals in one schema never share one).
"""


def load_queries(dialect: str, *names: str) -> dict[str, str]:
    """Every named statement of the given library files (`FILES`) of a dialect."""
    queries: dict[str, str] = {}
    for name in names:
        queries.update(named_queries(files("edinbox").joinpath("sql", dialect, f"{name}.sql").read_text("utf-8")))
    return queries


def statements(dialect: str, applications: tuple[Application, ...]) -> dict[str, str]:
    """The library's statements for `dialect` with each application's added; ConfigurationError for a name taken
    twice (an application's statement never replaces the library's)."""
    queries = load_queries(dialect, *FILES)
    for application in applications:
        for text in application.texts(dialect):
            for name, statement in named_queries(text).items():
                if name in queries:
                    raise ConfigurationError(f"application {application.name!r}: statement {name!r} is named twice")
                queries[name] = statement
        for name, statement in named_queries(application.migration_text(dialect)).items():
            queries[application.step(name)] = statement
    return queries


def payloads_ddl(dialect: str) -> list[str]:
    """The statements that create the kept payloads' table and its indexes (`payloads.sql`'s `payloads_create*`), in
    file order: run by `create_schema()`, and by migration 11 on an older journal."""
    return [name for name in load_queries(dialect, "payloads") if name.startswith("payloads_create")]


def named_queries(text: str) -> dict[str, str]:
    """The statements of one file's text, by the name of their `-- name: <name>` section."""
    queries: dict[str, str] = {}
    for section in re.split(r"^-- name: ", text, flags=re.MULTILINE)[1:]:
        title, _, body = section.partition("\n")
        queries[title.strip()] = body.strip()
    return queries


def placeholders(text: str) -> set[str]:
    """The `{name}` identifiers a statement's text uses."""
    return {field for _, field, _, _ in string.Formatter().parse(text) if field}


_STEP = re.compile(r"v([0-9]+)_")


def migration_queries(dialect: str) -> dict[int, list[str]]:
    """The named queries of each migration step of one dialect (`v<N>_*` in `migrations.sql`), in file order."""
    steps: dict[int, list[str]] = {}
    for name in load_queries(dialect, "migrations"):
        if step := _STEP.match(name):
            steps.setdefault(int(step.group(1)), []).append(name)
    return steps


def application_steps(dialect: str, application: Application) -> dict[int, list[str]]:
    """The store's names of the statements of each of `application`'s migration steps for `dialect`, in file order."""
    return application.steps(list(named_queries(application.migration_text(dialect))))
