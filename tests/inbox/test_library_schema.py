"""The library owns the journal, its outbox and their version table, and nothing else: `create_schema()` makes no
hub table (read from the catalogue), the library's statements name none, and an application (the hub) adds its own
statements through the public hook (`edinbox.Application`), never replacing one of the library's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pymysql
import pytest

from edinbox import Application, ConfigurationError, Inbox
from edinbox.hub._parts import HUB
from edinbox.stores._queries import FILES, load_queries, placeholders, statements
from services import MYSQL_URL, drop_database, require_service

DIALECTS = ("postgresql", "mysql", "sqlite")


@pytest.fixture(params=["postgresql", "mariadb", "sqlite"])
def created(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[set[str]]:
    """The tables the catalogue lists in a fresh schema (PostgreSQL), database (MariaDB) or file (SQLite) once
    `create_schema()` made a journal there."""
    kind = request.param
    if kind == "sqlite":
        path = tmp_path / "app.db"
        with Inbox(f"sqlite:///{path}", consumer="app") as inbox:
            inbox.create_schema()
            rows = inbox.read(
                lambda tx: tx.connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                )
            )
            yield {row[0] for row in rows.fetchall()}
        return
    url = str(request.getfixturevalue("postgres_url")) if kind == "postgresql" else MYSQL_URL
    if kind == "mariadb":
        require_service("mariadb")
    with Inbox(url, consumer="app", table=f"{unique_name}.inbox") as inbox:
        inbox.create_schema()
    try:
        if kind == "postgresql":
            with psycopg.connect(url) as connection:
                query = "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
                yield {row[0] for row in connection.execute(query, (unique_name,))}
        else:
            connection = pymysql.connect(host="127.0.0.1", port=3306, user="root")
            with connection, connection.cursor() as cursor:
                cursor.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (unique_name,)
                )
                yield {row[0] for row in cursor.fetchall()}
    finally:
        if kind == "postgresql":
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute(f"DROP SCHEMA {unique_name} CASCADE".encode())
        else:
            drop_database(unique_name)


def test_create_schema_makes_the_journal_its_outbox_and_version_table_only(created: set[str]) -> None:
    """The catalogue of a schema the library created lists the journal, its version table and its outbox: no hub
    table (no invoices, counters, answers or console audit)."""
    assert created == {"inbox", "inbox_version", "inbox_outbox"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_librarys_statements_name_no_hub_table(dialect: str) -> None:
    """The library's statements (journal, schema, outbox) use no table but the journal's own, and none is the hub's;
    the hub's come only with its Application."""
    library = load_queries(dialect, *(f for f in FILES if f != "migrations"))
    assert not [name for name in library if name.startswith(("hub_", "console_"))]
    used = set().union(*(placeholders(text) for text in library.values()))
    assert not {p for p in used if p.startswith(("invoices", "rejected", "hub_", "console_"))}
    with_hub = statements(dialect, (HUB,))
    assert {"hub_count", "hub_totals", "console_search"} <= with_hub.keys()
    assert not {"hub_count", "console_search"} & statements(dialect, ()).keys()


def test_an_application_cannot_replace_a_library_statement(tmp_path: Path) -> None:
    """An application's statement named like one of the library's is refused (ConfigurationError naming both),
    so no application changes what the journal runs."""
    (tmp_path / "sqlite").mkdir()
    (tmp_path / "sqlite" / "app.sql").write_text("-- name: get\nSELECT 1\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="application 'shop': statement 'get' is named twice"):
        Inbox("sqlite://", consumer="app", applications=[Application("shop", tmp_path, ("app",))])
