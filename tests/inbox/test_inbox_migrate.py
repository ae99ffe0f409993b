"""Versioned migrations, the whole chain: a journal built from the frozen version-1 DDL (`schema_v1/`) is refused
until migrated, then upgraded with its rows to the schema a fresh journal has, once, whoever else migrates at once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from migrate_journal import DIALECTS, SOURCE, Journal, journal_rows, nothing, publish, version_1_journal

from edinbox import AsyncInbox, Inbox, Message, Outcome, SchemaError, Status
from edinbox._core import MIGRATIONS, SCHEMA_VERSION
from edinbox.stores._queries import migration_queries
from threads import in_threads


@pytest.fixture(params=DIALECTS)
def journal(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[Journal]:
    """A version-1 journal with rows, on PostgreSQL (in a schema of its own), on MariaDB (in a database of its
    own) and on a SQLite file."""
    yield from version_1_journal(request, unique_name, tmp_path)


def test_every_migration_has_queries_in_every_dialect() -> None:
    """Each version of `_core.MIGRATIONS` has named queries for PostgreSQL, MariaDB and SQLite, and no step lacks an
    entry."""
    assert max(MIGRATIONS) == SCHEMA_VERSION
    for dialect in ("postgresql", "mysql", "sqlite"):
        steps = migration_queries(dialect)
        assert sorted(steps) == sorted(MIGRATIONS), dialect
        assert all(steps[version] for version in steps)


def test_a_version_1_journal_is_refused_until_migrated_then_keeps_its_rows(journal: Journal) -> None:
    """verify() and create_schema() name `edinbox migrate`; migrate() upgrades once, keeps every row, is idempotent."""
    with Inbox(journal.target, consumer="accounting", table=journal.table) as inbox:
        before = {k: v[:5] for k, v in journal_rows(journal).items()}
        assert sorted(before) == ["c", "d", "f", "p"]
        with pytest.raises(SchemaError, match="run `edinbox migrate`"):
            inbox.verify()
        with pytest.raises(SchemaError, match="run `edinbox migrate`"):
            inbox.create_schema()
        assert not journal.status_check("requeued")
        assert not journal.has_outbox()  # the refused create_schema() committed none of its steps
        assert inbox.migrate() == sorted(MIGRATIONS)
        assert inbox.migrate() == []
        inbox.verify()
        after = journal_rows(journal)
        assert {k: v[:5] for k, v in after.items()} == before
        assert all(v[5] is not None for v in after.values())
        assert journal.status_check("requeued")
        assert not journal.status_check("bogus")
        # the unique key survived: another payload under a processed key is a conflict, not a second run
        assert inbox.process(Message("p", SOURCE, b"x"), nothing) is Outcome.CONFLICT
        assert inbox.requeue(SOURCE, "d") is True
        assert inbox.get(SOURCE, "d").status is Status.REQUEUED
        # version 3: the outbox exists and a handler publishes into it
        assert journal.has_outbox()
        assert inbox.process(Message("n", SOURCE, b"new"), publish) is Outcome.PROCESSED
        assert inbox.outbox_stats().backlog == 1
        # versions 4 and 5 changed the hub's tables until the hub kept its own chain: the catalogue of the migrated
        # journal lists the journal, its version table, its outbox and its kept payloads (version 11; on SQLite with
        # the FTS5 tables of their search index and its mark), and nothing else
        name = journal.table.rpartition(".")[2]
        tables = {t for t in journal.tables() if not t.startswith((f"{name}_payloads_fts", f"{name}_payloads_mark"))}
        assert tables == {name, f"{name}_version", f"{name}_outbox", f"{name}_payloads"}


def test_unique_keys_name_only_the_key_columns(journal: Journal) -> None:
    """A unique index with an INCLUDE column (PostgreSQL) is reported by its key columns alone, so a table whose unique
    key is (a, b) INCLUDE (c) does not pass for one keyed on (a, b, c)."""
    if journal.dialect != "postgresql":
        pytest.skip("INCLUDE columns are PostgreSQL's")
    schema = journal.table.rpartition(".")[0]
    journal.admin(f"CREATE TABLE {journal.quote(f'{schema}.keyed')} (a int, b int, c int)", ())
    journal.admin(f"CREATE UNIQUE INDEX ON {journal.quote(f'{schema}.keyed')} (a, b) INCLUDE (c)", ())
    with Inbox(journal.target, consumer="accounting", table=journal.table) as inbox:
        assert inbox.unique_keys("keyed") == [["a", "b"]]


def test_the_migrated_schema_matches_a_fresh_one(journal: Journal, unique_name: str) -> None:
    """A migrated version-1 journal has the columns, key and status rule of a journal created at this version."""
    fresh = f"{journal.table}_fresh"
    with (
        Inbox(journal.target, consumer="accounting", table=journal.table) as migrated,
        Inbox(journal.target, consumer="accounting", table=fresh) as created,
    ):
        migrated.migrate()
        created.create_schema()
        names = [name.rpartition(".")[2] for name in (journal.table, fresh)]
        assert migrated.unique_keys(names[0]) == created.unique_keys(names[1])
        described = [_describe(journal, name) for name in (journal.table, fresh)]
        assert described[0] == described[1]
        outboxes = [_describe_outbox(journal, name) for name in (journal.table, fresh)]
        assert outboxes[0] == outboxes[1]


def _columns(journal: Journal, table: str) -> list[tuple[Any, ...]]:
    """Columns of `table` (schema-qualified but on SQLite) in order: name, type, nullability, default (and collation
    on MariaDB)."""
    if journal.dialect == "sqlite":
        return journal.admin(f"SELECT name, type, \"notnull\", dflt_value FROM pragma_table_info('{table}')", ())
    schema, name = table.split(".")
    if journal.dialect == "postgresql":  # a domain's name ends with the journal's: `<journal>_status`
        return journal.admin(
            "SELECT column_name, data_type, is_nullable, column_default,"
            " regexp_replace(domain_name, '^' || %s, '<journal>') FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (name, schema, name),
        )
    return journal.admin(
        "SELECT column_name, column_type, is_nullable, column_default, collation_name"
        " FROM information_schema.columns WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
        (schema, name),
    )


def _describe(journal: Journal, table: str) -> list[Any]:
    """Columns (name, type, nullability, default) and CHECK rules of `table`, in a form that ignores its name."""
    columns = _columns(journal, table)
    if journal.dialect == "postgresql":
        schema, name = table.split(".")
        checks = journal.admin(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'c' AND (conrelid = %s::regclass"
            " OR contypid = to_regtype(%s))",
            (f'"{schema}"."{name}"', f'"{schema}"."{name}_status"'),
        )
        return [columns, sorted(checks)]
    if journal.dialect == "mysql":
        schema, name = table.split(".")
        checks = journal.admin(
            "SELECT constraint_name, check_clause FROM information_schema.check_constraints"
            " WHERE constraint_schema = %s AND table_name = %s",
            (schema, name),
        )
        return [columns, sorted(checks)]
    (sql,) = journal.admin("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))[0]
    # SQLite keeps an added column's text as written after the definition ("last_conflict_at REAL\n, retry_at REAL")
    return [columns, "".join(sql[sql.index("CHECK") :].split())]


def _describe_outbox(journal: Journal, table: str) -> list[Any]:
    """Columns and indexes (their definitions) of `table`'s outbox, with the outbox's own name replaced."""
    columns = _columns(journal, f"{table}_outbox")
    if journal.dialect == "postgresql":
        schema, name = table.split(".")
        outbox = f"{name}_outbox"
        indexes = journal.admin(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = %s ORDER BY indexname",
            (schema, outbox),
        )
    elif journal.dialect == "mysql":
        schema, name = table.split(".")
        outbox = f"{name}_outbox"
        indexes = journal.admin(
            "SELECT index_name, seq_in_index, column_name, non_unique FROM information_schema.statistics"
            " WHERE table_schema = %s AND table_name = %s ORDER BY index_name, seq_in_index",
            (schema, outbox),
        )
        name_of = f"{name}_outbox_pending"
        indexes = [tuple("PENDING" if v == name_of else v for v in row) for row in indexes]
    else:
        outbox = f"{table}_outbox"
        indexes = journal.admin("SELECT sql FROM sqlite_master WHERE tbl_name = ? ORDER BY name", (outbox,))
    assert columns, f"no outbox beside {table}"
    return [[tuple(str(v).replace(outbox, "OUTBOX") for v in row) for row in rows] for rows in (columns, indexes)]


def test_a_newer_journal_is_refused(journal: Journal) -> None:
    """migrate() refuses a journal written by a newer edinbox instead of downgrading it."""
    version = journal.quote(f"{journal.table}_version")
    journal.admin(f"UPDATE {version} SET version = {SCHEMA_VERSION + 1}", ())
    with (
        Inbox(journal.target, consumer="accounting", table=journal.table) as inbox,
        pytest.raises(SchemaError, match="newer than this edinbox"),
    ):
        inbox.migrate()


def test_concurrent_migrations_apply_each_step_once(journal: Journal) -> None:
    """Two processes migrating at once: the schema lock lets one apply the steps, the other finds nothing to do."""
    results: list[list[int]] = []

    def migrate() -> None:
        with Inbox(journal.target, consumer="accounting", table=journal.table) as inbox:
            results.append(inbox.migrate())

    in_threads(migrate, migrate)
    assert sorted(results) == [[], sorted(MIGRATIONS)]


def test_async_inbox_migrates_too(journal: Journal) -> None:
    """AsyncInbox.migrate() upgrades the version-1 journal as Inbox.migrate() does."""

    async def main() -> list[int]:
        async with AsyncInbox(journal.target, consumer="accounting", table=journal.table) as inbox:
            applied = await inbox.migrate()
            await inbox.verify()
            return applied

    assert asyncio.run(main()) == sorted(MIGRATIONS)
