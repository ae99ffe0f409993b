"""Migrations 13 and 14 of the message store: a kept payloads' table made by version 11 (`schema_v11/`, its frozen
DDL, a payload kept and indexed in it; version 12 left it as it was) is taken to version 13, where the words are
indexed after the settling transaction, and on to 14 (SQLite's index keeps no copy of the words; `schema_v13/`):
what was kept and indexed before stays found, what is kept after is found too, and the purge still cleans both."""

from __future__ import annotations

import sqlite3
import string
import zlib
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from edinbox import Inbox, Message
from services import MYSQL_URL, POSTGRES_URL, drop_database, require_service

FIXTURES = Path(__file__).parent
OLD = b"UNH+1+ORDERS:D:96A:UN'BGM+220+PO-77001+9'"
"""The payload kept (and indexed) while the journal was at version 11."""
Admin = Callable[[str, tuple[Any, ...]], list[Any]]


class Store:
    """A journal's database with admin SQL beside it, and how that dialect names the kept payloads' tables."""

    def __init__(self, dialect: str, target: str, table: str, admin: Admin) -> None:
        self.dialect = dialect
        self.target = target
        self.table = table
        self.admin = admin

    def quote(self, *parts: str) -> str:
        """An identifier (qualified by its parts), quoted for this dialect."""
        mark = "`" if self.dialect == "mysql" else '"'
        return ".".join(f"{mark}{part}{mark}" for part in parts)

    def name(self, placeholder: str) -> str:
        """What `{placeholder}` of the frozen DDL stands for: a table beside the journal (in its schema), an index or
        trigger of its own (unqualified), or a table's name as a string literal."""
        schema, _, journal = self.table.rpartition(".")
        if placeholder.endswith("_name"):
            return "'" + f"{journal}_{placeholder.removesuffix('_name')}" + "'"
        if placeholder.endswith("_index") or placeholder.startswith("payloads_on_"):
            return self.quote(f"{journal}_{placeholder}")
        return self.quote(*filter(None, (schema, f"{journal}_{placeholder}")))

    def build(self, version: int) -> None:
        """Replace the kept payloads' tables with those of `version` (frozen DDL), empty."""
        self.admin(f"DROP TABLE {self.name('payloads')}", ())
        if self.dialect == "sqlite":
            self.admin(f"DROP TABLE {self.name('payloads_fts')}", ())
            self.admin(f"DROP TABLE {self.name('payloads_mark')}", ())
        text = (FIXTURES / f"schema_v{version}" / f"{self.dialect}.sql").read_text()
        body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
        fields = {field for _, field, _, _ in string.Formatter().parse(body) if field}
        for statement in body.format(**{field: self.name(field) for field in fields}).split("\n\n"):
            if statement.strip():
                self.admin(statement, ())

    def keep_v11(self, message_id: str, payload: bytes, words: str) -> None:
        """A row as version 11 kept it: its search text written (and indexed) in the same statement."""
        mark = "?" if self.dialect == "sqlite" else "%s"
        column, value = ("text", mark)
        if self.dialect == "postgresql":
            column, value = "words", f"strip(to_tsvector('simple', {mark}))"
        kept_at = {"sqlite": ", kept_at", "postgresql": "", "mysql": ""}[self.dialect]
        now = {"sqlite": f", {mark}", "postgresql": "", "mysql": ""}[self.dialect]
        params: tuple[Any, ...] = ("orders", "acme", message_id, "fp", "0" * 64, len(payload), "application/EDIFACT")
        params += (False, zlib.compress(payload), words) + ((0.0,) if self.dialect == "sqlite" else ())
        self.admin(
            f"INSERT INTO {self.name('payloads')} (consumer, source, message_id, fingerprint, sha256, size, "
            f"content_type, truncated, body, {column}{kept_at}) VALUES ({', '.join([mark] * 9)}, {value}{now})",
            params,
        )

    def waiting(self) -> int:
        """The kept payloads a search cannot find yet: above SQLite's mark, with no words elsewhere."""
        if self.dialect == "sqlite":
            mark = f"(SELECT indexed_to FROM {self.name('payloads_mark')})"
            return int(self.admin(f"SELECT count(*) FROM {self.name('payloads')} WHERE rowid > {mark}", ())[0][0])
        words = "words" if self.dialect == "postgresql" else "text"
        return int(self.admin(f"SELECT count(*) FROM {self.name('payloads')} WHERE {words} IS NULL", ())[0][0])

    def set_version(self, version: int) -> None:
        """Write `version` into the journal's version table."""
        schema, _, journal = self.table.rpartition(".")
        self.admin(f"UPDATE {self.quote(*filter(None, (schema, f'{journal}_version')))} SET version = {version}", ())


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def store(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[Store]:
    """A database with admin SQL on each dialect (a schema, or a database, of its own), dropped after."""
    if request.param == "sqlite":
        path = tmp_path / "journal.db"
        connection = sqlite3.connect(path, isolation_level=None)
        yield Store("sqlite", f"sqlite:///{path}", "inbox", lambda sql, p: connection.execute(sql, p).fetchall())
        connection.close()
        return
    if request.param == "postgresql":
        require_service("postgres")
        admin = psycopg.connect(POSTGRES_URL, autocommit=True)
        admin.execute(f'CREATE SCHEMA "{unique_name}"'.encode())

        def run_pg(sql: str, params: tuple[Any, ...]) -> list[Any]:
            cursor = admin.execute(sql.encode(), params)
            return cursor.fetchall() if cursor.description else []

        yield Store("postgresql", POSTGRES_URL, f"{unique_name}.inbox", run_pg)
        admin.execute(f'DROP SCHEMA "{unique_name}" CASCADE'.encode())
        admin.close()
        return
    require_service("mariadb")
    connection = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)

    def run_mysql(sql: str, params: tuple[Any, ...]) -> list[Any]:
        with connection.cursor() as cursor:
            cursor.execute(sql, params or None)
            return list(cursor.fetchall())

    run_mysql(f"CREATE DATABASE `{unique_name}`", ())
    yield Store("mysql", MYSQL_URL, f"{unique_name}.inbox", run_mysql)
    connection.close()
    drop_database(unique_name)


def test_version_13_keeps_what_version_11_kept_and_indexes_after_the_commit(store: Store) -> None:
    """A payload kept and indexed at version 11 (or 12) is still kept and found after migration 13 (alone), a payload
    kept after it is written without its words (SQLite) and found once a search indexed it, the purge
    removes the old one with its index entry, and the step holds when it runs again (PostgreSQL writes the words in
    the settling transaction since, as MariaDB does)."""
    with Inbox(store.target, consumer="orders", table=store.table, keep_payloads=True) as inbox:
        inbox.create_schema()
        inbox.process(Message("old", "acme", OLD), lambda tx, m: None)
        store.build(11)
        store.keep_v11("old", OLD, "UNH ORDERS 96A BGM 220 77001")
        store.set_version(12)

        assert inbox.migrate() == [13, 14]
        inbox.verify()
        kept = inbox.payload("acme", "old")
        assert kept is not None
        assert kept.payload == OLD
        assert [f.message_id for f in inbox.search("PO-77001")] == ["old"]

        inbox.process(Message("new", "acme", b"BGM+220+PO-77002+9'"), lambda tx, m: None)
        assert store.waiting() == (1 if store.dialect == "sqlite" else 0)  # the others index as they settle
        assert [f.message_id for f in inbox.search("PO-77002")] == ["new"]
        assert inbox.index_payloads() == 0  # the search indexed it: nothing waits

        _age(store, "old", days=40)
        inbox.forget("acme", "old")
        assert inbox.purge(timedelta(days=30)) == 1  # the kept payload whose journal row is gone
        assert inbox.search("PO-77001") == []
        if store.dialect == "sqlite":  # the full-text index agrees with its content table (raises otherwise)
            fts = store.name("payloads_fts")
            store.admin(f"INSERT INTO {fts} ({fts}) VALUES ('integrity-check')", ())

        store.set_version(12)
        assert inbox.migrate() == [13, 14]  # holds when it runs again
        assert [f.message_id for f in inbox.search("PO-77002")] == ["new"]


def _age(store: Store, message_id: str, *, days: int) -> None:
    """Move the kept payload `message_id` `days` into the past."""
    shift = {
        "sqlite": f"kept_at - {days * 86400}",
        "postgresql": f"kept_at - interval '{days} days'",
        "mysql": f"kept_at - INTERVAL {days} DAY",
    }[store.dialect]
    mark = "?" if store.dialect == "sqlite" else "%s"
    store.admin(f"UPDATE {store.name('payloads')} SET kept_at = {shift} WHERE message_id = {mark}", (message_id,))


def test_version_14_indexes_sqlite_rows_again_from_their_bodies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SQLite journal at version 13 (`schema_v13/`: the words stored in the rows, the index reading them there)
    holding an indexed row and a row still waiting (its bytes as received) is taken to version 14, a row a batch:
    both give back their bytes and are found by their words, the rows keep no words, the index is consistent, and
    the purge takes the old one out of it."""
    import edinbox._payloads

    monkeypatch.setattr(edinbox._payloads, "FTS_BATCH_BYTES", 1)  # each row a batch of its own
    path = tmp_path / "journal.db"
    connection = sqlite3.connect(path, isolation_level=None)
    store = Store("sqlite", f"sqlite:///{path}", "inbox", lambda sql, p: connection.execute(sql, p).fetchall())
    waiting = b"BGM+220+PO-77003+9'" * 100  # over a kilobyte: packed by the migration
    with Inbox(store.target, consumer="orders", table=store.table, keep_payloads=True) as inbox:
        inbox.create_schema()
        inbox.process(Message("old", "acme", OLD), lambda tx, m: None)
        inbox.process(Message("waiting", "acme", waiting), lambda tx, m: None)
        store.build(13)
        store.keep_v11("old", OLD, "UNH ORDERS 96A BGM 220 77001")
        store.admin(
            f"INSERT INTO {store.name('payloads')} (consumer, source, message_id, fingerprint, sha256, size, "
            "content_type, truncated, body, kept_at) VALUES ('orders', 'acme', 'waiting', 'fp', ?, ?, 'x', 0, ?, 0)",
            ("0" * 64, len(waiting), waiting),
        )
        store.set_version(13)

        assert inbox.migrate() == [14]
        inbox.verify()
        for message_id, payload in (("old", OLD), ("waiting", waiting)):
            kept = inbox.payload("acme", message_id)
            assert kept is not None
            assert kept.payload == payload
        assert store.waiting() == 0
        assert [f.message_id for f in inbox.search("PO-77001")] == ["old"]
        assert [f.message_id for f in inbox.search("PO-77003")] == ["waiting"]
        assert store.admin(f"SELECT count(*) FROM {store.name('payloads')} WHERE text IS NOT NULL", ()) == [(0,)]
        fts = store.name("payloads_fts")
        store.admin(f"INSERT INTO {fts} ({fts}) VALUES ('integrity-check')", ())

        _age(store, "old", days=40)
        inbox.forget("acme", "old")
        assert inbox.purge(timedelta(days=30)) == 1
        assert inbox.search("PO-77001") == []
        assert store.admin(f"SELECT rowid FROM {fts} WHERE {fts} MATCH '77001 OR ORDERS'", ()) == []  # words gone
        store.admin(f"INSERT INTO {fts} ({fts}) VALUES ('integrity-check')", ())
    connection.close()
