"""An application on top of the journal: its own tables beside it, their named statements added to the journal's
store, and its own numbered migration chain. procrastinate's and Django's apps are the model: the library owns the
journal, the outbox and their version table; an application (the EDI hub is one) brings its SQL with its code, and
reaches it through the same units (`tx.unit.run("name", params)`) as the library's, with the same placeholders
(`{table}`, `{x}` a table beside the journal, `{x_name}`, `{x_index}`).

An application's version is kept as its row (keyed by its name) in the `edinbox_applications` table beside the
journal, which the first application's `create_schema()` makes: a journal with no application has no such table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from types import MappingProxyType

from edinbox._errors import ConfigurationError

__all__ = ["Application"]

_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
_STEP = re.compile(r"v([0-9]+)_")


@dataclass(frozen=True, slots=True)
class Application:
    """An application's statements and schema; pass it to `Inbox(..., applications=[...])`.

    - `name` keys its version row and prefixes its migration statements; it names the application in errors.
    - `files`: `<folder>/<dialect>/<file>.sql` for each, as `-- name: <name>` sections.
    - `create`: the names of its statements that make its tables at the current version, run in order by
      `create_schema()` (each must hold when run again: `IF NOT EXISTS`).
    - `migrations`: each version after the first, with what it changes (`{2: "...", 3: "..."}`); version N is reached
      by the sections `v<N>_*` of `<folder>/<dialect>/migrations.sql`, run in file order by `migrate()`. The current
      version is the highest (1 when there is none).
    - `legacy`: a table of the application's made before it kept a version row: found without the row, the
      application is taken to be at version 1, so `migrate()` upgrades it (`create_schema()` then asks for that).

    An application with none of `create`, `migrations` and `legacy` only adds statements: it has no version row.
    """

    name: str
    folder: Traversable | Path
    files: tuple[str, ...]
    create: tuple[str, ...] = ()
    migrations: Mapping[int, str] = field(default_factory=dict, hash=False)
    legacy: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name) or self.name == "edinbox":  # "edinbox": the journal's own, in migrate()
            raise ConfigurationError(f"an application's name is lowercase letters, digits and _: {self.name!r}")
        if any(not isinstance(step, int) or step < 2 for step in self.migrations):
            raise ConfigurationError(f"application {self.name!r}: its migrations are numbered from 2")
        object.__setattr__(self, "migrations", MappingProxyType(dict(self.migrations)))

    @property
    def tables(self) -> bool:
        """Whether the application has tables of its own (`create`, `migrations` or `legacy`): one that only adds
        statements gets no version row, and `create_schema()`, `migrate()` and `verify()` pass it by."""
        return bool(self.create or self.migrations or self.legacy)

    @property
    def version(self) -> int:
        """The version of the application's schema that `create_schema()` makes and `verify()` demands."""
        return max(self.migrations, default=1)

    def texts(self, dialect: str) -> list[str]:
        """The text of each of the application's statement files for `dialect` ("postgresql", "mysql", "sqlite")."""
        return [self.folder.joinpath(dialect, f"{file}.sql").read_text("utf-8") for file in self.files]

    def migration_text(self, dialect: str) -> str:
        """The text of the application's `migrations.sql` for `dialect` (empty when it has no migrations)."""
        if not self.migrations:
            return ""
        return self.folder.joinpath(dialect, "migrations.sql").read_text("utf-8")

    def step(self, statement: str) -> str:
        """The store's name of the application's migration statement `statement` (`v<N>_*`): `<name>:<statement>`."""
        return f"{self.name}:{statement}"

    def steps(self, names: list[str]) -> dict[int, list[str]]:
        """The store's names of each migration step's statements, in file order, from the names of `migrations.sql`."""
        steps: dict[int, list[str]] = {}
        for name in names:
            if found := _STEP.match(name):
                steps.setdefault(int(found.group(1)), []).append(self.step(name))
        return steps
