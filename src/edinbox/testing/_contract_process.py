"""The inbox contract, part one: processing, who pays for a failure, batches."""

from __future__ import annotations

from datetime import timedelta

import pytest

from edinbox import (
    DataError,
    LimitError,
    Message,
    NotSettledError,
    Outcome,
    SourceError,
    Status,
    StoreError,
)
from edinbox.testing._contract_base import (
    SOURCE,
    Boom,
    InboxHarness,
    InboxHarnessFactory,
    Unreadable,
    lease,
    msg,
)


class ProcessContract:
    """How process, failures and batches behave on every store."""

    @pytest.fixture
    def h(self, store_harness: InboxHarnessFactory) -> InboxHarness:
        """A fresh inbox with max_attempts=3 and no redelivery horizon."""
        return store_harness(max_attempts=3, horizon=timedelta(0))

    # -- process ------------------------------------------------------------------------------------------------
    def test_new_message_runs_once_and_redelivery_is_duplicate(self, h: InboxHarness) -> None:
        """A new key runs the handler and commits its effect; redeliveries run nothing and return DUPLICATE."""
        assert h.process(msg("1")) is Outcome.PROCESSED
        assert h.process(msg("1")) is Outcome.DUPLICATE
        assert h.process(msg("1")) is Outcome.DUPLICATE
        assert h.effects("1") == 1
        assert h.seen == [["1"]]
        record = h.call("get", SOURCE, "1")
        assert record.status is Status.PROCESSED
        assert record.attempts == 1
        assert record.settled_at is not None

    def test_same_id_from_another_source_or_consumer_is_new(self, h: InboxHarness) -> None:
        """The key is (consumer, source, message_id): another source or consumer processes its own copy."""
        assert h.process(msg("1", source="A")) is Outcome.PROCESSED
        assert h.process(msg("1", source="B")) is Outcome.PROCESSED
        h.reopen(consumer="archive", max_attempts=3, horizon=timedelta(0))
        assert h.process(msg("1", source="A")) is Outcome.PROCESSED
        assert h.effects("1") == 3

    def test_keys_with_quotes_placeholders_and_non_ascii_are_stored_exactly(self, h: InboxHarness) -> None:
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

    def test_a_nul_or_an_over_long_key_is_refused_before_any_sql(self, h: InboxHarness) -> None:
        """A key part with a NUL or over 512 UTF-8 bytes raises LimitError in Message(); the rest go on."""
        for message_id in ("a\x00b", "9" * 10_000, "é" * 257):
            with pytest.raises(LimitError, match=r"Message\.message_id"):
                msg(message_id)
        with pytest.raises(LimitError, match=r"Message\.source"):
            msg("1", source="S" * 10_000)
        assert h.process_batch([msg("ok1"), msg("ok2")]) == [Outcome.PROCESSED] * 2
        assert h.call("stats").total == 2

    def test_key_parts_of_exactly_512_bytes_work(self, store_harness: InboxHarnessFactory) -> None:
        """A consumer, source and message id of 512 UTF-8 bytes each are journaled, matched and read back."""
        consumer = "c" * 512
        h = store_harness(consumer=consumer, horizon=timedelta(0))
        source, message_id = "s" * 510 + "é", "é" * 256
        message = Message(message_id, source, b"p")
        assert h.process(message) is Outcome.PROCESSED
        assert h.process(message) is Outcome.DUPLICATE
        assert h.process_batch([message, Message("x" * 512, source)]) == [Outcome.DUPLICATE, Outcome.PROCESSED]
        record = h.call("get", source, message_id)
        assert (record.consumer, record.source, record.message_id) == (consumer, source, message_id)

    def test_reused_key_with_other_payload_is_conflict_kept_for_operators(self, h: InboxHarness) -> None:
        """Same key, another fingerprint: CONFLICT, nothing runs, the conflicting copy is kept on the row."""
        assert h.process(msg("7", b"amount=100")) is Outcome.PROCESSED
        assert h.process(msg("7", b"amount=999")) is Outcome.CONFLICT
        assert h.process(msg("7", b"amount=100")) is Outcome.DUPLICATE
        assert h.effects("7") == 1
        record = h.call("get", SOURCE, "7")
        assert record.status is Status.CONFLICT
        assert record.conflicts == 1
        assert record.conflict_payload == b"amount=999"
        assert record.fingerprint == msg("7", b"amount=100").fingerprint
        assert record.last_conflict_at is not None

    def test_handler_exception_rolls_back_records_attempt_and_propagates_unchanged(self, h: InboxHarness) -> None:
        """A failing handler's effect is rolled back, its exception propagates as is, the attempt is recorded."""
        error = Boom("accounting said no")
        with pytest.raises(Boom) as raised:
            h.process(msg("2"), fail=error)
        assert raised.value is error
        assert h.effects() == 0
        record = h.call("get", SOURCE, "2")
        assert record.status is Status.FAILED
        assert record.attempts == 1
        assert record.last_error == "Boom: accounting said no"

    def test_a_handler_error_with_a_nul_or_a_surrogate_is_recorded(self, h: InboxHarness) -> None:
        """An error message no store can hold as is (NUL, lone surrogate) is escaped and the attempt recorded."""
        with pytest.raises(Boom):
            h.process(msg("nul"), fail=Boom("bad \x00 byte \ud800"))
        record = h.call("get", SOURCE, "nul")
        assert (record.status, record.last_error) == (Status.FAILED, "Boom: bad \\x00 byte \\ud800")

    def test_failed_message_is_retried_by_the_next_delivery(self, h: InboxHarness) -> None:
        """After a failure the next delivery runs the handler again and settles it."""
        with pytest.raises(Boom):
            h.process(msg("3"), fail=Boom())
        assert h.process(msg("3")) is Outcome.PROCESSED
        assert h.effects("3") == 1
        assert h.call("get", SOURCE, "3").attempts == 2

    def test_max_attempts_failures_park_the_message_dead_until_requeued(self, h: InboxHarness) -> None:
        """The third failure (max_attempts=3) parks the row with its payload; then DEAD until an operator requeues."""
        for _ in range(3):
            with pytest.raises(Boom):
                h.process(msg("4", b"bad"), fail=Boom("still bad"))
        record = h.call("get", SOURCE, "4")
        assert (record.status, record.attempts, record.payload) == (Status.DEAD, 3, b"bad")
        assert h.process(msg("4", b"bad")) is Outcome.DEAD
        assert len(h.seen) == 3
        assert h.call("requeue", SOURCE, "4") is True
        assert h.process(msg("4", b"bad")) is Outcome.PROCESSED
        assert h.effects("4") == 1
        assert h.call("requeue", SOURCE, "4") is False

    def test_requeue_of_a_conflict_lets_the_corrected_message_run(self, h: InboxHarness) -> None:
        """Requeueing a conflict makes the next delivery of the conflicting copy run the handler, deliberately."""
        h.process(msg("5", b"v1"))
        assert h.process(msg("5", b"v2")) is Outcome.CONFLICT
        assert h.call("requeue", SOURCE, "5") is True
        assert h.process(msg("5", b"v2")) is Outcome.PROCESSED
        assert h.process(msg("5", b"v2")) is Outcome.DUPLICATE
        assert h.effects("5") == 2
        assert h.call("get", SOURCE, "5").fingerprint == msg("5", b"v2").fingerprint

    def test_a_requeued_row_reads_requeued_and_counts_as_such(self, h: InboxHarness) -> None:
        """After requeue a dead row reads `requeued` with 0 attempts (in get, records and stats) until it runs."""
        with pytest.raises(Boom):
            h.process(msg("r", b"bad"), fail=Boom("bad"))
        h.process(msg("r2", b"x"), fail=Unreadable("unreadable"))
        assert h.call("requeue", SOURCE, "r2") is True
        record = h.call("get", SOURCE, "r2")
        assert (record.status, record.attempts, record.lease_until) == (Status.REQUEUED, 0, None)
        assert [r.message_id for r in h.call("records", status="requeued")] == ["r2"]
        stats = h.call("stats")
        assert (stats.requeued, stats.failed, stats.dead, stats.total) == (1, 1, 0, 2)

    def test_a_requeued_row_that_fails_again_counts_from_one(self, h: InboxHarness) -> None:
        """A requeued row is retried like a failed one with its attempts reset: one new failure reads failed, 1."""
        h.process(msg("r3", b"x"), fail=Unreadable("unreadable"))
        assert h.call("requeue", SOURCE, "r3") is True
        with pytest.raises(Boom):
            h.process(msg("r3", b"x"), fail=Boom("again"))
        record = h.call("get", SOURCE, "r3")
        assert (record.status, record.attempts) == (Status.FAILED, 1)
        assert h.process(msg("r3", b"x")) is Outcome.PROCESSED
        assert h.effects("r3") == 1

    def test_a_requeued_row_retries_in_a_batch_and_under_a_lease(self, h: InboxHarness) -> None:
        """process_batch and lease mode run a requeued row's next delivery, as they run a failed one."""
        h.process(msg("rb", b"x"), fail=Unreadable("unreadable"))
        h.process(msg("rl", b"y"), fail=Unreadable("unreadable"))
        assert h.call("requeue", SOURCE, "rb") is True
        assert h.call("requeue", SOURCE, "rl") is True
        assert h.process_batch([msg("rb", b"x")]) == [Outcome.PROCESSED]
        assert h.process(msg("rl", b"y"), lease=lease(30)) is Outcome.PROCESSED
        assert h.call("get", SOURCE, "rl").status is Status.PROCESSED

    def test_forget_allows_deliberate_reprocessing(self, h: InboxHarness) -> None:
        """After forget() the key is new again; forgetting an unknown key returns False."""
        h.process(msg("6"))
        assert h.call("forget", SOURCE, "6") is True
        assert h.call("get", SOURCE, "6") is None
        assert h.process(msg("6")) is Outcome.PROCESSED
        assert h.effects("6") == 2
        assert h.call("forget", SOURCE, "nope") is False

    def test_stats_and_records_by_status(self, h: InboxHarness) -> None:
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
    def test_a_permanent_error_parks_the_message_at_once(self, h: InboxHarness) -> None:
        """A handler's PermanentError (here the user's own subclass) parks the message dead on its first failure."""

        assert h.process(msg("perm", b"garbage"), fail=Unreadable("amount is not a number")) is Outcome.DEAD
        record = h.call("get", SOURCE, "perm")
        assert (record.status, record.attempts, record.payload) == (Status.DEAD, 1, b"garbage")
        assert record.last_error == "Unreadable: amount is not a number"
        assert h.effects() == 0
        assert h.process(msg("perm", b"garbage")) is Outcome.DEAD
        assert len(h.seen) == 1

    def test_a_permanent_error_after_failed_attempts_parks_the_row(self, h: InboxHarness) -> None:
        """A row that failed before is parked by a later PermanentError, without waiting for max_attempts."""
        with pytest.raises(Boom):
            h.process(msg("pa"), fail=Boom())
        assert h.process(msg("pa"), fail=DataError("too long")) is Outcome.DEAD
        record = h.call("get", SOURCE, "pa")
        assert (record.status, record.attempts, record.last_error) == (Status.DEAD, 2, "DataError: too long")

    def test_a_transient_error_of_the_handler_costs_no_attempt(self, h: InboxHarness) -> None:
        """A TransientError from the handler rolls back, records nothing, and propagates as raised."""
        error = StoreError("accounting database restarting")
        with pytest.raises(StoreError) as raised:
            h.process(msg("tr"), fail=error)
        assert raised.value is error
        assert h.call("get", SOURCE, "tr") is None
        with pytest.raises(Boom):
            h.process(msg("tr"), fail=Boom())
        with pytest.raises(NotSettledError):
            h.process(msg("tr"), fail=NotSettledError("busy"))
        record = h.call("get", SOURCE, "tr")
        assert (record.status, record.attempts) == (Status.FAILED, 1)
        assert h.process(msg("tr")) is Outcome.PROCESSED

    def test_lease_mode_parks_a_permanent_error_and_gives_back_a_transient_one(self, h: InboxHarness) -> None:
        """Lease mode: a PermanentError parks the claim (DEAD); a TransientError releases it with no attempt."""
        assert h.process(msg("lp"), fail=DataError("no such currency"), lease=lease(30)) is Outcome.DEAD
        record = h.call("get", SOURCE, "lp")
        assert (record.status, record.lease_until, record.last_error) == (
            Status.DEAD,
            None,
            "DataError: no such currency",
        )
        with pytest.raises(SourceError):
            h.process(msg("lt"), fail=SourceError("api unreachable"), lease=lease(30))
        record = h.call("get", SOURCE, "lt")
        assert (record.status, record.attempts, record.lease_until) == (Status.FAILED, 0, None)
        assert h.process(msg("lt"), lease=lease(30)) is Outcome.PROCESSED
        assert h.call("get", SOURCE, "lt").attempts == 1

    # -- batches ------------------------------------------------------------------------------------------------
    def test_batch_hands_only_new_messages_and_returns_one_outcome_each(self, h: InboxHarness) -> None:
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

    def test_batch_retries_failed_messages(self, h: InboxHarness) -> None:
        """A message whose earlier attempt failed is handed to the batch handler again."""
        with pytest.raises(Boom):
            h.process(msg("r"), fail=Boom())
        h.seen.clear()
        assert h.process_batch([msg("r"), msg("s")]) == [Outcome.PROCESSED, Outcome.PROCESSED]
        assert sorted(h.seen[0]) == ["r", "s"]
        assert h.call("get", SOURCE, "r").attempts == 2

    def test_batch_handler_failure_rolls_back_the_batch_and_charges_no_message(self, h: InboxHarness) -> None:
        """A failing batch handler commits nothing, propagates unchanged, and counts no attempt for anyone."""
        h.process(msg("before"))
        error = Boom("batch")
        with pytest.raises(Boom) as raised:
            h.process_batch([msg("b1"), msg("before"), msg("b2")], fail=error)
        assert raised.value is error
        assert h.effects() == 1
        assert [h.call("get", SOURCE, i) for i in ("b1", "b2")] == [None, None]
        assert h.call("get", SOURCE, "before").status is Status.PROCESSED

    def test_batch_failure_charges_no_one_even_when_a_retry_fails_again(self, h: InboxHarness) -> None:
        """A batch retrying a failed message that fails again leaves that row's attempt count unchanged."""
        with pytest.raises(Boom):
            h.process(msg("r"), fail=Boom())
        with pytest.raises(Boom):
            h.process_batch([msg("r"), msg("s")], fail=Boom())
        record = h.call("get", SOURCE, "r")
        assert (record.status, record.attempts) == (Status.FAILED, 1)
        assert h.call("get", SOURCE, "s") is None

    def test_poison_in_an_isolated_batch_of_six_parks_only_itself(self, store_harness: InboxHarnessFactory) -> None:
        """max_attempts=1, isolate=True: one poison message of six ends DEAD, the other five PROCESSED once."""
        h = store_harness(max_attempts=1, horizon=timedelta(0))
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

    def test_a_failed_batch_that_ran_for_one_message_charges_it_without_a_second_run(
        self, store_harness: InboxHarnessFactory
    ) -> None:
        """isolate=True, a batch whose handler ran for one new message only (its other messages a duplicate and a
        copy of it) and failed: that run is charged as attempt 1, the copy holds the same exception, the duplicate
        settles; then a batch of one, retried at once, fails as attempt 2, which parks it DEAD at max_attempts=2.
        The handler is called once per batch: never again to isolate a failure that can only be that message's."""
        h = store_harness(max_attempts=2, horizon=timedelta(0))
        h.process(msg("old"))
        h.seen.clear()
        error = Boom("p")
        assert h.process_batch([msg("old"), msg("p"), msg("p")], fail=error, isolate=True) == [
            Outcome.DUPLICATE,
            error,
            error,
        ]
        assert h.seen == [["p"]]
        record = h.call("get", SOURCE, "p")
        assert (record.status, record.attempts) == (Status.FAILED, 1)
        assert h.process_batch([msg("p")], fail=error, isolate=True) == [error]
        assert h.seen == [["p"], ["p"]]
        record = h.call("get", SOURCE, "p")
        assert (record.status, record.attempts, h.effects("p")) == (Status.DEAD, 2, 0)

    def test_poison_in_a_batch_costs_its_batch_mates_no_attempt(self, store_harness: InboxHarnessFactory) -> None:
        """max_attempts=5: without isolate nobody is charged; with isolate only the poison counts one attempt."""
        h = store_harness(max_attempts=5, horizon=timedelta(0))
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

    def test_isolated_batch_keeps_copies_and_duplicates_in_place(self, h: InboxHarness) -> None:
        """After isolation, repeated keys and known messages keep their outcomes; a copy of the poison fails too."""
        h.process(msg("old"))
        batch = [msg("a"), msg("old"), msg("p"), msg("a"), msg("p"), msg("a", b"other")]
        error = Boom()
        results = h.process_batch(batch, fail=error, poison="p", isolate=True)
        assert results == [Outcome.PROCESSED, Outcome.DUPLICATE, error, Outcome.DUPLICATE, error, Outcome.CONFLICT]
        assert h.call("get", SOURCE, "p").attempts == 1
        assert h.effects("a") == 1

    def test_isolated_batch_without_failure_is_one_transaction(self, h: InboxHarness) -> None:
        """isolate=True changes nothing while the handler succeeds: one call, one outcome per message."""
        assert h.process_batch([msg("i1"), msg("i2")], isolate=True) == [Outcome.PROCESSED] * 2
        assert h.seen == [["i1", "i2"]]

    def test_a_store_error_stops_the_isolation_for_the_rest_of_the_batch(self, h: InboxHarness) -> None:
        """During isolation a StoreError fills its position and every later one, untried; earlier ones settled."""
        poison, down = Boom("poison"), StoreError("database restarting")
        handler = h.handler(failures={"p": poison, "b": down})
        batch = [msg("a"), msg("p"), msg("b"), msg("c")]
        results = h.call("process_batch", batch, handler, isolate=True)
        assert results == [Outcome.PROCESSED, poison, down, down]
        assert h.seen == [["a", "p", "b", "c"], ["a"], ["p"], ["b"]]
        assert [h.call("get", SOURCE, i) is None for i in ("a", "p", "b", "c")] == [
            False,
            False,
            True,
            True,
        ]

    def test_transient_failure_in_an_isolated_batch_propagates_and_charges_no_one(self, h: InboxHarness) -> None:
        """A TransientError from the batch handler is not isolated: it propagates and nothing is recorded."""
        error = SourceError("broker went away")
        with pytest.raises(SourceError) as raised:
            h.process_batch([msg("t1"), msg("t2")], fail=error, poison="t2", isolate=True)
        assert raised.value is error
        assert h.call("records") == []
        assert h.seen == [["t1", "t2"]]

    def test_empty_batch_calls_nothing(self, h: InboxHarness) -> None:
        """An empty batch returns no outcome and does not call the handler; neither does an all-duplicate batch."""
        assert h.process_batch([]) == []
        h.process(msg("x"))
        h.seen.clear()
        assert h.process_batch([msg("x")]) == [Outcome.DUPLICATE]
        assert h.seen == []
