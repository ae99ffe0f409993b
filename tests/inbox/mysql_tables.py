"""Journal tables on the shared MariaDB kept from one test to the next of a test process.

Creating a journal and dropping it again is DDL, which InnoDB makes durable one file at a time: 0.3 to 0.5 s a test
on a loaded machine, most of a contract test's time. A test that leaves the tables as the store made them gives
them back emptied (one DELETE per table, one commit) for the next test of the process; a test that changed them in
any way (a dropped key or table, another stored version, a table of its own beside them) has them dropped, as
before. Each test still starts on an empty journal that no other test uses at the same time: xdist's workers are
processes, each with its own tables under fresh names.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

Admin = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
"""Runs SQL (autocommit) and returns its rows: a harness's `admin`."""

Shape = tuple[tuple[str, str], ...]
"""What a set of tables looks like: (table, its CREATE TABLE without the AUTO_INCREMENT counter) for each, and the
stored schema version as a last entry."""


def tables(admin: Admin, name: str) -> list[str]:
    """The tables of the set `name`: `name` itself and every `name_...` beside it (whoever made them)."""
    prefix = name.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")
    rows = admin(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
        "AND (table_name = %s OR table_name LIKE %s) ORDER BY table_name",
        (name, f"{prefix}\\_%"),
    )
    return [row[0] for row in rows]


def shape(admin: Admin, name: str) -> Shape:
    """The set's tables, their definitions (keys, checks and defaults included) and the stored version."""
    described = []
    for table in tables(admin, name):
        [(_, create)] = admin(f"SHOW CREATE TABLE `{table}`", ())
        described.append((table, re.sub(r" AUTO_INCREMENT=\d+", "", create)))
    if f"{name}_version" in dict(described):
        versions = admin(f"SELECT version FROM `{name}_version` ORDER BY version", ())
        described.append(("version", repr(versions)))
    return tuple(described)


def drop(admin: Admin, name: str) -> None:
    """Drop every table of the set `name`."""
    made = tables(admin, name)
    if made:
        admin("DROP TABLE IF EXISTS " + ", ".join(f"`{table}`" for table in made), ())


class MySQLTables:
    """The sets of tables one test process keeps for its next tests: taken by a harness, given back by its close."""

    def __init__(self) -> None:
        self.free: list[tuple[str, Shape]] = []
        """Names whose tables are empty and as the store made them, with that shape."""
        self.kept: set[str] = set()
        """Every name given back at least once (dropped at the end)."""

    def take(self) -> tuple[str, Shape | None]:
        """A free set (its name and shape), or a fresh name (and None) when none is free."""
        if self.free:
            return self.free.pop()
        return "t" + uuid.uuid4().hex[:12], None

    def give_back(self, admin: Admin, name: str, made: Shape | None) -> bool:
        """Empty the set and keep it for the next test when its shape is still `made` (the store's, taken when it
        was created); return False, keeping nothing, when the test changed it (the caller drops it then)."""
        if made is None or shape(admin, name) != made:
            return False
        admin("START TRANSACTION", ())
        try:
            for table, _ in made:
                if table not in ("version", f"{name}_version"):
                    admin(f"DELETE FROM `{table}`", ())
            admin("COMMIT", ())
        except Exception:
            admin("ROLLBACK", ())
            return False
        self.free.append((name, made))
        self.kept.add(name)
        return True

    def drop_all(self, admin: Admin) -> None:
        """Drop every set kept (at the end of the test process)."""
        for name in sorted(self.kept):
            drop(admin, name)
        self.free.clear()
        self.kept.clear()
