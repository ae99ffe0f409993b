"""The no-I/O decisions of the inbox, and configuration errors caught before anything connects."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from edinbox import (
    AsyncInbox,
    ConfigurationError,
    DataError,
    Inbox,
    InboxError,
    LimitError,
    Message,
    NotSettledError,
    Outcome,
    SchemaError,
    SourceError,
    StoreError,
    Tx,
)
from edinbox._core import (
    MAX_KEY_BYTES,
    Action,
    Failure,
    Found,
    Pace,
    Status,
    check_retention,
    decide,
    failure_status,
    idempotency_key,
    judge,
    parse_table,
)
from edinbox._plan import plan_batch
from edinbox.stores._postgres_sql import mapped_errors as postgres_errors
from edinbox.stores._sqlite_sql import mapped_errors as sqlite_errors
from edinbox.stores._sync_factory import sqlite_path

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def found(status: Status, *, fingerprint: str = "f", attempts: int = 1, lease: float | None = None) -> Found:
    """A journal row as the decision sees it."""
    lease_until = None if lease is None else NOW + timedelta(seconds=lease)
    return Found(status, fingerprint, attempts, lease_until)


@pytest.mark.parametrize(
    ("row", "fingerprint", "at_most_once", "action"),
    [
        (found(Status.PROCESSED), "f", False, Action.DUPLICATE),
        (found(Status.PROCESSED), "g", False, Action.CONFLICT),
        (found(Status.CONFLICT), "f", False, Action.DUPLICATE),
        (found(Status.CONFLICT), "g", False, Action.CONFLICT),
        (found(Status.DEAD), "f", False, Action.DEAD),
        (found(Status.FAILED, attempts=2), "g", False, Action.RETRY),
        (found(Status.FAILED, attempts=3), "f", False, Action.PARK),
        (found(Status.IN_PROGRESS, lease=10), "f", False, Action.BUSY),
        (found(Status.IN_PROGRESS, lease=-1), "f", False, Action.RETRY),
        (found(Status.IN_PROGRESS, lease=-1), "f", True, Action.PARK),
        (found(Status.IN_PROGRESS, lease=-1, attempts=3), "f", False, Action.PARK),
    ],
)
def test_decide(row: Found, fingerprint: str, at_most_once: bool, action: Action) -> None:
    """Each journal state and fingerprint leads to the documented action (max_attempts=3)."""
    assert decide(row, fingerprint, now=NOW, max_attempts=3, at_most_once=at_most_once) is action


def test_failure_status_parks_at_max_attempts() -> None:
    """The failure that reaches max_attempts parks the row; earlier ones leave it retryable."""
    assert failure_status(2, max_attempts=3) is Status.FAILED
    assert failure_status(3, max_attempts=3) is Status.DEAD


def test_retention_shorter_than_the_horizon_is_refused() -> None:
    """A purge cut-off below the redelivery horizon, or negative, is a ConfigurationError."""
    check_retention(timedelta(days=7), horizon=timedelta(days=7))
    with pytest.raises(ConfigurationError, match="horizon"):
        check_retention(timedelta(days=6), horizon=timedelta(days=7))
    with pytest.raises(ConfigurationError, match="negative"):
        check_retention(timedelta(seconds=-1), horizon=timedelta(0))


def test_the_pace_waits_until_the_rows_fit_the_rate() -> None:
    """At 1,000 rows/s, 500 rows deleted in the first 0.1 s ask for a 0.4 s pause, none once the time has caught up;
    no rate (None or infinity) never waits."""
    now = [100.0]
    pace = Pace(1000, clock=lambda: now[0])
    assert pace.delay() == 0.0
    now[0] = 100.1
    pace.count(500)
    assert pace.delay() == pytest.approx(0.4)
    now[0] = 100.6
    assert pace.delay() == 0.0
    for unlimited in (None, float("inf")):
        free = Pace(unlimited, clock=lambda: now[0])
        free.count(10**9)
        assert free.delay() == 0.0


@pytest.mark.parametrize(
    "table", ["", "1abc", "in box", 'inbox"; DROP TABLE x; --', "a.b.c", "edi.", "x" * 49, "inbox-1"]
)
def test_bad_table_names_are_refused(table: str) -> None:
    """Table names are validated against a strict pattern before they get near SQL."""
    with pytest.raises(ConfigurationError, match="invalid table name"):
        parse_table(table, qualified=True)


def test_schema_qualified_names_only_where_schemas_exist() -> None:
    """`edi.inbox` splits into schema and name on PostgreSQL and is refused on SQLite."""
    table = parse_table("edi.inbox", qualified=True)
    assert (table.schema, table.name, str(table)) == ("edi", "inbox", "edi.inbox")
    with pytest.raises(ConfigurationError, match="no schemas"):
        Inbox("sqlite://", consumer="c", table="edi.inbox")


def test_idempotency_key_is_stable_and_distinct() -> None:
    """The lease-mode key depends only on (consumer, source, message_id) while no conflict was requeued."""
    assert idempotency_key("c", "s", "1") == idempotency_key("c", "s", "1")
    assert len({idempotency_key("c", "s", "1"), idempotency_key("c", "s", "2"), idempotency_key("d", "s", "1")}) == 3
    assert idempotency_key("c", "s", "1", fingerprint="f1") == idempotency_key("c", "s", "1")
    assert idempotency_key("c", "s", "1", fingerprint="f1", requeued="f2") == idempotency_key("c", "s", "1")


def test_idempotency_key_of_a_requeued_conflict_follows_its_fingerprint() -> None:
    """The requeued conflicting copy gets a key of its own (stable for that payload), unlike the original's."""
    corrected = idempotency_key("c", "s", "1", fingerprint="f2", requeued="f2")
    assert corrected != idempotency_key("c", "s", "1")
    assert corrected == idempotency_key("c", "s", "1", fingerprint="f2", requeued="f2")
    assert corrected != idempotency_key("c", "s", "1", fingerprint="f3", requeued="f3")


def test_extend_lease_outside_lease_mode_is_a_configuration_error() -> None:
    """A transactional handler has no lease to extend: extend_lease() says which mode it needs."""
    with pytest.raises(ConfigurationError, match="lease mode"):
        Tx(None, "sqlite").extend_lease()


def test_judge_names_who_pays_for_each_failure() -> None:
    """PermanentError parks; TransientError and configuration errors cost nothing; anything else counts an attempt."""
    assert judge(DataError("x")) is Failure.PARK
    assert judge(LimitError("x")) is Failure.PARK
    assert [judge(e) for e in (StoreError("x"), NotSettledError("x"), SourceError("x"))] == [Failure.UNSETTLED] * 3
    assert judge(ValueError("x")) is Failure.ATTEMPT
    assert judge(InboxError("x")) is Failure.ATTEMPT
    assert judge(ConfigurationError("x")) is Failure.UNSETTLED
    assert judge(SchemaError("x")) is Failure.UNSETTLED


@pytest.mark.parametrize(
    ("error", "mapped"),
    [
        (psycopg.errors.NumericValueOutOfRange("x"), DataError),
        (psycopg.errors.StringDataRightTruncation("x"), DataError),
        (psycopg.errors.CharacterNotInRepertoire("x"), DataError),
        (psycopg.errors.UntranslatableCharacter("x"), DataError),
        (psycopg.errors.ProgramLimitExceeded("x"), DataError),
        (psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"), DataError),
        (psycopg.errors.SerializationFailure("x"), StoreError),
        (psycopg.errors.DeadlockDetected("x"), StoreError),
        (psycopg.errors.LockNotAvailable("x"), StoreError),
        (psycopg.errors.AdminShutdown("x"), StoreError),
        (psycopg.OperationalError("connection lost"), StoreError),
        (psycopg.errors.UndefinedTable("x"), SchemaError),  # run `edinbox init`: no wait brings a table back
        (psycopg.errors.InvalidSchemaName("x"), SchemaError),
    ],
)
def test_postgresql_errors_map_by_sqlstate(error: Exception, mapped: type[Exception]) -> None:
    """Each PostgreSQL error becomes the edinbox error of the mapping table, chained from it."""
    result = postgres_errors.map(error, "run it")
    assert type(result) is mapped
    assert result.__cause__ is error
    assert postgres_errors.map(ValueError("mine"), "run it").__class__ is ValueError


def test_sqlite_errors_map_by_result_code() -> None:
    """SQLite's too-big and STRICT datatype errors are DataError, a missing table a SchemaError (no wait brings it
    back); anything else the driver raises is StoreError."""
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE t (v INTEGER) STRICT")
    for statement, mapped in [
        ("SELECT zeroblob(2000000000)", DataError),
        ("INSERT INTO t VALUES ('x')", DataError),
        ("SELECT * FROM missing", SchemaError),
        ("SELECT * FROM t WHERE no_such_column = 1", StoreError),
    ]:
        with pytest.raises(sqlite3.Error) as raised:
            connection.execute(statement)
        assert type(sqlite_errors.map(raised.value, "run it")) is mapped, statement
    connection.close()


def test_key_parts_are_limited_to_512_utf8_bytes_without_nul() -> None:
    """Message() and the inbox refuse over-long or NUL-bearing key parts in one line, before any SQL."""
    assert MAX_KEY_BYTES == 512
    assert Message("é" * 256, "s" * 512).message_id == "é" * 256
    for bad in ("x" * 513, "é" * 257, "a\x00", "\ud800"):
        with pytest.raises(LimitError) as raised:
            Message(bad, "s")
        assert "\n" not in str(raised.value)
        with pytest.raises(LimitError):
            Message("1", bad)
        with pytest.raises(ConfigurationError, match="consumer"):
            Inbox("sqlite://", consumer=bad)
    with pytest.raises(LimitError) as long_key:
        Message("9" * 10_000, "s")
    assert len(str(long_key.value)) < 200


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite://", ":memory:"),
        ("sqlite:///:memory:", ":memory:"),
        ("sqlite:///inbox.db", "inbox.db"),
        ("sqlite:////var/lib/hub/inbox.db", "/var/lib/hub/inbox.db"),
    ],
)
def test_sqlite_urls(url: str, path: str) -> None:
    """SQLite URLs follow the usual convention: three slashes relative, four absolute, none in memory."""
    assert sqlite_path(url) == path


@pytest.mark.parametrize(
    ("target", "options", "match"),
    [
        ("oracle://root@localhost/db", {}, "unsupported database URL"),
        ("postgresql://u:secret@localhost/db", {"consumer": ""}, "consumer"),
        ("sqlite://", {"max_attempts": 0}, "max_attempts"),
        ("sqlite://", {"horizon": timedelta(seconds=-1)}, "horizon"),
        (object(), {}, "cannot use a object"),
    ],
)
def test_bad_configuration_is_refused_before_connecting(target: object, options: dict[str, object], match: str) -> None:
    """Bad URLs, consumers, attempts and horizons raise ConfigurationError at construction."""
    options = {"consumer": "c", **options}
    with pytest.raises(ConfigurationError, match=match):
        Inbox(target, **options)  # type: ignore[arg-type]


def test_passwords_never_appear_in_errors() -> None:
    """An unsupported URL is reported with its password masked."""
    with pytest.raises(ConfigurationError) as raised:
        Inbox("oracle://root:hunter2@localhost/db", consumer="c")
    assert "hunter2" not in str(raised.value)


def test_unreachable_database_is_a_store_error_without_password(postgres_url: str) -> None:
    """A PostgreSQL that cannot be reached raises StoreError (not settled), with the password masked."""
    from edinbox import StoreError

    inbox = Inbox("postgresql://postgres:hunter2@127.0.0.1:1/test?connect_timeout=2", consumer="c")
    with pytest.raises(StoreError) as raised:
        inbox.process(Message("1", "s"), lambda tx, m: None)
    assert "hunter2" not in str(raised.value)
    inbox.close()


def test_async_inbox_refuses_a_sync_connection(postgres_url: str) -> None:
    """Handing a sync psycopg connection to AsyncInbox is a ConfigurationError, not a hang."""
    import psycopg

    with psycopg.connect(postgres_url) as connection, pytest.raises(ConfigurationError, match="AsyncConnection"):
        AsyncInbox(connection, consumer="c")


def test_outcomes_mean_ack() -> None:
    """Every Outcome is a settled result (the caller acks); not-settled cases are exceptions."""
    assert {o.value for o in Outcome} == {"processed", "duplicate", "conflict", "dead"}


def test_plan_batch_runs_the_first_copy_and_judges_later_copies_by_it() -> None:
    """In a batch, the first copy of a new or failed key runs; later copies are duplicates or conflicts of it."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    new, same, other = Message("1", "s", b"a"), Message("1", "s", b"a"), Message("1", "s", b"b")
    failed, failed_copy = Message("2", "s", b"c"), Message("2", "s", b"d")
    done = Message("3", "s", b"e")
    found = {
        ("s", "2"): (Found(Status.FAILED, "x", 1, None), now),
        ("s", "3"): (Found(Status.PROCESSED, done.fingerprint or "", 1, None), now),
    }
    plan = plan_batch([new, same, other, failed, failed_copy, done], {("s", "1")}, found, max_attempts=3)
    assert plan == [None, Action.DUPLICATE, Action.CONFLICT, Action.RETRY, Action.CONFLICT, Action.DUPLICATE]


def test_plan_batch_starts_over_when_a_row_vanished() -> None:
    """A key neither inserted nor found (deleted meanwhile) makes the whole batch start over (None)."""
    assert plan_batch([Message("1", "s", b"a")], set(), {}, max_attempts=3) is None
