"""Journals on the shared MariaDB and PostgreSQL kept from one test to the next of a test process.

Creating a journal (and the hub's tables beside it) and dropping it again is DDL, which the database makes durable
file by file: on MariaDB 0.3 to 0.5 s a test on a loaded machine for the inbox's four tables, more for the hub's;
a PostgreSQL schema costs less, still several files. A test that leaves its journal as the store made it gives it
back emptied (one DELETE per table, one commit) for the next test of the process; a test that changed it in any way
(a dropped key or table, a column, another stored version, a table of its own beside it) has it dropped, as before.
Each test still starts on an empty journal that no other test uses at the same time: xdist's workers are
processes, each with its own journals under fresh names.

A journal is named by a fresh identifier `name`: on MariaDB the tables `name` and `name_...` of the shared test
database (`MYSQL_TABLES`) or every table of the database `name` (`MYSQL_DATABASE`, a hub's `name.inbox`); on
PostgreSQL the schema `name` (`POSTGRES_SCHEMA`). The tables that hold rows once the journal is made (the stored
versions, the applications' versions) are kept as they are, their rows part of the shape; the others are emptied.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Admin = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
"""Runs SQL (autocommit) and returns its rows: a harness's `admin`."""

Definitions = tuple[tuple[Any, ...], ...]
"""A journal's definitions, one row per table, column, key, check, type...: what two journals compare."""


@dataclass(frozen=True)
class Shape:
    """What a journal looks like: its definitions (tables, columns, keys, checks, defaults...) and the rows of the
    tables that held rows when it was made."""

    definitions: Definitions
    tables: tuple[str, ...]
    """Every table, as SQL names it (qualified)."""
    seeded: tuple[tuple[str, str], ...]
    """(table, repr of its sorted rows) of each table that held rows when the journal was made."""


@dataclass(frozen=True)
class Dialect:
    """How to list, describe, drop and restart the journals of one database."""

    tables: Callable[[Admin, str], list[str]]
    """The journal's tables, qualified as SQL names them."""
    definitions: Callable[[Admin, str], Definitions]
    drop: Callable[[Admin, str], None]
    restart: Callable[[Admin, str], None]
    """Start the journal's sequences again (ids from 1, as in a new journal)."""


def _mysql_prefixed(admin: Admin, name: str) -> list[str]:
    prefix = name.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")
    rows = admin(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
        "AND (table_name = %s OR table_name LIKE %s) ORDER BY table_name",
        (name, f"{prefix}\\_%"),
    )
    return [f"`{row[0]}`" for row in rows]


def _mysql_database(admin: Admin, name: str) -> list[str]:
    rows = admin(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY table_name", (name,)
    )
    return [f"`{name}`.`{row[0]}`" for row in rows]


def _mysql_definitions(
    tables: Callable[[Admin, str], list[str]],
) -> Callable[[Admin, str], tuple[tuple[Any, ...], ...]]:
    def definitions(admin: Admin, name: str) -> tuple[tuple[Any, ...], ...]:
        described = []
        for table in tables(admin, name):
            [(_, create)] = admin(f"SHOW CREATE TABLE {table}", ())
            described.append((table, re.sub(r" AUTO_INCREMENT=\d+", "", create)))
        return tuple(described)

    return definitions


def _mysql_drop_prefixed(admin: Admin, name: str) -> None:
    made = _mysql_prefixed(admin, name)
    if made:
        admin("DROP TABLE IF EXISTS " + ", ".join(made), ())


def _nothing(admin: Admin, name: str) -> None:
    """MariaDB: AUTO_INCREMENT counters go on (resetting one is DDL); no test counts on an id's value."""


MYSQL_TABLES = Dialect(_mysql_prefixed, _mysql_definitions(_mysql_prefixed), _mysql_drop_prefixed, _nothing)


def _mysql_drop_database(admin: Admin, name: str) -> None:
    admin(f"DROP DATABASE IF EXISTS `{name}`", ())


MYSQL_DATABASE = Dialect(_mysql_database, _mysql_definitions(_mysql_database), _mysql_drop_database, _nothing)

_PG_COLUMNS = """
SELECT c.relname::text, c.relkind::text, a.attnum, a.attname::text, format_type(a.atttypid, a.atttypmod),
       a.attnotnull, pg_get_expr(d.adbin, d.adrelid), CASE WHEN c.relkind = 'i' THEN pg_get_indexdef(c.oid) END
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = %(schema)s
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


def _pg_tables(admin: Admin, schema: str) -> list[str]:
    rows = admin(
        "SELECT tablename FROM pg_tables WHERE schemaname = %(schema)s ORDER BY tablename",
        {"schema": schema},  # type: ignore[arg-type]
    )
    return [f"{schema}.{row[0]}" for row in rows]


def _pg_definitions(admin: Admin, schema: str) -> Definitions:
    rows = [("column", *row) for row in admin(_PG_COLUMNS, {"schema": schema})]  # type: ignore[arg-type]
    rows += [tuple(row) for row in admin(_PG_OTHERS, {"schema": schema})]  # type: ignore[arg-type]
    return tuple(rows)


def _pg_restart(admin: Admin, schema: str) -> None:
    rows = admin(
        "SELECT sequencename FROM pg_sequences WHERE schemaname = %(schema)s",
        {"schema": schema},  # type: ignore[arg-type]
    )
    for (sequence,) in rows:
        admin(f"ALTER SEQUENCE {schema}.{sequence} RESTART", ())


def _pg_drop(admin: Admin, schema: str) -> None:
    admin(f"DROP SCHEMA IF EXISTS {schema} CASCADE", ())


POSTGRES_SCHEMA = Dialect(_pg_tables, _pg_definitions, _pg_drop, _pg_restart)


class JournalPool:
    """The journals one test process keeps for its next tests: taken by a test, given back after it."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.free: list[tuple[str, Shape]] = []
        """Names whose journals are empty and as the store made them, with that shape."""
        self.kept: set[str] = set()
        """Every name given back at least once (dropped at the end)."""

    def take(self) -> tuple[str, Shape | None]:
        """A free journal (its name and shape), or a fresh name (and None) when none is free: the caller makes it,
        then notes its shape with `shape`."""
        if self.free:
            return self.free.pop()
        return "t" + uuid.uuid4().hex[:12], None

    def shape(self, admin: Admin, name: str, seeded: Sequence[str] | None = None) -> Shape:
        """The journal's shape now; `seeded` the tables whose rows belong to it (by default those holding rows)."""
        tables = tuple(self.dialect.tables(admin, name))
        if seeded is None:
            seeded = [table for table in tables if admin(f"SELECT 1 FROM {table} LIMIT 1", ())]
        rows = tuple((table, repr(sorted(map(repr, admin(f"SELECT * FROM {table}", ()))))) for table in seeded)
        return Shape(self.dialect.definitions(admin, name), tables, rows)

    def give_back(self, admin: Admin, name: str, made: Shape | None) -> bool:
        """Empty the journal and keep it for the next test when its shape is still `made` (the store's, noted when
        it was made); return False, keeping nothing, when the test changed it (the caller drops it then)."""
        if made is None:
            return False
        try:
            if self.shape(admin, name, [table for table, _ in made.seeded]) != made:
                return False
        except Exception:  # a seeded table the test dropped
            return False
        seeded = {table for table, _ in made.seeded}
        admin("BEGIN", ())
        try:
            for table in made.tables:
                if table not in seeded:
                    admin(f"DELETE FROM {table}", ())
            self.dialect.restart(admin, name)
            admin("COMMIT", ())
        except Exception:
            admin("ROLLBACK", ())
            return False
        self.free.append((name, made))
        self.kept.add(name)
        return True

    def drop(self, admin: Admin, name: str) -> None:
        """Drop the journal `name`."""
        self.dialect.drop(admin, name)

    def drop_all(self, admin: Admin) -> None:
        """Drop every journal kept (at the end of the test process)."""
        for name in sorted(self.kept):
            self.dialect.drop(admin, name)
        self.free.clear()
        self.kept.clear()
