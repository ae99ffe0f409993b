"""The library owns the journal, its outbox and their version table, and nothing else: `create_schema()` makes no
hub table (read from the catalogue), the library's statements name none, and an application (the hub) adds its own
statements through the public hook (`edinbox.Application`), never replacing one of the library's."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from edinbox import Application, ConfigurationError, Inbox, SchemaError, StoreError
from edinbox.hub.database._journal import HUB
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


LIBRARY = {"inbox", "inbox_version", "inbox_outbox", "inbox_payloads"}
"""The library's tables: the journal, its version table, its outbox and its kept payloads (the message store)."""


def _tables(found: set[str]) -> set[str]:
    """The tables `found`, less the FTS5 tables of SQLite's search index over the kept payloads and its mark (the
    library's too)."""
    return {name for name in found if not name.startswith(("inbox_payloads_fts", "inbox_payloads_mark"))}


def test_create_schema_makes_the_journal_its_outbox_version_and_payloads_tables_only(created: set[str]) -> None:
    """The catalogue of a schema the library created lists the journal, its version table, its outbox and its kept
    payloads' table: no hub table (no invoices, counters, answers or console audit)."""
    assert _tables(created) == LIBRARY


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_librarys_statements_name_no_hub_table(dialect: str) -> None:
    """The library's statements (journal, schema, outbox, migrations, applications' versions) use no table but the
    journal's own, and none is the hub's; the hub's come only with its Application, its migrations too."""
    library = load_queries(dialect, *FILES)
    assert not [name for name in library if name.startswith(("hub_", "console_"))]
    used = set().union(*(placeholders(text) for text in library.values()))
    assert not {p for p in used if p.startswith(("invoices", "rejected", "hub_", "console_"))}
    with_hub = statements(dialect, (HUB,))
    assert {"hub_count", "hub_totals", "console_search"} <= with_hub.keys()
    assert not {"hub_count", "console_search"} & statements(dialect, ()).keys()
    assert {"hub:v2_answers", "hub:v3_rename_invoices"} <= with_hub.keys()


def test_an_application_cannot_replace_a_library_statement(tmp_path: Path) -> None:
    """An application's statement named like one of the library's is refused (ConfigurationError naming both),
    so no application changes what the journal runs."""
    (tmp_path / "sqlite").mkdir()
    (tmp_path / "sqlite" / "app.sql").write_text("-- name: get\nSELECT 1\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="application 'shop': statement 'get' is named twice"):
        Inbox("sqlite://", consumer="app", applications=[Application("shop", tmp_path, ("app",))])


SHOP = {
    "shop": "-- name: shop_create_orders\nCREATE TABLE IF NOT EXISTS {shop_orders} (id INTEGER NOT NULL)\n",
    "broken": "-- name: shop_create_again\nCREATE TABLE {shop_orders} (id INTEGER NOT NULL)\n",
    "migrations": "-- name: v2_orders_total\nALTER TABLE {shop_orders} ADD COLUMN total INTEGER\n",
}
"""An application's statement files (the same text on every dialect): its table, a second CREATE of that table that
fails (a failure injected after the first), and a migration to its version 2."""


def _shop(folder: Path, *, create: tuple[str, ...], migrations: dict[int, str] | None = None) -> Application:
    """An application "shop" whose statement files are written under `folder` for every dialect."""
    for dialect in DIALECTS:
        (folder / dialect).mkdir(parents=True, exist_ok=True)
        for file, text in SHOP.items():
            (folder / dialect / f"{file}.sql").write_text(text, encoding="utf-8")
    return Application("shop", folder, ("shop", "broken"), create=create, migrations=migrations or {})


@pytest.fixture(params=["postgresql", "mariadb", "sqlite"])
def place(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[tuple[str, str, Any]]:
    """(database URL, journal table, a function listing the tables there) in a fresh schema (PostgreSQL), database
    (MariaDB) or file (SQLite), dropped after."""
    kind = request.param
    if kind == "sqlite":
        path = tmp_path / "app.db"

        def sqlite_tables() -> set[str]:
            with sqlite3.connect(path) as connection:
                query = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                return {row[0] for row in connection.execute(query)}

        yield f"sqlite:///{path}", "inbox", sqlite_tables
        return
    query = "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
    if kind == "mariadb":
        require_service("mariadb")

        def mariadb_tables() -> set[str]:
            connection = pymysql.connect(host="127.0.0.1", port=3306, user="root")
            with connection, connection.cursor() as cursor:
                cursor.execute(query, (unique_name,))
                return {row[0] for row in cursor.fetchall()}

        try:
            yield MYSQL_URL, f"{unique_name}.inbox", mariadb_tables
        finally:
            drop_database(unique_name)
        return
    url = str(request.getfixturevalue("postgres_url"))

    def postgres_tables() -> set[str]:
        with psycopg.connect(url) as connection:
            return {row[0] for row in connection.execute(query, (unique_name,))}

    try:
        yield url, f"{unique_name}.inbox", postgres_tables
    finally:
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{unique_name}" CASCADE'.encode())


def test_a_create_schema_that_fails_midway_leaves_nothing_and_a_second_completes(
    place: tuple[str, str, Any], tmp_path: Path
) -> None:
    """An application whose second create statement fails makes create_schema() raise: on PostgreSQL and SQLite
    (one transaction) nothing at all is left, not even the journal; on MariaDB (each DDL statement commits) what
    was made stays. Either way a second create_schema() with the statement fixed completes the journal and the
    application at its version, and verify() passes."""
    url, table, tables = place
    broken = _shop(tmp_path / "shop", create=("shop_create_orders", "shop_create_again"))
    with Inbox(url, consumer="app", table=table, applications=[broken]) as inbox, pytest.raises(StoreError):
        inbox.create_schema()
    if not url.startswith("mysql"):
        assert tables() == set()
    fixed = _shop(tmp_path / "shop", create=("shop_create_orders",))
    with Inbox(url, consumer="app", table=table, applications=[fixed]) as inbox:
        inbox.create_schema()
        inbox.verify()
    assert _tables(tables()) == {*LIBRARY, "edinbox_applications", "shop_orders"}


def test_an_applications_chain_migrates_it_and_only_where_it_is(tmp_path: Path) -> None:
    """An application at version 1 is refused by verify() and create_schema() once its code is at version 2 ("run
    `edinbox migrate`"); migrate() runs its step after the journal's and records it, once; a journal beside which
    the application never made its tables gets none of them from migrate()."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    with Inbox(url, consumer="app", applications=[_shop(tmp_path / "v1", create=("shop_create_orders",))]) as inbox:
        inbox.create_schema()
    upgraded = _shop(tmp_path / "v2", create=("shop_create_orders",), migrations={2: "the orders' total"})
    with Inbox(url, consumer="app", applications=[upgraded]) as inbox:
        with pytest.raises(SchemaError, match="'shop' is at schema version 1, this edinbox needs 2: run `edinbox migr"):
            inbox.verify()
        with pytest.raises(SchemaError, match="run `edinbox migrate`"):
            inbox.create_schema()
        inbox.verify(applications=False)  # the journal alone is fine
        assert inbox.migrations() == {"edinbox": [], "shop": [2]}
        assert inbox.migrations() == {"edinbox": [], "shop": []}
        inbox.verify()
        inbox.transaction(lambda tx: tx.connection.execute("INSERT INTO shop_orders (id, total) VALUES (1, 5)"))
    other = f"sqlite:///{tmp_path / 'other.db'}"
    with Inbox(other, consumer="app") as inbox:
        inbox.create_schema()
    with Inbox(other, consumer="app", applications=[upgraded]) as inbox:
        assert inbox.migrations() == {"edinbox": []}
        assert inbox.unique_keys("shop_orders") is None
        assert inbox.unique_keys("edinbox_applications") is None
        with pytest.raises(SchemaError, match="'shop' has no tables beside this journal: run create_schema"):
            inbox.verify()


def test_an_application_with_statements_only_gets_no_version_row(tmp_path: Path) -> None:
    """An application that only adds statements (no create, migrations or legacy table) has no schema of its own:
    create_schema() makes no versions table for it, verify() and migrate() pass it by, and its statements run."""
    shop = Application("shop", _shop(tmp_path / "shop", create=()).folder, ("shop",))
    with Inbox(f"sqlite:///{tmp_path / 'app.db'}", consumer="app", applications=[shop]) as inbox:
        inbox.create_schema()
        inbox.verify()
        assert inbox.migrations() == {"edinbox": []}
        assert inbox.unique_keys("edinbox_applications") is None
        inbox.transaction(lambda tx: tx.unit.run("shop_create_orders", {}))
        assert inbox.unique_keys("shop_orders") == []
