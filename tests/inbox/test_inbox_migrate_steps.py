"""Versioned migrations, step by step: each version applied alone to a journal brought back to the one before it
does what it claims and keeps the rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from migrate_journal import DIALECTS, MARK, SOURCE, Journal, journal_rows, nothing, version_1_journal

from edinbox import Inbox, Message, Outcome, Retry, RetryLater, SchemaError, Status, Tx, _trace
from edinbox._core import MIGRATIONS, parse_table
from edinbox.stores import _mysql_sql, _postgres_sql, _sqlite_sql


@pytest.fixture(params=DIALECTS)
def journal(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[Journal]:
    """A version-1 journal with rows, on PostgreSQL (in a schema of its own), on MariaDB (in a database of its
    own) and on a SQLite file."""
    yield from version_1_journal(request, unique_name, tmp_path)


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
        before = journal_rows(journal)
        with pytest.raises(SchemaError, match="run `edinbox migrate`"):
            inbox.verify()
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 7]
        inbox.verify()
        assert journal_rows(journal) == before
        _back_to(journal, 6)
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 7]  # the defaults there: the step holds
        assert inbox.process(Message("new", SOURCE, b"x"), nothing) is Outcome.PROCESSED
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
        before = journal_rows(journal)
        with pytest.raises(SchemaError, match="run `edinbox migrate`"):
            inbox.verify()
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 8]
        inbox.verify()
        assert journal_rows(journal) == before
        assert _record(inbox, "f").retry_at is None
        if journal.dialect != "sqlite":
            journal.admin(f"UPDATE {journal.quote(f'{journal.table}_version')} SET version = 7", ())
            assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 8]  # the column already there: holds
    slow = Retry(immediate=0, first=timedelta(hours=1), cap=timedelta(hours=2), jitter=0)
    with Inbox(journal.target, consumer="accounting", table=journal.table, retry=slow) as inbox:
        assert inbox.process(Message("f", SOURCE, b"x"), nothing) is Outcome.PROCESSED  # failed twice, due at once

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
        before = journal_rows(journal)
        with pytest.raises(SchemaError, match="run `edinbox migrate`"):
            inbox.verify()
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 10]
        inbox.verify()
        assert journal_rows(journal) == before
        assert {r.trace for r in inbox.records(limit=100)} == {None}
        assert inbox.process(Message("t", SOURCE, b"x"), nothing) is Outcome.PROCESSED
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
        before = journal_rows(journal)
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 11]
        inbox.verify()
        assert journal_rows(journal) == before
        assert inbox.process(Message("k", SOURCE, b"BGM+220+PO-4711'"), nothing) is Outcome.PROCESSED
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
        before = journal_rows(journal)
        stored = _stored_as(journal)
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v >= 12]
        inbox.verify()
        assert journal_rows(journal) == before
        assert _stored_as(journal) == stored
        assert not journal.status_check("bogus")
        for status in ("processed", "in_progress", "failed", "dead", "conflict", "requeued"):
            assert journal.status_check(status)
        if journal.dialect == "postgresql":
            assert _status_type(journal) == (f"{journal.table.rpartition('.')[2]}_status", [])
        assert inbox.process(Message("s", SOURCE, b"x"), nothing) is Outcome.PROCESSED
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
