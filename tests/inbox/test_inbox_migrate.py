"""Versioned migrations: a journal built from the frozen version-1 DDL (`schema_v1/`) is upgraded with its rows."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from edinbox import AsyncInbox, Inbox, Message, Outcome, Retry, RetryLater, SchemaError, Status, Tx, _trace
from edinbox._core import MIGRATIONS, SCHEMA_VERSION, parse_table
from edinbox.stores import _mysql_sql, _postgres_sql, _sqlite_sql
from edinbox.stores._queries import migration_queries
from services import MYSQL_URL, drop_database, require_service
from threads import in_threads

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


@pytest.fixture(params=["postgresql", "mysql", "sqlite"])
def journal(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[Journal]:
    """A version-1 journal with rows, on PostgreSQL (in a schema of its own), on MariaDB (in a database of its
    own) and on a SQLite file."""
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


def _rows(journal: Journal) -> dict[str, tuple[Any, ...]]:
    """The journal's rows by message id, read with admin SQL (the inbox reads columns an older journal lacks)."""
    rows = journal.admin(
        "SELECT message_id, status, attempts, fingerprint, payload, conflict_payload, received_at"
        f" FROM {journal.quoted} WHERE consumer = 'accounting'",
        (),
    )
    decode = lambda v: v.decode() if isinstance(v, bytes) else v  # noqa: E731 - MariaDB's key columns are binary
    blob = lambda v: None if v is None else bytes(v)  # noqa: E731
    return {decode(r[0]): (r[1], r[2], r[3], blob(r[4]), blob(r[5]), r[6]) for r in rows}


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
        before = {k: v[:5] for k, v in _rows(journal).items()}
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
        after = _rows(journal)
        assert {k: v[:5] for k, v in after.items()} == before
        assert all(v[5] is not None for v in after.values())
        assert journal.status_check("requeued")
        assert not journal.status_check("bogus")
        # the unique key survived: another payload under a processed key is a conflict, not a second run
        assert inbox.process(Message("p", SOURCE, b"x"), _nothing) is Outcome.CONFLICT
        assert inbox.requeue(SOURCE, "d") is True
        assert inbox.get(SOURCE, "d").status is Status.REQUEUED
        # version 3: the outbox exists and a handler publishes into it
        assert journal.has_outbox()
        assert inbox.process(Message("n", SOURCE, b"new"), _publish) is Outcome.PROCESSED
        assert inbox.outbox_stats().backlog == 1
        # versions 4 and 5 changed the hub's tables until the hub kept its own chain: the catalogue of the migrated
        # journal lists the journal, its version table, its outbox and its kept payloads (version 11; on SQLite with
        # the FTS5 tables of their search index), and nothing else
        name = journal.table.rpartition(".")[2]
        tables = {t for t in journal.tables() if not t.startswith(f"{name}_payloads_fts")}
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


def test_version_6_alone_lets_the_claim_skip_the_sent_rows(journal: Journal) -> None:
    """A journal at version 5 (no `<journal>_outbox_unsent`) claims by reading every row on SQLite and MariaDB, the
    sent ones first; version 6, that step alone, lets the claim go to the unsent rows through the new index."""
    with Inbox(journal.target, consumer="accounting", table=journal.table) as inbox:
        inbox.migrate()
        _fill_outbox(journal, sent=2000, unsent=5)
        index = f"{journal.table.rpartition('.')[2]}_outbox_unsent"
        schema = journal.table.rpartition(".")[0]
        dropped = journal.quote(f"{schema}.{index}" if journal.dialect == "postgresql" else index)
        on = f" ON {journal.quote(journal.table + '_outbox')}" if journal.dialect == "mysql" else ""
        journal.admin(f"DROP INDEX {dropped}{on}", ())
        _back_to(journal, 5)
        before = _claim_plan(journal)
        assert index not in before
        if journal.dialect != "postgresql":  # PostgreSQL's planner took the pending index already
            assert before.startswith("SCAN o|") or any(scan in before for scan in PRIMARY_SCANS), before
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 6]
        after = _claim_plan(journal)
        assert index in after, after
        assert "SCAN o|" not in after, after
        assert not any(scan in after for scan in PRIMARY_SCANS), after
        _back_to(journal, 5)
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 6]  # the index already there: the step holds
        inbox.verify()


MYSQL_VERSION_6_DEFAULTS = (
    "ALTER COLUMN status DROP DEFAULT, ALTER COLUMN attempts SET DEFAULT 0, ALTER COLUMN received_at DROP DEFAULT,"
    " ALTER COLUMN settled_at DROP DEFAULT"
)
"""The journal's defaults on MariaDB before version 7 (none for status and the timestamps, 0 attempts)."""


def test_version_7_alone_gives_a_processed_delivery_its_defaults(journal: Journal) -> None:
    """A journal at version 6 (on MariaDB: no defaults for status and the timestamps) is taken to version 7 by that
    step alone, rows kept; then a new delivery is journaled processed, at attempt 1, received and settled at one
    time, a claimed one stays unsettled until it completes, a failure is unsettled, and the step holds when it runs
    again."""
    with Inbox(journal.target, consumer="accounting", table=journal.table) as inbox:
        inbox.migrate()
        if journal.dialect == "mysql":
            journal.admin(f"ALTER TABLE {journal.quoted} {MYSQL_VERSION_6_DEFAULTS}", ())
        _back_to(journal, 6)
        before = _rows(journal)
        with pytest.raises(SchemaError, match="run `edinbox migrate`"):
            inbox.verify()
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 7]
        inbox.verify()
        assert _rows(journal) == before
        _back_to(journal, 6)
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 7]  # the defaults there: the step holds
        assert inbox.process(Message("new", SOURCE, b"x"), _nothing) is Outcome.PROCESSED
        held: list[Any] = []
        claimed = inbox.process(
            Message("claimed", SOURCE, b"x"), lambda tx, m: held.append(_record(inbox, "claimed")), lease=_LEASE
        )
        assert claimed is Outcome.PROCESSED

        def failing(tx: Tx, message: Message) -> None:
            raise RuntimeError("not yet")

        with pytest.raises(RuntimeError, match="not yet"):
            inbox.process(Message("failing", SOURCE, b"x"), failing)
        new, done, failed = (_record(inbox, name) for name in ("new", "claimed", "failing"))
    assert (new.status, new.attempts, new.settled_at) == (Status.PROCESSED, 1, new.received_at)
    assert (held[0].status, held[0].attempts, held[0].settled_at) == (Status.IN_PROGRESS, 1, None)
    assert (done.status, done.attempts) == (Status.PROCESSED, 1)
    assert done.settled_at is not None
    assert (failed.status, failed.attempts, failed.settled_at) == (Status.FAILED, 1, None)


_LEASE = timedelta(seconds=30)


def _back_to(journal: Journal, version: int) -> None:
    """Say the journal is at `version`; on SQLite also drop what versions 8 and 10 added (their ADD COLUMN cannot be
    run twice: SQLite has no IF NOT EXISTS there, and runs each step in the transaction that records it, so a step
    never runs again on a real journal)."""
    journal.admin(f"UPDATE {journal.quote(f'{journal.table}_version')} SET version = {version}", ())
    if journal.dialect == "sqlite" and version < 10:
        _drop_column(journal, "trace")
    if journal.dialect == "sqlite" and version < 8:
        _drop_column(journal, "retry_at")


def _drop_retry_at(journal: Journal) -> None:
    """Drop the journal's retry_at column, as a journal before version 8 is (and its later trace column, so the
    columns come back in their order)."""
    _drop_column(journal, "trace")
    _drop_column(journal, "retry_at")


def _drop_column(journal: Journal, column: str) -> None:
    """Drop one column of the journal, as a journal before the version that added it is."""
    if journal.dialect == "sqlite":  # read the schema first: DROP COLUMN trusts the schema this connection cached
        journal.admin("SELECT count(*) FROM sqlite_master", ())
    journal.admin(f"ALTER TABLE {journal.quoted} DROP COLUMN {column}", ())


def test_version_8_alone_adds_retry_at_and_failed_rows_run_at_once(journal: Journal) -> None:
    """A journal at version 7 (no retry_at) is taken to version 8 by that step alone, rows kept; its failed row (which
    has no retry time) runs at the next delivery, and a new failure is given a retry time that a delivery before it
    waits for, with no attempt counted; on PostgreSQL and MariaDB the step holds when it runs again."""
    with Inbox(journal.target, consumer="accounting", table=journal.table) as inbox:
        inbox.migrate()
        _drop_retry_at(journal)
        journal.admin(f"UPDATE {journal.quote(f'{journal.table}_version')} SET version = 7", ())
        before = _rows(journal)
        with pytest.raises(SchemaError, match="run `edinbox migrate`"):
            inbox.verify()
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 8]
        inbox.verify()
        assert _rows(journal) == before
        assert _record(inbox, "f").retry_at is None
        if journal.dialect != "sqlite":
            journal.admin(f"UPDATE {journal.quote(f'{journal.table}_version')} SET version = 7", ())
            assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 8]  # the column already there: holds
    slow = Retry(immediate=0, first=timedelta(hours=1), cap=timedelta(hours=2), jitter=0)
    with Inbox(journal.target, consumer="accounting", table=journal.table, retry=slow) as inbox:
        assert inbox.process(Message("f", SOURCE, b"x"), _nothing) is Outcome.PROCESSED  # failed twice, due at once

        def failing(tx: Tx, message: Message) -> None:
            raise RuntimeError("not yet")

        with pytest.raises(RuntimeError, match="not yet"):
            inbox.process(Message("w", SOURCE, b"x"), failing)
        with pytest.raises(RetryLater) as waited:
            inbox.process(Message("w", SOURCE, b"x"), failing)
        failed = _record(inbox, "w")
    assert failed.status is Status.FAILED
    assert failed.attempts == 1
    assert failed.retry_at == waited.value.retry_at
    assert timedelta(minutes=59) < waited.value.delay <= timedelta(hours=1)


def test_version_10_alone_adds_the_trace_column(journal: Journal) -> None:
    """A journal at version 9 (no trace column) is taken to version 10 by that step alone, rows kept and their trace
    NULL; a delivery settled afterwards keeps a trace only when a tracer is set; on PostgreSQL and MariaDB the step
    holds when it runs again."""
    with Inbox(journal.target, consumer="accounting", table=journal.table) as inbox:
        inbox.migrate()
        _drop_column(journal, "trace")
        journal.admin(f"UPDATE {journal.quote(f'{journal.table}_version')} SET version = 9", ())
        before = _rows(journal)
        with pytest.raises(SchemaError, match="run `edinbox migrate`"):
            inbox.verify()
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 10]
        inbox.verify()
        assert _rows(journal) == before
        assert {r.trace for r in inbox.records(limit=100)} == {None}
        assert inbox.process(Message("t", SOURCE, b"x"), _nothing) is Outcome.PROCESSED
        # no trace without a tracer; a test elsewhere in this process may have installed one (it is process-wide)
        assert (_record(inbox, "t").trace is None) is not _trace.tracing()
        if journal.dialect != "sqlite":
            journal.admin(f"UPDATE {journal.quote(f'{journal.table}_version')} SET version = 9", ())
            assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 10]  # the column already there: holds


def test_version_11_alone_adds_the_kept_payloads(journal: Journal) -> None:
    """A journal at version 10 (no kept payloads' table) is taken to version 11 by that step (then 12, which the table
    made by 11 holds), rows kept; a consumer with keep_payloads then keeps and finds a payload; the steps hold when
    they run again."""
    with Inbox(journal.target, consumer="accounting", table=journal.table, keep_payloads=True) as inbox:
        inbox.migrate()
        journal.admin(f"DROP TABLE {journal.quote(f'{journal.table}_payloads')}", ())
        if journal.dialect == "sqlite":
            journal.admin(f"DROP TABLE {journal.quote(f'{journal.table}_payloads_fts')}", ())
        journal.admin(f"UPDATE {journal.quote(f'{journal.table}_version')} SET version = 10", ())
        before = _rows(journal)
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 11]
        inbox.verify()
        assert _rows(journal) == before
        assert inbox.process(Message("k", SOURCE, b"BGM+220+PO-4711'"), _nothing) is Outcome.PROCESSED
        assert [f.message_id for f in inbox.search("PO-4711")] == ["k"]
        journal.admin(f"UPDATE {journal.quote(f'{journal.table}_version')} SET version = 10", ())
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 11]  # the table already there: holds


def test_version_12_alone_checks_the_status_by_a_domain(journal: Journal) -> None:
    """A journal at version 11 (PostgreSQL: the status checked by a CHECK on the table) is taken to version 12 by that
    step alone, rows kept and the table not rewritten: the status column is of the journal's own domain, the table
    has no CHECK left, an unknown status is still refused and every status the inbox writes is let in; the step holds
    when it runs again."""
    with Inbox(journal.target, consumer="accounting", table=journal.table) as inbox:
        inbox.migrate()
        if journal.dialect == "postgresql":  # version 11's column: text, under the table's CHECK
            _, name = journal.table.split(".")
            journal.admin(f"ALTER TABLE {journal.quoted} ALTER COLUMN status TYPE text", ())
            journal.admin(f"DROP DOMAIN {journal.quote(f'{journal.table}_status')}", ())
            journal.admin(
                f'ALTER TABLE {journal.quoted} ADD CONSTRAINT "{name}_status_check" CHECK (status IN '
                "('processed', 'in_progress', 'failed', 'dead', 'conflict', 'requeued'))",
                (),
            )
            assert _status_type(journal) == (None, ["CHECK"])
        journal.admin(f"UPDATE {journal.quote(f'{journal.table}_version')} SET version = 11", ())
        before = _rows(journal)
        stored = _stored_as(journal)
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 12]
        inbox.verify()
        assert _rows(journal) == before
        assert _stored_as(journal) == stored
        assert not journal.status_check("bogus")
        for status in ("processed", "in_progress", "failed", "dead", "conflict", "requeued"):
            assert journal.status_check(status)
        if journal.dialect == "postgresql":
            assert _status_type(journal) == (f"{journal.table.rpartition('.')[2]}_status", [])
        assert inbox.process(Message("s", SOURCE, b"x"), _nothing) is Outcome.PROCESSED
        journal.admin(f"UPDATE {journal.quote(f'{journal.table}_version')} SET version = 11", ())
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 12]  # the domain already there: holds


def _stored_as(journal: Journal) -> Any:
    """PostgreSQL: the file holding the journal's rows (a rewrite of the table makes a new one); None elsewhere."""
    if journal.dialect != "postgresql":
        return None
    return journal.admin("SELECT pg_relation_filenode(%s::regclass)", (journal.quoted,))[0][0]


def _status_type(journal: Journal) -> tuple[str | None, list[str]]:
    """PostgreSQL: the domain of the journal's status column (None: a plain type), and its table's CHECKs' kinds."""
    schema, name = journal.table.split(".")
    domain = journal.admin(
        "SELECT domain_name FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = %s AND column_name = 'status'",
        (schema, name),
    )[0][0]
    checks = journal.admin(
        "SELECT 'CHECK' FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'c'", (journal.quoted,)
    )
    return domain, [row[0] for row in checks]


def _record(inbox: Inbox, message_id: str) -> Any:
    (found,) = [r for r in inbox.records(limit=100) if r.message_id == message_id]
    return found


def _fill_outbox(journal: Journal, *, sent: int, unsent: int) -> None:
    """`sent` rows already sent, then `unsent` rows waiting, one key each, in the journal's outbox."""
    outbox = journal.quote(f"{journal.table}_outbox")
    created = ", created_at" if journal.dialect == "sqlite" else ""
    payload = "'\\x00'::bytea" if journal.dialect == "postgresql" else "x'00'"
    for start, count, sent_at in ((0, sent, journal.now), (sent, unsent, "NULL")):
        row = f"('dir:///out', {MARK[journal.dialect]}, {payload}{', ' + journal.now if created else ''}, {sent_at})"
        keys = tuple(f"k{n}" for n in range(start, start + count))
        for first in range(0, count, 500):  # SQLite binds at most 999 parameters
            chunk = keys[first : first + 500]
            columns = f"destination, {journal.quote('key')}, payload{created}, sent_at"
            journal.admin(f"INSERT INTO {outbox} ({columns}) VALUES {', '.join([row] * len(chunk))}", chunk)
    if journal.dialect == "postgresql":
        journal.admin(f"ANALYZE {outbox}", ())


PRIMARY_SCANS = ("'o', 'index', None, 'PRIMARY'", "'o', 'range', 'PRIMARY', 'PRIMARY'")
"""MariaDB's plan of the claim reading the outbox on its primary key, sent rows and all: the whole index, or (its
first step, from the id after which it reads) a range of it."""


def _claim_plan(journal: Journal) -> str:
    """The plan of the relay's claim (`outbox_claim`) on the journal's outbox, one step per `|`."""
    table = parse_table(journal.table, qualified=journal.dialect != "sqlite")
    if journal.dialect == "postgresql":
        claim = _postgres_sql.Statements(table)["outbox_claim"].decode().replace("%(limit)s", "10")
        return "|".join(row[0] for row in journal.admin(f"EXPLAIN {claim}", ()))
    if journal.dialect == "mysql":
        (claim,) = _mysql_sql.Statements(table)["outbox_claim"]
        claim = claim.replace("%(limit)s", "10").replace("%(after)s", "0")  # its first step, which reads the rows
        return "|".join(str(row) for row in journal.admin(f"EXPLAIN {claim}", ()))
    claim = _sqlite_sql.Statements(table)["outbox_claim"].replace(":limit", "10")
    with closing(sqlite3.connect(journal.target.removeprefix("sqlite:///"))) as connection:  # the schema as it is now
        return "|".join(row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {claim}")) + "|"


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


def _nothing(tx: Tx, message: Message) -> None:
    """A handler with no effect."""


def _publish(tx: Tx, message: Message) -> None:
    """A handler that publishes an acknowledgment of its message into the outbox."""
    tx.publish("dir:///out", b"ack:" + message.payload, key=f"ack/{message.message_id}")


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
