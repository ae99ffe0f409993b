"""The inbox contract: every store (PostgreSQL, MariaDB, SQLite on a file, SQLite in memory) in both APIs."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from inbox_harness import Harness, backdate, lease

from edinbox import (
    ConfigurationError,
    DataError,
    InboxError,
    LimitError,
    Message,
    NotSettledError,
    Outcome,
    PermanentError,
    SchemaError,
    SourceError,
    Status,
    StoreError,
    Tx,
)


class Boom(Exception):
    """A handler failure."""


class Unreadable(PermanentError):
    """The user's own permanent failure."""


class Crash(BaseException):
    """A process dying mid-handler (not an Exception: the inbox records nothing for it)."""


def msg(message_id: str, payload: bytes = b"payload", source: str = "X12:ZZ:ACME>ZZ:HUB") -> Message:
    """A message of the test partner."""
    return Message(message_id, source, payload)


class InboxContract:
    """Behaviour every store must show; subclasses pick the store and the API."""

    store: ClassVar[str]
    asynchronous: ClassVar[bool]

    @pytest.fixture
    def h(self, harness_factory: Any) -> Harness:
        """A fresh inbox with max_attempts=3 and no redelivery horizon."""
        return harness_factory(self.store, asynchronous=self.asynchronous, max_attempts=3, horizon=timedelta(0))

    # -- process ------------------------------------------------------------------------------------------------
    def test_new_message_runs_once_and_redelivery_is_duplicate(self, h: Harness) -> None:
        """A new key runs the handler and commits its effect; redeliveries run nothing and return DUPLICATE."""
        assert h.process(msg("1")) is Outcome.PROCESSED
        assert h.process(msg("1")) is Outcome.DUPLICATE
        assert h.process(msg("1")) is Outcome.DUPLICATE
        assert h.effects("1") == 1
        assert h.seen == [["1"]]
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "1")
        assert record.status is Status.PROCESSED
        assert record.attempts == 1
        assert record.settled_at is not None

    def test_same_id_from_another_source_or_consumer_is_new(self, h: Harness) -> None:
        """The key is (consumer, source, message_id): another source or consumer processes its own copy."""
        assert h.process(msg("1", source="A")) is Outcome.PROCESSED
        assert h.process(msg("1", source="B")) is Outcome.PROCESSED
        h.reopen(consumer="archive", max_attempts=3, horizon=timedelta(0))
        assert h.process(msg("1", source="A")) is Outcome.PROCESSED
        assert h.effects("1") == 3

    def test_keys_with_quotes_placeholders_and_non_ascii_are_stored_exactly(self, h: Harness) -> None:
        """Keys full of quotes, backslashes, placeholders and non-ASCII text are bound, stored and matched exactly."""
        awkward = ["O'Brien", "back\\slash'", "100%s", "%(consumer)s", "$1", "x'); DROP TABLE t; --", "é—ü😀"]
        for message_id in awkward:
            message = Message(message_id, f"src:{message_id}", b"p", fingerprint=f"fp'{message_id}")
            assert h.process(message) is Outcome.PROCESSED
            assert h.process(message) is Outcome.DUPLICATE
            record = h.call("get", f"src:{message_id}", message_id)
            assert (record.message_id, record.source, record.fingerprint) == (
                message_id,
                f"src:{message_id}",
                f"fp'{message_id}",
            )
        assert h.effects() == len(awkward)

    def test_a_nul_or_an_over_long_key_is_refused_before_any_sql(self, h: Harness) -> None:
        """A key part with a NUL or over 512 UTF-8 bytes raises LimitError in Message(); the rest go on."""
        for message_id in ("a\x00b", "9" * 10_000, "é" * 257):
            with pytest.raises(LimitError, match=r"Message\.message_id"):
                msg(message_id)
        with pytest.raises(LimitError, match=r"Message\.source"):
            msg("1", source="S" * 10_000)
        assert h.process_batch([msg("ok1"), msg("ok2")]) == [Outcome.PROCESSED] * 2
        assert h.call("stats").total == 2

    def test_key_parts_of_exactly_512_bytes_work(self, harness_factory: Any) -> None:
        """A consumer, source and message id of 512 UTF-8 bytes each are journaled, matched and read back."""
        consumer = "c" * 512
        h = harness_factory(self.store, asynchronous=self.asynchronous, consumer=consumer, horizon=timedelta(0))
        source, message_id = "s" * 510 + "é", "é" * 256
        message = Message(message_id, source, b"p")
        assert h.process(message) is Outcome.PROCESSED
        assert h.process(message) is Outcome.DUPLICATE
        assert h.process_batch([message, Message("x" * 512, source)]) == [Outcome.DUPLICATE, Outcome.PROCESSED]
        record = h.call("get", source, message_id)
        assert (record.consumer, record.source, record.message_id) == (consumer, source, message_id)

    def test_reused_key_with_other_payload_is_conflict_kept_for_operators(self, h: Harness) -> None:
        """Same key, another fingerprint: CONFLICT, nothing runs, the conflicting copy is kept on the row."""
        assert h.process(msg("7", b"amount=100")) is Outcome.PROCESSED
        assert h.process(msg("7", b"amount=999")) is Outcome.CONFLICT
        assert h.process(msg("7", b"amount=100")) is Outcome.DUPLICATE
        assert h.effects("7") == 1
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "7")
        assert record.status is Status.CONFLICT
        assert record.conflicts == 1
        assert record.conflict_payload == b"amount=999"
        assert record.fingerprint == msg("7", b"amount=100").fingerprint
        assert record.last_conflict_at is not None

    def test_handler_exception_rolls_back_records_attempt_and_propagates_unchanged(self, h: Harness) -> None:
        """A failing handler's effect is rolled back, its exception propagates as is, the attempt is recorded."""
        error = Boom("accounting said no")
        with pytest.raises(Boom) as raised:
            h.process(msg("2"), fail=error)
        assert raised.value is error
        assert h.effects() == 0
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "2")
        assert record.status is Status.FAILED
        assert record.attempts == 1
        assert record.last_error == "Boom: accounting said no"

    def test_a_handler_error_with_a_nul_or_a_surrogate_is_recorded(self, h: Harness) -> None:
        """An error message no store can hold as is (NUL, lone surrogate) is escaped and the attempt recorded."""
        with pytest.raises(Boom):
            h.process(msg("nul"), fail=Boom("bad \x00 byte \ud800"))
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "nul")
        assert (record.status, record.last_error) == (Status.FAILED, "Boom: bad \\x00 byte \\ud800")

    def test_failed_message_is_retried_by_the_next_delivery(self, h: Harness) -> None:
        """After a failure the next delivery runs the handler again and settles it."""
        with pytest.raises(Boom):
            h.process(msg("3"), fail=Boom())
        assert h.process(msg("3")) is Outcome.PROCESSED
        assert h.effects("3") == 1
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "3").attempts == 2

    def test_max_attempts_failures_park_the_message_dead_until_requeued(self, h: Harness) -> None:
        """The third failure (max_attempts=3) parks the row with its payload; then DEAD until an operator requeues."""
        for _ in range(3):
            with pytest.raises(Boom):
                h.process(msg("4", b"bad"), fail=Boom("still bad"))
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "4")
        assert (record.status, record.attempts, record.payload) == (Status.DEAD, 3, b"bad")
        assert h.process(msg("4", b"bad")) is Outcome.DEAD
        assert len(h.seen) == 3
        assert h.call("requeue", "X12:ZZ:ACME>ZZ:HUB", "4") is True
        assert h.process(msg("4", b"bad")) is Outcome.PROCESSED
        assert h.effects("4") == 1
        assert h.call("requeue", "X12:ZZ:ACME>ZZ:HUB", "4") is False

    def test_requeue_of_a_conflict_lets_the_corrected_message_run(self, h: Harness) -> None:
        """Requeueing a conflict makes the next delivery of the conflicting copy run the handler, deliberately."""
        h.process(msg("5", b"v1"))
        assert h.process(msg("5", b"v2")) is Outcome.CONFLICT
        assert h.call("requeue", "X12:ZZ:ACME>ZZ:HUB", "5") is True
        assert h.process(msg("5", b"v2")) is Outcome.PROCESSED
        assert h.process(msg("5", b"v2")) is Outcome.DUPLICATE
        assert h.effects("5") == 2
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "5").fingerprint == msg("5", b"v2").fingerprint

    def test_a_requeued_row_reads_requeued_and_counts_as_such(self, h: Harness) -> None:
        """After requeue a dead row reads `requeued` with 0 attempts (in get, records and stats) until it runs."""
        with pytest.raises(Boom):
            h.process(msg("r", b"bad"), fail=Boom("bad"))
        h.process(msg("r2", b"x"), fail=Unreadable("unreadable"))
        assert h.call("requeue", "X12:ZZ:ACME>ZZ:HUB", "r2") is True
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "r2")
        assert (record.status, record.attempts, record.lease_until) == (Status.REQUEUED, 0, None)
        assert [r.message_id for r in h.call("records", status="requeued")] == ["r2"]
        stats = h.call("stats")
        assert (stats.requeued, stats.failed, stats.dead, stats.total) == (1, 1, 0, 2)

    def test_a_requeued_row_that_fails_again_counts_from_one(self, h: Harness) -> None:
        """A requeued row is retried like a failed one with its attempts reset: one new failure reads failed, 1."""
        h.process(msg("r3", b"x"), fail=Unreadable("unreadable"))
        assert h.call("requeue", "X12:ZZ:ACME>ZZ:HUB", "r3") is True
        with pytest.raises(Boom):
            h.process(msg("r3", b"x"), fail=Boom("again"))
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "r3")
        assert (record.status, record.attempts) == (Status.FAILED, 1)
        assert h.process(msg("r3", b"x")) is Outcome.PROCESSED
        assert h.effects("r3") == 1

    def test_a_requeued_row_retries_in_a_batch_and_under_a_lease(self, h: Harness) -> None:
        """process_batch and lease mode run a requeued row's next delivery, as they run a failed one."""
        h.process(msg("rb", b"x"), fail=Unreadable("unreadable"))
        h.process(msg("rl", b"y"), fail=Unreadable("unreadable"))
        assert h.call("requeue", "X12:ZZ:ACME>ZZ:HUB", "rb") is True
        assert h.call("requeue", "X12:ZZ:ACME>ZZ:HUB", "rl") is True
        assert h.process_batch([msg("rb", b"x")]) == [Outcome.PROCESSED]
        assert h.process(msg("rl", b"y"), lease=lease(30)) is Outcome.PROCESSED
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "rl").status is Status.PROCESSED

    def test_forget_allows_deliberate_reprocessing(self, h: Harness) -> None:
        """After forget() the key is new again; forgetting an unknown key returns False."""
        h.process(msg("6"))
        assert h.call("forget", "X12:ZZ:ACME>ZZ:HUB", "6") is True
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "6") is None
        assert h.process(msg("6")) is Outcome.PROCESSED
        assert h.effects("6") == 2
        assert h.call("forget", "X12:ZZ:ACME>ZZ:HUB", "nope") is False

    def test_stats_and_records_by_status(self, h: Harness) -> None:
        """stats() counts rows by status, a conflict beside its processed row; records() lists them newest first."""
        for i in range(3):
            h.process(msg(f"p{i}"))
        with pytest.raises(Boom):
            h.process(msg("f"), fail=Boom())
        h.process(msg("p0", b"other"))
        stats = h.call("stats")
        assert (stats.processed, stats.failed, stats.conflict, stats.dead, stats.in_progress) == (3, 1, 1, 0, 0)
        assert stats.total == 4
        assert [r.message_id for r in h.call("records", status=Status.FAILED)] == ["f"]
        assert [r.message_id for r in h.call("records", status="conflict")] == ["p0"]
        assert len(h.call("records", limit=2)) == 2
        assert len(h.call("records")) == 4

    # -- who pays for a failure ----------------------------------------------------------------------------------
    def test_a_permanent_error_parks_the_message_at_once(self, h: Harness) -> None:
        """A handler's PermanentError (here the user's own subclass) parks the message dead on its first failure."""

        assert h.process(msg("perm", b"garbage"), fail=Unreadable("amount is not a number")) is Outcome.DEAD
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "perm")
        assert (record.status, record.attempts, record.payload) == (Status.DEAD, 1, b"garbage")
        assert record.last_error == "Unreadable: amount is not a number"
        assert h.effects() == 0
        assert h.process(msg("perm", b"garbage")) is Outcome.DEAD
        assert len(h.seen) == 1

    def test_a_permanent_error_after_failed_attempts_parks_the_row(self, h: Harness) -> None:
        """A row that failed before is parked by a later PermanentError, without waiting for max_attempts."""
        with pytest.raises(Boom):
            h.process(msg("pa"), fail=Boom())
        assert h.process(msg("pa"), fail=DataError("too long")) is Outcome.DEAD
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "pa")
        assert (record.status, record.attempts, record.last_error) == (Status.DEAD, 2, "DataError: too long")

    def test_a_driver_data_error_of_the_handler_sql_parks_the_message(self, h: Harness) -> None:
        """The store's data errors raised by the handler's own SQL become DataError and park the message."""
        if h.dialect == "postgresql":
            statements: list[tuple[str, Any]] = [
                ("SELECT 99999999999::int", None),  # numeric value out of range
                ("CREATE TEMP TABLE short (v varchar(3)); INSERT INTO short VALUES ('abcd')", None),  # too long
                ("SELECT convert_from('\\xff'::bytea, 'UTF8')", None),  # invalid byte sequence
                ("SELECT convert_to('\u20ac', 'LATIN1')", None),  # untranslatable character
                ("SELECT %s::text", ("a\x00b",)),  # NUL in text
                (  # index row too large (program limit exceeded)
                    "CREATE TEMP TABLE big (v text); CREATE INDEX ON big (v); "
                    "INSERT INTO big SELECT string_agg(md5(i::text), '') FROM generate_series(1, 300) i",
                    None,
                ),
            ]
        elif h.dialect == "mysql":
            h.admin(
                f"CREATE TABLE {h.table}_small (v VARCHAR(3), n TINYINT, l VARCHAR(8) CHARACTER SET latin1, d DATE)"
            )
            statements = [
                (f"INSERT INTO {h.table}_small (v) VALUES ('abcd')", None),  # 1406 data too long
                (f"INSERT INTO {h.table}_small (n) VALUES (1000)", None),  # 1264 out of range
                (f"INSERT INTO {h.table}_small (l) VALUES (%s)", ("\u20ac\U0001f600",)),  # 1366 incorrect string
                ("SELECT 18446744073709551615 + 1", None),  # 1690 BIGINT value out of range
                (f"INSERT INTO {h.table}_small (d) VALUES ('2024-13-45')", None),  # 1292 incorrect date value
                (
                    "CREATE TEMPORARY TABLE long_key (v VARCHAR(1000) CHARACTER SET utf8mb4 PRIMARY KEY)",
                    None,
                ),  # 1071 key
            ]
        else:
            h.admin(f"CREATE TABLE {h.table}_strict (v INTEGER) STRICT")
            statements = [
                ("SELECT zeroblob(2000000000)", None),  # string or blob too big
                (f"INSERT INTO {h.table}_strict VALUES ('x')", None),  # a STRICT column cannot hold the value
            ]
        for index, (statement, params) in enumerate(statements):
            message = msg(f"data{index}")
            assert h.call("process", message, h.statement_handler(statement, params)) is Outcome.DEAD, statement
            record = h.call("get", message.source, message.message_id)
            assert record.status is Status.DEAD
            assert record.last_error.startswith("DataError: "), record.last_error
        assert h.effects() == 0

    def test_a_permanent_error_in_an_isolated_batch_parks_only_that_message(self, h: Harness) -> None:
        """isolate=True: a DataError of one message's SQL parks it (DEAD, settled); its batch-mates commit."""
        statement = h.sql("SELECT 99999999999::int", "SELECT zeroblob(2000000000)", "SELECT 18446744073709551615 + 1")
        batch = [msg("d1"), msg("d2"), msg("d3")]
        handler = h.statement_handler(statement, poison="d2")
        with pytest.raises(DataError) as raised:
            h.call("process_batch", batch, handler)
        assert raised.value.__cause__ is not None
        assert h.call("records") == []
        assert h.call("process_batch", batch, handler, isolate=True) == [
            Outcome.PROCESSED,
            Outcome.DEAD,
            Outcome.PROCESSED,
        ]
        assert [h.effects(m.message_id) for m in batch] == [1, 0, 1]
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "d2").status is Status.DEAD

    def test_a_transient_error_of_the_handler_costs_no_attempt(self, h: Harness) -> None:
        """A TransientError from the handler rolls back, records nothing, and propagates as raised."""
        error = StoreError("accounting database restarting")
        with pytest.raises(StoreError) as raised:
            h.process(msg("tr"), fail=error)
        assert raised.value is error
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "tr") is None
        with pytest.raises(Boom):
            h.process(msg("tr"), fail=Boom())
        with pytest.raises(NotSettledError):
            h.process(msg("tr"), fail=NotSettledError("busy"))
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "tr")
        assert (record.status, record.attempts) == (Status.FAILED, 1)
        assert h.process(msg("tr")) is Outcome.PROCESSED

    def test_lease_mode_parks_a_permanent_error_and_gives_back_a_transient_one(self, h: Harness) -> None:
        """Lease mode: a PermanentError parks the claim (DEAD); a TransientError releases it with no attempt."""
        assert h.process(msg("lp"), fail=DataError("no such currency"), lease=lease(30)) is Outcome.DEAD
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "lp")
        assert (record.status, record.lease_until, record.last_error) == (
            Status.DEAD,
            None,
            "DataError: no such currency",
        )
        with pytest.raises(SourceError):
            h.process(msg("lt"), fail=SourceError("api unreachable"), lease=lease(30))
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "lt")
        assert (record.status, record.attempts, record.lease_until) == (Status.FAILED, 0, None)
        assert h.process(msg("lt"), lease=lease(30)) is Outcome.PROCESSED
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "lt").attempts == 1

    # -- batches ------------------------------------------------------------------------------------------------
    def test_batch_hands_only_new_messages_and_returns_one_outcome_each(self, h: Harness) -> None:
        """A batch mixing new, repeated, already processed, conflicting and dead messages settles each correctly."""
        h.process(msg("old"))
        h.process(msg("changed", b"v1"))
        for _ in range(3):
            with pytest.raises(Boom):
                h.process(msg("dead"), fail=Boom())
        h.seen.clear()
        batch = [msg("n1"), msg("old"), msg("n2"), msg("n1"), msg("changed", b"v2"), msg("dead"), msg("n2", b"x")]
        outcomes = h.process_batch(batch)
        assert outcomes == [
            Outcome.PROCESSED,
            Outcome.DUPLICATE,
            Outcome.PROCESSED,
            Outcome.DUPLICATE,
            Outcome.CONFLICT,
            Outcome.DEAD,
            Outcome.CONFLICT,
        ]
        assert h.seen == [["n1", "n2"]]
        assert (h.effects("n1"), h.effects("n2"), h.effects("old")) == (1, 1, 1)
        assert h.process_batch(batch[:3]) == [Outcome.DUPLICATE] * 3

    def test_batch_retries_failed_messages(self, h: Harness) -> None:
        """A message whose earlier attempt failed is handed to the batch handler again."""
        with pytest.raises(Boom):
            h.process(msg("r"), fail=Boom())
        h.seen.clear()
        assert h.process_batch([msg("r"), msg("s")]) == [Outcome.PROCESSED, Outcome.PROCESSED]
        assert sorted(h.seen[0]) == ["r", "s"]
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "r").attempts == 2

    def test_batch_handler_failure_rolls_back_the_batch_and_charges_no_message(self, h: Harness) -> None:
        """A failing batch handler commits nothing, propagates unchanged, and counts no attempt for anyone."""
        h.process(msg("before"))
        error = Boom("batch")
        with pytest.raises(Boom) as raised:
            h.process_batch([msg("b1"), msg("before"), msg("b2")], fail=error)
        assert raised.value is error
        assert h.effects() == 1
        assert [h.call("get", "X12:ZZ:ACME>ZZ:HUB", i) for i in ("b1", "b2")] == [None, None]
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "before").status is Status.PROCESSED

    def test_batch_failure_charges_no_one_even_when_a_retry_fails_again(self, h: Harness) -> None:
        """A batch retrying a failed message that fails again leaves that row's attempt count unchanged."""
        with pytest.raises(Boom):
            h.process(msg("r"), fail=Boom())
        with pytest.raises(Boom):
            h.process_batch([msg("r"), msg("s")], fail=Boom())
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "r")
        assert (record.status, record.attempts) == (Status.FAILED, 1)
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "s") is None

    def test_poison_in_an_isolated_batch_of_six_parks_only_itself(self, harness_factory: Any) -> None:
        """max_attempts=1, isolate=True: one poison message of six ends DEAD, the other five PROCESSED once."""
        h = harness_factory(self.store, asynchronous=self.asynchronous, max_attempts=1, horizon=timedelta(0))
        batch = [msg(f"m{i}") for i in range(6)]
        error = Boom("poison")
        results = h.process_batch(batch, fail=error, poison="m3", isolate=True)
        assert results[:3] + results[4:] == [Outcome.PROCESSED] * 5
        assert results[3] is error
        statuses = {r.message_id: r.status for r in h.call("records", limit=10)}
        assert statuses == {f"m{i}": Status.PROCESSED if i != 3 else Status.DEAD for i in range(6)}
        assert [h.effects(f"m{i}") for i in range(6)] == [1, 1, 1, 0, 1, 1]
        assert h.seen[0] == [f"m{i}" for i in range(6)]
        assert h.seen[1:] == [[f"m{i}"] for i in range(6)]
        assert h.process_batch(batch, isolate=True) == [Outcome.DUPLICATE if i != 3 else Outcome.DEAD for i in range(6)]

    def test_poison_in_a_batch_costs_its_batch_mates_no_attempt(self, harness_factory: Any) -> None:
        """max_attempts=5: without isolate nobody is charged; with isolate only the poison counts one attempt."""
        h = harness_factory(self.store, asynchronous=self.asynchronous, max_attempts=5, horizon=timedelta(0))
        batch = [msg(f"m{i}") for i in range(6)]
        with pytest.raises(Boom):
            h.process_batch(batch, fail=Boom(), poison="m2")
        assert h.call("records", limit=10) == []
        results = h.process_batch(batch, fail=Boom(), poison="m2", isolate=True)
        assert [isinstance(r, Boom) for r in results] == [i == 2 for i in range(6)]
        rows = {r.message_id: r for r in h.call("records", limit=10)}
        assert (rows["m2"].status, rows["m2"].attempts) == (Status.FAILED, 1)
        mates = [rows[f"m{i}"] for i in range(6) if i != 2]
        assert {(r.status, r.attempts, r.last_error) for r in mates} == {(Status.PROCESSED, 1, None)}

    def test_isolated_batch_keeps_copies_and_duplicates_in_place(self, h: Harness) -> None:
        """After isolation, repeated keys and known messages keep their outcomes; a copy of the poison fails too."""
        h.process(msg("old"))
        batch = [msg("a"), msg("old"), msg("p"), msg("a"), msg("p"), msg("a", b"other")]
        error = Boom()
        results = h.process_batch(batch, fail=error, poison="p", isolate=True)
        assert results == [Outcome.PROCESSED, Outcome.DUPLICATE, error, Outcome.DUPLICATE, error, Outcome.CONFLICT]
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "p").attempts == 1
        assert h.effects("a") == 1

    def test_isolated_batch_without_failure_is_one_transaction(self, h: Harness) -> None:
        """isolate=True changes nothing while the handler succeeds: one call, one outcome per message."""
        assert h.process_batch([msg("i1"), msg("i2")], isolate=True) == [Outcome.PROCESSED] * 2
        assert h.seen == [["i1", "i2"]]

    def test_a_store_error_stops_the_isolation_for_the_rest_of_the_batch(self, h: Harness) -> None:
        """During isolation a StoreError fills its position and every later one, untried; earlier ones settled."""
        poison, down = Boom("poison"), StoreError("database restarting")
        handler = h.handler(failures={"p": poison, "b": down})
        batch = [msg("a"), msg("p"), msg("b"), msg("c")]
        results = h.call("process_batch", batch, handler, isolate=True)
        assert results == [Outcome.PROCESSED, poison, down, down]
        assert h.seen == [["a", "p", "b", "c"], ["a"], ["p"], ["b"]]
        assert [h.call("get", "X12:ZZ:ACME>ZZ:HUB", i) is None for i in ("a", "p", "b", "c")] == [
            False,
            False,
            True,
            True,
        ]

    def test_transient_failure_in_an_isolated_batch_propagates_and_charges_no_one(self, h: Harness) -> None:
        """A TransientError from the batch handler is not isolated: it propagates and nothing is recorded."""
        error = SourceError("broker went away")
        with pytest.raises(SourceError) as raised:
            h.process_batch([msg("t1"), msg("t2")], fail=error, poison="t2", isolate=True)
        assert raised.value is error
        assert h.call("records") == []
        assert h.seen == [["t1", "t2"]]

    def test_empty_batch_calls_nothing(self, h: Harness) -> None:
        """An empty batch returns no outcome and does not call the handler; neither does an all-duplicate batch."""
        assert h.process_batch([]) == []
        h.process(msg("x"))
        h.seen.clear()
        assert h.process_batch([msg("x")]) == [Outcome.DUPLICATE]
        assert h.seen == []

    # -- lease mode ---------------------------------------------------------------------------------------------
    def test_lease_mode_claims_then_completes_with_a_stable_key(self, h: Harness) -> None:
        """Lease mode runs the handler outside a transaction with an idempotency key and settles it once."""
        assert h.process(msg("L1"), lease=lease(30)) is Outcome.PROCESSED
        assert h.process(msg("L1"), lease=lease(30)) is Outcome.DUPLICATE
        assert len(h.keys) == 1
        assert h.keys[0] is not None
        assert h.keys[0].startswith("edinbox-")
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "L1")
        assert (record.status, record.lease_until) == (Status.PROCESSED, None)

    def test_a_lease_of_days_is_held_that_long(self, h: Harness) -> None:
        """A lease of two days and a few seconds sets lease_until that far ahead (the interval is bound exactly)."""
        with pytest.raises(Crash):
            h.process(msg("L0"), fail=Crash(), lease=timedelta(days=2, seconds=3, microseconds=5))
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "L0")
        assert record.status is Status.IN_PROGRESS
        ahead = record.lease_until - record.received_at
        assert timedelta(days=2, seconds=2) < ahead < timedelta(days=2, seconds=4)

    def test_delivery_during_a_live_lease_is_not_settled(self, h: Harness) -> None:
        """A holder that died mid-effect leaves a live lease: another delivery raises NotSettledError."""
        with pytest.raises(Crash):
            h.process(msg("L2"), fail=Crash(), lease=lease(60))
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "L2").status is Status.IN_PROGRESS
        with pytest.raises(NotSettledError):
            h.process(msg("L2"), lease=lease(60))
        with pytest.raises(NotSettledError):
            h.process(msg("L2"))
        assert len(h.keys) == 1

    def test_expired_lease_is_retried_with_the_same_idempotency_key(self, h: Harness) -> None:
        """After the lease expires the effect runs again with the same key, so the remote side can deduplicate."""
        with pytest.raises(Crash):
            h.process(msg("L3"), fail=Crash(), lease=lease(0.05))
        time.sleep(0.1)
        assert h.process(msg("L3"), lease=lease(30)) is Outcome.PROCESSED
        assert len(h.keys) == 2
        assert h.keys[0] == h.keys[1]
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "L3").attempts == 2

    def test_expired_lease_is_parked_when_at_most_once(self, h: Harness) -> None:
        """At-most-once: an expired lease is parked DEAD for reconciliation instead of running the effect again."""
        with pytest.raises(Crash):
            h.process(msg("L4"), fail=Crash(), lease=lease(0.05))
        time.sleep(0.1)
        assert h.process(msg("L4"), lease=lease(30), at_most_once=True) is Outcome.DEAD
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "L4")
        assert record.status is Status.DEAD
        assert record.last_error is not None
        assert "lease expired" in record.last_error
        assert len(h.keys) == 1

    def test_lease_handler_failure_records_the_attempt(self, h: Harness) -> None:
        """A lease-mode handler exception releases the claim as failed; the next delivery retries it."""
        with pytest.raises(Boom):
            h.process(msg("L5"), fail=Boom("api down"), lease=lease(30))
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "L5")
        assert (record.status, record.lease_until, record.last_error) == (Status.FAILED, None, "Boom: api down")
        assert h.process(msg("L5"), lease=lease(30)) is Outcome.PROCESSED

    def lease_handler(self, h: Harness, inner: list[object], *, extend: bool, late: bool = False) -> Any:
        """A lease-mode handler that outlives a 0.1 s lease, then lets a second delivery of its message try.

        With `extend` it first extends its lease (to 60 s) as a heartbeat; with `late` it extends only after
        the second delivery, as a heartbeat that came too late. `inner` gets what the second delivery got.
        """
        inbox, effect = h.inbox, h.handler()
        if h.asynchronous:

            async def async_handler(tx: Tx, message: Message) -> None:
                if extend and not late:
                    await tx.extend_lease(timedelta(seconds=60))
                    record = await inbox.get(message.source, message.message_id)
                    inner.append(record.lease_until - record.received_at)
                await asyncio.sleep(0.3)
                try:
                    inner.append(await inbox.process(message, effect, lease=lease(30)))
                except NotSettledError as exc:
                    inner.append(exc)
                if late:
                    await tx.extend_lease()

            return async_handler

        def sync_handler(tx: Tx, message: Message) -> None:
            if extend and not late:
                tx.extend_lease(timedelta(seconds=60))
                record = inbox.get(message.source, message.message_id)
                inner.append(record.lease_until - record.received_at)
            time.sleep(0.3)
            try:
                inner.append(inbox.process(message, effect, lease=lease(30)))
            except NotSettledError as exc:
                inner.append(exc)
            if late:
                tx.extend_lease()

        return sync_handler

    def test_a_handler_that_extends_its_lease_is_not_run_twice(self, h: Harness) -> None:
        """A handler outliving its first lease but extending it keeps a concurrent delivery out (NotSettledError)."""
        inner: list[object] = []
        assert h.call("process", msg("E1"), self.lease_handler(h, inner, extend=True), lease=lease(0.1)) is (
            Outcome.PROCESSED
        )
        ahead, second = inner
        assert isinstance(ahead, timedelta)
        assert ahead > timedelta(seconds=50)
        assert isinstance(second, NotSettledError)
        assert h.seen == []
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "E1")
        assert (record.status, record.attempts, record.lease_until) == (Status.PROCESSED, 1, None)

    def test_without_the_heartbeat_an_expired_lease_is_taken_over(self, h: Harness) -> None:
        """The same schedule without extend_lease lets the second delivery run; the first cannot complete."""
        inner: list[object] = []
        with pytest.raises(NotSettledError):
            h.call("process", msg("E2"), self.lease_handler(h, inner, extend=False), lease=lease(0.1))
        assert inner == [Outcome.PROCESSED]
        assert len(h.seen) == 1
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "E2").attempts == 2

    def test_extending_a_lost_lease_raises_not_settled(self, h: Harness) -> None:
        """extend_lease() after another delivery took the message over raises NotSettledError; nothing is charged."""
        inner: list[object] = []
        with pytest.raises(NotSettledError, match="lost"):
            h.call("process", msg("E3"), self.lease_handler(h, inner, extend=True, late=True), lease=lease(0.1))
        assert inner == [Outcome.PROCESSED]
        record = h.call("get", "X12:ZZ:ACME>ZZ:HUB", "E3")
        assert (record.status, record.attempts) == (Status.PROCESSED, 2)

    def overrun(
        self, h: Harness, steps: list[tuple[Any, ...]], inner: list[object], *, fail: Exception | None = None
    ) -> Any:
        """A lease-mode handler that outlives a 0.1 s lease, then runs `steps` (inbox method, arguments...) as other
        consumers of its message would, appending each result or exception to `inner`, then raises `fail` if given.
        """
        inbox = h.inbox
        if h.asynchronous:

            async def async_handler(tx: Tx, message: Message) -> None:
                await asyncio.sleep(0.3)
                for name, *args, options in steps:
                    try:
                        inner.append(await getattr(inbox, name)(*args, **options))
                    except (NotSettledError, Crash) as exc:
                        inner.append(exc)
                if fail is not None:
                    raise fail

            return async_handler

        def sync_handler(tx: Tx, message: Message) -> None:
            time.sleep(0.3)
            for name, *args, options in steps:
                try:
                    inner.append(getattr(inbox, name)(*args, **options))
                except (NotSettledError, Crash) as exc:
                    inner.append(exc)
            if fail is not None:
                raise fail

        return sync_handler

    def test_a_late_completer_commits_nothing_once_another_delivery_completed(self, h: Harness) -> None:
        """The lease expires, a second delivery runs and completes with its on_complete effect; the first one's
        completion then commits nothing (NotSettledError, its on_complete not run): one effect, the second's outcome."""
        m, inner = msg("T1"), list[object]()
        second = ("process", m, h.handler(), {"lease": lease(30), "on_complete": h.completion(m)})
        with pytest.raises(NotSettledError, match="took it over"):
            h.call("process", m, self.overrun(h, [second], inner), lease=lease(0.1), on_complete=h.completion(m))
        assert inner == [Outcome.PROCESSED]
        assert h.effects("T1") == 1
        record = h.call("get", m.source, "T1")
        assert (record.status, record.attempts, record.lease_until) == (Status.PROCESSED, 2, None)
        assert h.process(m, lease=lease(30)) is Outcome.DUPLICATE

    @pytest.mark.parametrize("ends", ["completes", "fails"])
    def test_a_late_holder_leaves_the_live_claim_of_another_delivery_alone(self, h: Harness, ends: str) -> None:
        """The lease expires and a second delivery claims the message, its effect still running (its process died:
        a live lease); the first holder then completes (or fails): it settles nothing, commits no effect, and the
        second claim stays in progress under its own lease."""
        m, inner = msg("T2"), list[object]()
        second = ("process", m, h.handler(fail=Crash()), {"lease": lease(60), "on_complete": h.completion(m)})
        handler = self.overrun(h, [second], inner, fail=Boom("late") if ends == "fails" else None)
        with pytest.raises(NotSettledError if ends == "completes" else Boom):
            h.call("process", m, handler, lease=lease(0.1), on_complete=h.completion(m))
        assert [type(result) for result in inner] == [Crash]
        assert h.effects("T2") == 0
        record = h.call("get", m.source, "T2")
        assert (record.status, record.attempts, record.last_error) == (Status.IN_PROGRESS, 2, None)
        assert record.lease_until > record.received_at + timedelta(seconds=50)

    @pytest.mark.parametrize("ends", ["completes", "fails"])
    def test_a_late_holder_cannot_settle_the_claim_of_a_requeued_conflict(self, h: Harness, ends: str) -> None:
        """The attempt count of a claim is no identity on its own: a requeue resets it. The first holder's lease
        expires; a second delivery completes the message; a copy with another payload conflicts, is requeued and
        claimed (attempt 1 again, its effect running). The first holder's completion (or failure) must settle
        nothing: no second effect of the original, the corrected copy's claim left in progress."""
        original, corrected, inner = msg("T3", b"amount=100"), msg("T3", b"amount=120"), list[object]()
        steps = [
            ("process", original, h.handler(), {"lease": lease(30), "on_complete": h.completion(original)}),
            ("process", corrected, h.handler(), {}),
            ("requeue", original.source, "T3", {}),
            (
                "process",
                corrected,
                h.handler(fail=Crash()),
                {"lease": lease(60), "on_complete": h.completion(corrected)},
            ),
        ]
        handler = self.overrun(h, steps, inner, fail=Boom("late") if ends == "fails" else None)
        with pytest.raises(NotSettledError if ends == "completes" else Boom):
            h.call("process", original, handler, lease=lease(0.1), on_complete=h.completion(original))
        assert inner[:3] == [Outcome.PROCESSED, Outcome.CONFLICT, True]
        assert isinstance(inner[3], Crash)
        assert h.effects("T3") == 1
        record = h.call("get", original.source, "T3")
        assert (record.status, record.attempts, record.fingerprint) == (Status.IN_PROGRESS, 1, corrected.fingerprint)
        assert record.last_error is None

    def test_a_requeued_conflict_gets_an_idempotency_key_of_its_own(self, h: Harness) -> None:
        """The corrected payload of a requeued conflict runs with a new key, the same on each of its redeliveries."""
        assert h.process(msg("K", b"amount=100"), lease=lease(30)) is Outcome.PROCESSED
        assert h.process(msg("K", b"amount=120"), lease=lease(30)) is Outcome.CONFLICT
        assert h.call("requeue", "X12:ZZ:ACME>ZZ:HUB", "K") is True
        with pytest.raises(Crash):
            h.process(msg("K", b"amount=120"), fail=Crash(), lease=lease(0.05))
        time.sleep(0.1)
        assert h.process(msg("K", b"amount=120"), lease=lease(30)) is Outcome.PROCESSED
        assert h.process(msg("K", b"amount=120"), lease=lease(30)) is Outcome.DUPLICATE
        original, corrected, again = h.keys
        assert corrected != original
        assert again == corrected

    # -- purge --------------------------------------------------------------------------------------------------
    def test_purge_deletes_only_old_settled_rows_in_batches(self, h: Harness) -> None:
        """purge() removes processed rows older than the cut-off, whatever the batch size, and nothing unsettled."""
        for i in range(25):
            h.process(msg(f"m{i}"))
        with pytest.raises(Boom):
            h.process(msg("failed"), fail=Boom())
        h.process(msg("m0", b"conflicting"))
        with pytest.raises(Crash):
            h.process(msg("leased"), fail=Crash(), lease=lease(60))
        assert h.call("purge", timedelta(hours=1), batch_size=10) == 0
        backdate(h, 7200)
        assert h.call("purge", timedelta(hours=1), batch_size=10) == 24
        remaining = {r.message_id: r.status for r in h.call("records", limit=1000)}
        assert remaining == {"failed": Status.FAILED, "m0": Status.CONFLICT, "leased": Status.IN_PROGRESS}
        assert h.call("purge", timedelta(0)) == 0

    def test_purge_max_rate_spreads_the_deletes_over_time(self, h: Harness) -> None:
        """purge(max_rate=100) of 100 rows in batches of 10 takes at least a second (the pauses between batches
        that keep it at 100 rows/s), deletes them all, and a rate that is not a positive number is refused."""
        for i in range(100):
            h.process(msg(f"r{i}"))
        backdate(h, 7200)
        for bad in (0, -1, "fast", float("nan"), True):
            with pytest.raises(ConfigurationError, match="max_rate"):
                h.call("purge", timedelta(hours=1), max_rate=bad)
        started = time.monotonic()
        assert h.call("purge", timedelta(hours=1), batch_size=10, max_rate=100) == 100
        elapsed = time.monotonic() - started
        assert 0.99 <= elapsed < 15, elapsed  # unthrottled: eleven small transactions, well under a second
        assert h.call("records", limit=10) == []

    def test_purge_refuses_a_retention_shorter_than_the_horizon(self, h: Harness) -> None:
        """purge(older_than < horizon) raises ConfigurationError and deletes nothing."""
        h.reopen(max_attempts=3, horizon=timedelta(days=7))
        h.process(msg("keep"))
        backdate(h, 2 * 86400)
        with pytest.raises(ConfigurationError, match="horizon"):
            h.call("purge", timedelta(days=1))
        assert h.call("get", "X12:ZZ:ACME>ZZ:HUB", "keep") is not None
        assert h.call("purge", timedelta(days=7)) == 0

    # -- schema -------------------------------------------------------------------------------------------------
    def test_create_schema_is_idempotent_and_verify_accepts_it(self, h: Harness) -> None:
        """create_schema() twice is harmless and verify() passes on the result."""
        h.process(msg("kept"))
        h.call("create_schema")
        h.call("verify")
        assert h.process(msg("kept")) is Outcome.DUPLICATE

    def test_verify_refuses_when_the_unique_key_is_dropped(self, h: Harness) -> None:
        """Without the unique index the pattern cannot work: verify() raises SchemaError until it is restored."""
        h.call("verify")
        h.drop_key()
        with pytest.raises(SchemaError, match="unique index"):
            h.call("verify")
        h.call("create_schema")
        h.call("verify")

    def test_verify_refuses_another_schema_version(self, h: Harness) -> None:
        """A journal written by another schema version is refused by verify() and create_schema()."""
        h.set_version(99)
        with pytest.raises(SchemaError, match="version"):
            h.call("verify")
        with pytest.raises(SchemaError, match="version"):
            h.call("create_schema")

    def test_verify_refuses_a_missing_table(self, h: Harness) -> None:
        """verify() on a table that does not exist raises SchemaError."""
        h.admin(f"DROP TABLE {h.table}")
        with pytest.raises(SchemaError, match="does not exist"):
            h.call("verify")

    def test_a_delivery_to_a_missing_table_is_a_schema_error_chained_from_the_driver(self, h: Harness) -> None:
        """The journal's own INSERT failing (its table dropped under a running inbox) raises SchemaError chained from
        the driver's error, never the driver's error itself; the handler does not run."""
        assert h.process(msg("before")) is Outcome.PROCESSED
        h.admin(f"DROP TABLE {h.table}")
        with pytest.raises(SchemaError) as raised:
            h.process(msg("after"))
        assert raised.value.__cause__ is not None
        assert not isinstance(raised.value.__cause__, InboxError)
        assert h.effects("after") == 0


class TestPostgresSync(InboxContract):
    """The contract on PostgreSQL, sync API."""

    store = "postgresql"
    asynchronous = False


class TestPostgresAsync(InboxContract):
    """The contract on PostgreSQL, async API."""

    store = "postgresql"
    asynchronous = True


class TestMySQLSync(InboxContract):
    """The contract on MariaDB, sync API (PyMySQL)."""

    store = "mysql"
    asynchronous = False


class TestMySQLAsync(InboxContract):
    """The contract on MariaDB, async API (aiomysql)."""

    store = "mysql"
    asynchronous = True


class TestMySQLWithoutReturningSync(InboxContract):
    """The contract on MariaDB taking MySQL 8's batch path (no INSERT ... RETURNING), sync API."""

    store = "mysql-no-returning"
    asynchronous = False


class TestMySQLWithoutReturningAsync(InboxContract):
    """The contract on MariaDB taking MySQL 8's batch path (no INSERT ... RETURNING), async API."""

    store = "mysql-no-returning"
    asynchronous = True


class TestSQLiteFileSync(InboxContract):
    """The contract on an SQLite file, sync API."""

    store = "sqlite-file"
    asynchronous = False


class TestSQLiteFileAsync(InboxContract):
    """The contract on an SQLite file, async API."""

    store = "sqlite-file"
    asynchronous = True


class TestSQLiteMemorySync(InboxContract):
    """The contract on SQLite in memory, sync API."""

    store = "sqlite-memory"
    asynchronous = False


class TestSQLiteMemoryAsync(InboxContract):
    """The contract on SQLite in memory, async API."""

    store = "sqlite-memory"
    asynchronous = True
