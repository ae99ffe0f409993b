"""A hub made before the hub kept a migration chain of its own (journal version 10, the hub's tables named `invoices`,
`rejected`, `hub_*` and `console_audit`, from the frozen DDL in `schema_hub_v1/`, with rows in each) is refused by the
hub until `edinbox migrate`, which upgrades it in place: the tables renamed `edinbox_hub_*` with every row kept,
the hub's version recorded, and nothing left under an old name."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from cli.test_cli import cli
from edinbox import Inbox, Message
from edinbox.hub.database._journal import HUB
from edinbox.hub.database._tables import TABLES
from services import MYSQL_URL, drop_database, require_service

FROZEN = Path(__file__).parent / "schema_hub_v1"

Run = Callable[[str, tuple[Any, ...]], list[Any]]

OLD = ("invoices", "rejected", "hub_counters", "hub_control_numbers", "hub_acknowledgments", "hub_answers")
"""The old names of the hub's tables that hold rows here, each renamed `edinbox_hub_<name without hub_>`."""

ROWS = {
    "invoices": (
        "seller, number, kind, issue_date, buyer, currency, total, tax_total, {lines}, consumer, source, message_id",
        ("ACME", "INV-1", "invoice", "2026-01-02", "HUB", "EUR", "12.5000", "2.5000", 1, "hub", "X12:ACME", "905"),
    ),
    "rejected": ("consumer, fingerprint, delivery, reason, payload", ("hub", "f1", "d1", "not EDI", b"junk")),
    "hub_counters": ("consumer, outcome, n, shard", ("hub", "processed", 7, 3)),
    "hub_control_numbers": ("partner, n", ("ZZ:ACME", 41)),
    "hub_acknowledgments": (
        "consumer, source, message_id, kind, duplicate, partner, control_number, outbox_key",
        ("hub", "X12:ACME", "905", "997", False, "ZZ:ACME", "000000041", "ack-41"),
    ),
    "hub_answers": ("consumer, source, message_id, delivery, answer", ("hub", "X12:ACME", "905", "dv1", "notified")),
}
"""A row for each table, as (columns, values); `{lines}` is quoted on MariaDB (a reserved word there)."""


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def old_hub(request: pytest.FixtureRequest, tmp_path: Path, unique_name: str) -> Iterator[tuple[list[str], Run, str]]:
    """(the `--db/--table` arguments, admin SQL on the database, its dialect) of a hub of journal version 10 built
    from the frozen DDL, holding a journal row and one row in each hub table."""
    kind = request.param
    if kind == "sqlite":
        path = tmp_path / "hub.db"
        connection = sqlite3.connect(path, isolation_level=None)
        url, table, schema = f"sqlite:///{path}", "inbox", ""
        yield from _built(url, table, schema, lambda q, p: connection.execute(q, p).fetchall(), "sqlite")
        connection.close()
        return
    if kind == "mariadb":
        require_service("mariadb")
        my = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)

        def run_mysql(q: str, p: tuple[Any, ...]) -> list[Any]:
            with my.cursor() as cursor:
                cursor.execute(q.replace("?", "%s"), p or None)
                return list(cursor.fetchall())

        try:
            yield from _built(MYSQL_URL, f"{unique_name}.inbox", unique_name, run_mysql, "mysql")
        finally:
            my.close()
            drop_database(unique_name)
            drop_database(f"{unique_name}f")  # a fresh hub's, beside it (`_fresh`)
        return
    url = str(request.getfixturevalue("postgres_url"))
    pg = psycopg.connect(url, autocommit=True)

    def run_pg(q: str, p: tuple[Any, ...]) -> list[Any]:
        cursor = pg.execute(q.replace("?", "%s").encode(), p)
        return cursor.fetchall() if cursor.description else []

    try:
        yield from _built(url, f"{unique_name}.inbox", unique_name, run_pg, "postgresql")
    finally:
        for schema in (unique_name, f"{unique_name}f"):  # and a fresh hub's, beside it (`_fresh`)
            pg.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())
        pg.close()


def _built(url: str, table: str, schema: str, run: Run, dialect: str) -> Iterator[tuple[list[str], Run, str]]:
    """Make the journal (the library's layout is version 10's), then the hub's tables from the frozen DDL, with rows."""
    with Inbox(url, consumer="hub", table=table) as inbox:
        inbox.create_schema()
        inbox.process(Message("905", "X12:ACME", b"ISA..."), lambda tx, message: None)
    quote = (lambda n: f"`{n}`") if dialect == "mysql" else (lambda n: f'"{n}"')
    beside = (lambda n: f"{quote(schema)}.{quote(n)}") if schema else quote
    names = {name: beside(name) for name in (*OLD, "console_audit")}
    names["table"] = beside("inbox")
    names.update({f"{i}_index": quote(f"inbox_{i}_index") for i in ("received", "status", "control", "invoice_number")})
    names["invoice_message_index"] = quote("inbox_invoice_message_index")
    text = (FROZEN / f"{dialect}.sql").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    for statement in body.format(**names).split(";"):
        run(statement, ())
    if dialect == "postgresql":  # the partner search's trigram index, as `edinbox init` made it until version 8
        run("CREATE EXTENSION IF NOT EXISTS pg_trgm", ())
        run(f"CREATE INDEX inbox_partner_index ON {names['table']} USING gin (source gin_trgm_ops)", ())
    for old, (columns, values) in ROWS.items():
        listed = columns.format(lines=quote("lines") if dialect == "mysql" else "lines")
        marks = ", ".join("?" for _ in values)
        run(f"INSERT INTO {names[old]} ({listed}) VALUES ({marks})", values)
    yield ["--db", url, "--table", table, "--consumer", "hub"], run, dialect


def _tables(run: Run, dialect: str, schema: str) -> set[str]:
    """The tables the catalogue lists in the journal's schema (database, file)."""
    if dialect == "sqlite":
        query, params = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'", ()
    else:
        query, params = "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", (schema,)
    return {str(row[0]) for row in run(query, params)}


def test_migrate_renames_the_hubs_tables_with_their_rows(old_hub: tuple[list[str], Run, str]) -> None:
    """`stats` on the old hub names `edinbox migrate`; `migrate` applies the hub's versions from 2 (the journal has
    nothing to do), once; then every row is found under the new names, `stats` and `doctor` read them, the catalogue
    holds the journal's tables, the applications' versions and the `edinbox_hub_*` tables only, and each of those has
    the columns and unique keys of a hub `edinbox init` makes now."""
    db, run, dialect = old_hub
    schema = db[3].rpartition(".")[0]
    refused = cli("stats", *db)
    assert refused.exit_code == 1
    assert "run `edinbox migrate`" in refused.output
    migrated = cli("migrate", *db, "--json")
    assert migrated.exit_code == 0, migrated.output
    applied = json.loads(migrated.output)
    assert applied["applied"] == []
    assert [step["version"] for step in applied["hub"]["applied"]] == [2, 3, 4, 5, 6, 7, 8]
    if dialect == "postgresql":  # version 8 dropped the trigram index; the search indexes stay
        indexes = {r[0] for r in run("SELECT indexname FROM pg_indexes WHERE schemaname = ?", (schema,))}
        assert "inbox_partner_index" not in indexes
        assert "inbox_received_index" in indexes
    again = json.loads(cli("migrate", *db, "--json").output)
    assert (again["applied"], again["hub"]["applied"]) == ([], [])
    stats = json.loads(cli("stats", *db, "--json").output)
    assert (stats["hub"], stats["invoices"], stats["rejected_payloads"], stats["processed"]) == (True, 1, 1, 7)
    doctor = {c["check"]: c["status"] for c in json.loads(cli("doctor", *db, "--json").output)}
    assert doctor["journal"] == doctor["invoice key"] == "ok"
    quote = (lambda n: f"`{n}`") if dialect == "mysql" else (lambda n: f'"{n}"')
    for old in ROWS:
        new = "edinbox_hub_" + old.removeprefix("hub_")
        found = run(f"SELECT count(*) FROM {f'{quote(schema)}.' if schema else ''}{quote(new)}", ())
        assert found == [(1,)], new
    control = f"{f'{quote(schema)}.' if schema else ''}{quote('edinbox_hub_control_numbers')}"
    assert run(f"SELECT partner, n FROM {control}", ()) == [("ZZ:ACME", 41)]
    sqlite_only = ("inbox_payloads_fts", "inbox_payloads_mark")  # SQLite's FTS5 tables and their mark
    tables = {t for t in _tables(run, dialect, schema) if not t.startswith(sqlite_only)}
    assert tables == {"inbox", "inbox_version", "inbox_outbox", "inbox_payloads", "edinbox_applications", *TABLES}
    versions = f"{f'{quote(schema)}.' if schema else ''}{quote('edinbox_applications')}"
    assert run(f"SELECT name, version FROM {versions}", ()) == [("hub", HUB.version)]
    assert _layout(db, run, dialect) == _layout(_fresh(db, dialect), run, dialect)


def _fresh(db: list[str], dialect: str) -> list[str]:
    """`edinbox init` of a new hub beside the old one (another SQLite file, PostgreSQL schema or MariaDB database);
    its `--db/--table` arguments."""
    url, table = db[1], db[3]
    if dialect == "sqlite":
        url = url.replace("hub.db", "fresh.db")
    else:
        table = table.replace(".inbox", "f.inbox")
    fresh = [*db[:1], url, "--table", table, *db[4:]]
    done = cli("init", *fresh)
    assert done.exit_code == 0, done.output
    return fresh


def _layout(db: list[str], run: Run, dialect: str) -> dict[str, Any]:
    """Each hub table's columns (name, type, nullability, and default but a sequence's) and unique keys."""
    url, table = db[1], db[3]
    schema = table.rpartition(".")[0]
    layout: dict[str, Any] = {}
    with Inbox(url, consumer="hub", table=table) as inbox:
        for name in TABLES:
            if dialect == "sqlite":
                with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
                    query = 'SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)'
                    columns = [tuple(row) for row in connection.execute(query, (name,))]
            else:
                kind = "column_type" if dialect == "mysql" else "data_type"
                query = (
                    f"SELECT column_name, {kind}, is_nullable, column_default FROM information_schema.columns"
                    " WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position"
                )
                columns = [
                    (*row[:3], None if "nextval" in str(row[3]) else row[3]) for row in run(query, (schema, name))
                ]
            layout[name] = (columns, sorted(inbox.unique_keys(name) or []))
    return layout
