"""An application on top of the journal: its own tables beside it, their named statements added to the journal's
store. procrastinate's and Django's apps are the model: the library owns the journal, the outbox and their version
table; an application (the EDI hub is one) brings its SQL with its code, and reaches it through the same units
(`tx.unit.run("name", params)`) as the library's, with the same placeholders (`{table}`, `{x}` a table beside the
journal, `{x_name}`, `{x_index}`).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path

__all__ = ["Application"]


@dataclass(frozen=True, slots=True)
class Application:
    """An application's statements: `<folder>/<dialect>/<file>.sql` for each of `files`, as `-- name: <name>`
    sections; `name` says whose they are in errors. Pass it to `Inbox(..., applications=[...])`."""

    name: str
    folder: Traversable | Path
    files: tuple[str, ...]

    def texts(self, dialect: str) -> list[str]:
        """The text of each of the application's statement files for `dialect` ("postgresql", "mysql", "sqlite")."""
        return [self.folder.joinpath(dialect, f"{file}.sql").read_text("utf-8") for file in self.files]
