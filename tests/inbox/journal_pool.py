"""Journals on the shared MariaDB and PostgreSQL kept from one test to the next of a test process.

Creating a journal and dropping it again is DDL, which the database makes durable file by file: on MariaDB 0.3 to
0.5 s a test on a loaded machine, most of a contract test's time (a PostgreSQL schema costs less, still several
files). A test that leaves its journal as the store made it gives it back emptied (one DELETE per table, one commit)
for the next test of the process; a test that changed it in any way (a dropped key or table, another stored version,
a table of its own beside it) has it dropped, as before. Each test still starts on an empty journal that no other
test uses at the same time: xdist's workers are processes, each with its own journals under fresh names.

A MariaDB journal is a set of tables, `name` and every `name_...`; a PostgreSQL journal is the schema `name`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

Admin = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
"""Runs SQL (autocommit) and returns its rows: a harness's `admin`."""

Shape = tuple[tuple[Any, ...], ...]
"""What a journal looks like: its tables, columns, keys, checks and defaults, and the stored schema version."""


def mysql_tables(admin: Admin, name: str) -> list[str]:
    """The tables of the set `name`: `name` itself and every `name_...` beside it (whoever made them)."""
    prefix = name.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")
    rows = admin(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
        "AND (table_name = %s OR table_name LIKE %s) ORDER BY table_name",
        (name, f"{prefix}\\_%"),
    )
    return [row[0] for row in rows]


def mysql_shape(admin: Admin, name: str) -> Shape:
    """The set's tables and their definitions (SHOW CREATE TABLE, without the AUTO_INCREMENT counter), and the
    stored version."""
    described: list[tuple[Any, ...]] = []
    for table in mysql_tables(admin, name):
        [(_, create)] = admin(f"SHOW CREATE TABLE `{table}`", ())
        described.append(("table", table, re.sub(r" AUTO_INCREMENT=\d+", "", create)))
    if ("table", f"{name}_version") in {row[:2] for row in described}:
        versions = admin(f"SELECT version FROM `{name}_version` ORDER BY version", ())
        described.append(("version", repr(versions), ""))
    return tuple(described)


def mysql_drop(admin: Admin, name: str) -> None:
    """Drop every table of the set `name`."""
    made = mysql_tables(admin, name)
    if made:
        admin("DROP TABLE IF EXISTS " + ", ".join(f"`{table}`" for table in made), ())


def _mysql_empty(admin: Admin, name: str, made: Shape) -> None:
    for kind, table, *_ in made:
        if kind == "table" and table != f"{name}_version":
            admin(f"DELETE FROM `{table}`", ())


_PG_COLUMNS = """
SELECT c.relname, c.relkind, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), CASE WHEN c.relkind = 'i' THEN pg_get_indexdef(c.oid) END
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = %s
ORDER BY 1, 3
"""

_PG_OTHERS = """
SELECT 'constraint', conname::text, pg_get_constraintdef(k.oid) FROM pg_constraint k
JOIN pg_namespace n ON n.oid = k.connamespace WHERE n.nspname = %(schema)s
UNION ALL
SELECT 'type', typname::text, typtype::text || format_type(typbasetype, typtypmod) FROM pg_type t
JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = %(schema)s
UNION ALL
SELECT 'function', proname::text, pg_get_function_identity_arguments(p.oid) FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(schema)s
UNION ALL
SELECT 'trigger', tgname::text, pg_get_triggerdef(g.oid) FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(schema)s
ORDER BY 1, 2, 3
"""


def postgres_shape(admin: Admin, schema: str) -> Shape:
    """The schema's relations (columns, types, defaults, indexes), constraints, types, functions and triggers, and
    the stored version."""
    rows = [("column", *row) for row in admin(_PG_COLUMNS, (schema,))]
    rows += [tuple(row) for row in admin(_PG_OTHERS, {"schema": schema})]  # type: ignore[arg-type]
    if ("column", "inbox_version", "r") in {row[:3] for row in rows}:
        versions = admin(f"SELECT version FROM {schema}.inbox_version ORDER BY version", ())
        rows.append(("version", repr(versions), ""))
    return tuple(rows)


def postgres_drop(admin: Admin, schema: str) -> None:
    """Drop the schema and everything in it."""
    admin(f"DROP SCHEMA IF EXISTS {schema} CASCADE", ())


def _postgres_empty(admin: Admin, schema: str, made: Shape) -> None:
    for kind, relation, relkind, *_ in made:
        if kind == "column" and relkind == "r" and relation != "inbox_version":
            admin(f"DELETE FROM {schema}.{relation}", ())
    for kind, relation, relkind, *_ in made:
        if kind == "column" and relkind == "S":  # BIGSERIAL ids start at 1 again, as in a new journal
            admin(f"ALTER SEQUENCE {schema}.{relation} RESTART", ())


class JournalPool:
    """The journals one test process keeps for its next tests: taken by a harness, given back by its close."""

    def __init__(
        self, shape: Callable[[Admin, str], Shape], empty: Callable[[Admin, str, Shape], None] | None = None
    ) -> None:
        self.shape = shape
        self.empty = empty or (_mysql_empty if shape is mysql_shape else _postgres_empty)
        self.free: list[tuple[str, Shape]] = []
        """Names whose journals are empty and as the store made them, with that shape."""
        self.kept: set[str] = set()
        """Every name given back at least once (dropped at the end)."""

    def take(self) -> tuple[str, Shape | None]:
        """A free journal (its name and shape), or a fresh name (and None) when none is free."""
        if self.free:
            return self.free.pop()
        return "t" + uuid.uuid4().hex[:12], None

    def give_back(self, admin: Admin, name: str, made: Shape | None) -> bool:
        """Empty the journal and keep it for the next test when its shape is still `made` (the store's, taken when
        it was created); return False, keeping nothing, when the test changed it (the caller drops it then)."""
        if made is None or self.shape(admin, name) != made:
            return False
        admin("BEGIN", ())
        try:
            self.empty(admin, name, made)
            admin("COMMIT", ())
        except Exception:
            admin("ROLLBACK", ())
            return False
        self.free.append((name, made))
        self.kept.add(name)
        return True

    def drop_all(self, admin: Admin, drop: Callable[[Admin, str], None]) -> None:
        """Drop every journal kept (at the end of the test process)."""
        for name in sorted(self.kept):
            drop(admin, name)
        self.free.clear()
        self.kept.clear()
