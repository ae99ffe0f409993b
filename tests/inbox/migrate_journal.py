"""The version-1 journals the migration tests upgrade: built from the frozen DDL (`schema_v1/`), with admin SQL
beside them, and the handlers those tests run on them."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from edinbox import Message, Tx
from services import MYSQL_URL, drop_database, require_service

FIXTURES = Path(__file__).parent / "schema_v1"
MARK = {"postgresql": "%s", "mysql": "%s", "sqlite": "?"}
"""Each dialect's parameter marker in admin SQL."""
SOURCE = "X12:ZZ:ACME>ZZ:HUB"

# (message_id, status, attempts, payload, conflict_payload) of the rows the version-1 journal holds
ROWS = [
    ("p", "processed", 1, None, None),
    ("f", "failed", 2, None, None),
    ("d", "dead", 5, b"dead payload", None),
    ("c", "conflict", 1, None, b"corrected payload"),
]


MYSQL_CHECK_FAILED = 4025
"""MariaDB's error number for a row a CHECK constraint refuses."""


class Journal:
    """A version-1 journal in one database, built from the frozen DDL, with admin SQL beside it."""

    def __init__(self, dialect: str, target: str, table: str, admin: Callable[[str, tuple[Any, ...]], list[Any]]):
        self.dialect = dialect
        self.target = target
        self.table = table
        self.admin = admin

    def build(self) -> None:
        """Run the frozen version-1 DDL on the journal's names (quoted), then insert one row per status."""
        names = {
            "table": self.quoted,
            "key_index": self.quote(f"{self.table.rpartition('.')[2]}_key"),
            "version_table": self.quote(f"{self.table}_version"),
        }
        text = (FIXTURES / f"{self.dialect}.sql").read_text()
        body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
        for statement in body.format(**names).split(";"):
            self.admin(statement, ())
        mark, now = MARK[self.dialect], self.now
        for message_id, status, attempts, payload, conflict in ROWS:
            self.admin(
                f"INSERT INTO {names['table']} (consumer, source, message_id, fingerprint, status, attempts, payload,"
                f" conflicts, conflict_fingerprint, conflict_payload, received_at, settled_at)"
                f" VALUES ({', '.join([mark] * 10)}, {now}, {now})",
                (
                    "accounting",
                    SOURCE,
                    message_id,
                    f"fp-{message_id}",
                    status,
                    attempts,
                    payload,
                    1 if conflict else 0,
                    "fp-corrected" if conflict else None,
                    conflict,
                ),
            )

    def status_check(self, status: str) -> bool:
        """Whether the table's CHECK lets a row of `status` in (the row is rolled back or removed)."""
        try:
            self.admin(
                f"INSERT INTO {self.quoted} (consumer, source, message_id, fingerprint, status, received_at)"
                f" VALUES ('check', 's', 'm', 'f', {MARK[self.dialect]}, {self.now})",
                (status,),
            )
        except (psycopg.errors.CheckViolation, sqlite3.IntegrityError):
            return False
        except pymysql.MySQLError as exc:
            if exc.args[0] != MYSQL_CHECK_FAILED:
                raise
            return False
        self.admin(f"DELETE FROM {self.quoted} WHERE consumer = 'check'", ())
        return True

    def has_outbox(self) -> bool:
        """Whether the journal's outbox table (`<journal>_outbox`, added by version 3) exists."""
        if self.dialect == "postgresql":
            return self.admin("SELECT to_regclass(%s)", (f'{self.quoted[:-1]}_outbox"',))[0][0] is not None
        if self.dialect == "mysql":
            schema, name = self.table.split(".")
            found = "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s"
            return bool(self.admin(found, (schema, f"{name}_outbox")))
        return bool(self.admin("SELECT 1 FROM sqlite_master WHERE name = ?", (f"{self.table}_outbox",)))

    def tables(self) -> set[str]:
        """The tables the catalogue lists in the journal's schema (PostgreSQL), database (MariaDB) or file (SQLite)."""
        if self.dialect == "sqlite":
            query = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            return {r[0] for r in self.admin(query, ())}
        schema = self.table.split(".")[0]
        query = "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
        return {str(r[0]) for r in self.admin(query, (schema,))}

    @property
    def now(self) -> str:
        """The current time as admin SQL writes it in this dialect's timestamp columns."""
        return {"postgresql": "now()", "mysql": "UTC_TIMESTAMP(6)"}.get(self.dialect, str(time.time()))

    @property
    def quoted(self) -> str:
        """The journal's name, quoted for admin SQL."""
        return self.quote(self.table)

    def quote(self, name: str) -> str:
        """A (possibly qualified) table name, quoted for this dialect's admin SQL."""
        mark = "`" if self.dialect == "mysql" else '"'
        return ".".join(f"{mark}{part}{mark}" for part in name.split("."))


DIALECTS = ["postgresql", "mysql", "sqlite"]
"""The dialects every migration test runs on."""


def version_1_journal(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[Journal]:
    """A version-1 journal with rows for the `journal` fixture of the migration tests, on PostgreSQL (in a schema of
    its own), on MariaDB (in a database of its own) or on a SQLite file, as `request.param` names."""
    if request.param == "mysql":
        require_service("mariadb")
        connection = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)

        def run_mysql(sql: str, params: tuple[Any, ...]) -> list[Any]:
            with connection.cursor() as cursor:
                cursor.execute(sql, params or None)
                return list(cursor.fetchall())

        run_mysql(f"CREATE DATABASE `{unique_name}`", ())
        made = Journal("mysql", MYSQL_URL, f"{unique_name}.inbox", run_mysql)
        made.build()
        yield made
        connection.close()
        drop_database(unique_name)
        return
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
        admin = psycopg.connect(url, autocommit=True)

        def run_pg(sql: str, params: tuple[Any, ...]) -> list[Any]:
            cursor = admin.execute(sql.encode(), params)
            return cursor.fetchall() if cursor.description else []

        admin.execute(f'CREATE SCHEMA "{unique_name}"'.encode())
        made = Journal("postgresql", url, f"{unique_name}.inbox", run_pg)
        made.build()
        yield made
        admin.execute(f'DROP SCHEMA "{unique_name}" CASCADE'.encode())
        admin.close()
        return
    path = tmp_path / "v1.db"
    connection = sqlite3.connect(path, isolation_level=None)

    def run_sqlite(sql: str, params: tuple[Any, ...]) -> list[Any]:
        return connection.execute(sql, params).fetchall()

    made = Journal("sqlite", f"sqlite:///{path}", unique_name, run_sqlite)
    made.build()
    yield made
    connection.close()


def journal_rows(journal: Journal) -> dict[str, tuple[Any, ...]]:
    """The journal's rows by message id, read with admin SQL (the inbox reads columns an older journal lacks)."""
    rows = journal.admin(
        "SELECT message_id, status, attempts, fingerprint, payload, conflict_payload, received_at"
        f" FROM {journal.quoted} WHERE consumer = 'accounting'",
        (),
    )
    decode = lambda v: v.decode() if isinstance(v, bytes) else v  # noqa: E731 - MariaDB's key columns are binary
    blob = lambda v: None if v is None else bytes(v)  # noqa: E731
    return {decode(r[0]): (r[1], r[2], r[3], blob(r[4]), blob(r[5]), r[6]) for r in rows}


def nothing(tx: Tx, message: Message) -> None:
    """A handler with no effect."""


def publish(tx: Tx, message: Message) -> None:
    """A handler that publishes an acknowledgment of its message into the outbox."""
    tx.publish("dir:///out", b"ack:" + message.payload, key=f"ack/{message.message_id}")
