"""A Hypothesis state machine: random deliveries, redeliveries, batches, failures, purges and operator actions,
checked against a model: every effect happens once per processing of a key, and no settled message is lost."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from inbox_harness import Harness, MySQLHarness, PostgresHarness, SQLiteFileHarness, SQLiteMemoryHarness

from edinbox import Message, Outcome, Status
from services import MYSQL_URL, require_service

MAX_ATTEMPTS = 3
SOURCE = "partner"
IDS = st.sampled_from(["a", "b", "c", "d"])
PAYLOADS = st.sampled_from([b"v1", b"v2"])


class Boom(Exception):
    """A handler failure."""


@dataclass
class Row:
    """The model of one journal row."""

    status: Status
    payload: bytes
    attempts: int


class InboxMachine(RuleBasedStateMachine):
    """Drives one inbox and a model side by side."""

    make: ClassVar[Any]

    def __init__(self) -> None:
        super().__init__()
        self.h: Harness = self.make()
        self.h.make(self.h.target, max_attempts=MAX_ATTEMPTS, horizon=timedelta(0))
        self.rows: dict[str, Row] = {}
        self.effects: dict[str, int] = {}

    def teardown(self) -> None:
        """Drop the journal."""
        self.h.close()

    def expect(self, message_id: str, payload: bytes, claimed: dict[str, bytes]) -> Outcome:
        """The model's outcome for one delivery (`claimed`: keys this transaction runs, with their payload)."""
        if message_id in claimed:
            return Outcome.DUPLICATE if claimed[message_id] == payload else Outcome.CONFLICT
        row = self.rows.get(message_id)
        if row is None or row.status in (Status.FAILED, Status.REQUEUED):
            claimed[message_id] = payload
            return Outcome.PROCESSED
        if row.status is Status.DEAD:
            return Outcome.DEAD
        return Outcome.DUPLICATE if row.payload == payload else Outcome.CONFLICT

    def settle(self, deliveries: list[tuple[str, bytes]], outcomes: list[Outcome], claimed: dict[str, bytes]) -> None:
        """Apply committed outcomes to the model."""
        for (message_id, payload), outcome in zip(deliveries, outcomes, strict=True):
            if outcome is Outcome.PROCESSED:
                attempts = self.rows[message_id].attempts + 1 if message_id in self.rows else 1
                self.rows[message_id] = Row(Status.PROCESSED, payload, attempts)
                self.effects[message_id] = self.effects.get(message_id, 0) + 1
        for (message_id, _), outcome in zip(deliveries, outcomes, strict=True):
            if outcome is Outcome.CONFLICT:
                self.rows[message_id].status = Status.CONFLICT
        del claimed

    def fail(self, claimed: dict[str, bytes]) -> None:
        """Apply a failed attempt of every claimed key to the model."""
        for message_id, payload in claimed.items():
            attempts = self.rows[message_id].attempts + 1 if message_id in self.rows else 1
            status = Status.DEAD if attempts >= MAX_ATTEMPTS else Status.FAILED
            self.rows[message_id] = Row(status, payload, attempts)

    @rule(message_id=IDS, payload=PAYLOADS, failing=st.booleans())
    def deliver(self, message_id: str, payload: bytes, failing: bool) -> None:
        """One delivery, whose handler may fail."""
        claimed: dict[str, bytes] = {}
        expected = self.expect(message_id, payload, claimed)
        if failing and claimed:
            with pytest.raises(Boom):
                self.h.process(Message(message_id, SOURCE, payload), fail=Boom())
            self.fail(claimed)
            return
        outcome = self.h.process(Message(message_id, SOURCE, payload), fail=Boom() if failing else None)
        assert outcome is expected
        self.settle([(message_id, payload)], [outcome], claimed)

    @rule(deliveries=st.lists(st.tuples(IDS, PAYLOADS), min_size=1, max_size=6), failing=st.booleans())
    def deliver_batch(self, deliveries: list[tuple[str, bytes]], failing: bool) -> None:
        """A batch with repeats, whose handler may fail (then nothing commits and no attempt is counted)."""
        claimed: dict[str, bytes] = {}
        expected = [self.expect(message_id, payload, claimed) for message_id, payload in deliveries]
        messages = [Message(message_id, SOURCE, payload) for message_id, payload in deliveries]
        if failing and claimed:
            with pytest.raises(Boom):
                self.h.process_batch(messages, fail=Boom())
            return
        assert self.h.process_batch(messages, fail=Boom() if failing else None) == expected
        self.settle(deliveries, expected, claimed)

    @rule(deliveries=st.lists(st.tuples(IDS, PAYLOADS), min_size=1, max_size=6), poison=IDS)
    def deliver_isolated_batch(self, deliveries: list[tuple[str, bytes]], poison: str) -> None:
        """An isolated batch whose handler fails on one key: only that key is charged, the others settle."""
        claimed: dict[str, bytes] = {}
        expected = [self.expect(message_id, payload, claimed) for message_id, payload in deliveries]
        messages = [Message(message_id, SOURCE, payload) for message_id, payload in deliveries]
        results = self.h.process_batch(messages, fail=Boom(), poison=poison, isolate=True)
        if poison not in claimed:  # the handler never got the poison: one transaction, as without isolate
            assert results == expected
            self.settle(deliveries, expected, claimed)
            return
        failed = False
        for (message_id, payload), result in zip(deliveries, results, strict=True):
            alone: dict[str, bytes] = {}
            if message_id == poison and failed:  # a later copy of the key whose first copy did not settle
                assert isinstance(result, Boom)
                continue
            outcome = self.expect(message_id, payload, alone)
            if message_id == poison and alone:
                assert isinstance(result, Boom)
                self.fail(alone)
                failed = True
            else:
                assert result is outcome
                self.settle([(message_id, payload)], [outcome], alone)

    @rule()
    def purge(self) -> None:
        """Purge every processed row (no horizon): conflict, failed and dead rows stay."""
        gone = [k for k, row in self.rows.items() if row.status is Status.PROCESSED]
        assert self.h.call("purge", timedelta(0), batch_size=2) == len(gone)
        for message_id in gone:
            del self.rows[message_id]

    @rule(message_id=IDS)
    def requeue(self, message_id: str) -> None:
        """An operator requeues a dead or conflict row."""
        row = self.rows.get(message_id)
        requeued = row is not None and row.status in (Status.DEAD, Status.CONFLICT)
        assert self.h.call("requeue", SOURCE, message_id) is requeued
        if row is not None and requeued:
            row.status, row.attempts = Status.REQUEUED, 0
            row.payload = b"?"  # the conflicting payload is not tracked: any next delivery runs

    @rule(message_id=IDS)
    def forget(self, message_id: str) -> None:
        """An operator forgets a row for deliberate reprocessing."""
        assert self.h.call("forget", SOURCE, message_id) is (message_id in self.rows)
        self.rows.pop(message_id, None)

    @invariant()
    def journal_matches_the_model(self) -> None:
        """Every settled message is still journaled as the model says, with its attempt count."""
        for message_id in ("a", "b", "c", "d"):
            record = self.h.call("get", SOURCE, message_id)
            row = self.rows.get(message_id)
            assert (record is None) == (row is None), message_id
            if record is not None and row is not None:
                assert (record.status, record.attempts) == (row.status, row.attempts), message_id

    @invariant()
    def effects_happen_once_per_processing(self) -> None:
        """The committed effects are exactly the model's: once per processing of a key, never for a duplicate."""
        for message_id in ("a", "b", "c", "d"):
            assert self.h.effects(message_id) == self.effects.get(message_id, 0), message_id


FAST = settings(max_examples=40, stateful_step_count=20, deadline=None, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=12, stateful_step_count=15, deadline=None, suppress_health_check=list(HealthCheck))


class SQLiteMemoryMachine(InboxMachine):
    """The machine on SQLite in memory, sync API."""

    make = staticmethod(lambda: SQLiteMemoryHarness(table="inbox", asynchronous=False))


class SQLiteMemoryAsyncMachine(InboxMachine):
    """The machine on SQLite in memory, async API."""

    make = staticmethod(lambda: SQLiteMemoryHarness(table="inbox", asynchronous=True))


TestSQLiteMemoryMachine = SQLiteMemoryMachine.TestCase
TestSQLiteMemoryMachine.settings = FAST
TestSQLiteMemoryAsyncMachine = SQLiteMemoryAsyncMachine.TestCase
TestSQLiteMemoryAsyncMachine.settings = SLOW


@pytest.mark.slow
def test_state_machine_on_postgresql(postgres_url: str) -> None:
    """The same machine against PostgreSQL (schema-qualified table), fewer examples."""

    class PostgresMachine(InboxMachine):
        make = staticmethod(
            lambda: PostgresHarness(postgres_url, schema="t" + uuid.uuid4().hex[:12], asynchronous=False)
        )

    PostgresMachine.TestCase.settings = settings(SLOW, max_examples=8)
    PostgresMachine.TestCase().runTest()


@pytest.mark.slow
def test_state_machine_on_mariadb() -> None:
    """The same machine against MariaDB, async API (asyncmy), fewer examples."""
    require_service("mariadb")

    class MariaDBMachine(InboxMachine):
        make = staticmethod(lambda: MySQLHarness(MYSQL_URL, table="t" + uuid.uuid4().hex[:12], asynchronous=True))

    MariaDBMachine.TestCase.settings = settings(SLOW, max_examples=3)
    MariaDBMachine.TestCase().runTest()


@pytest.mark.slow
def test_state_machine_on_an_sqlite_file(tmp_path: Path) -> None:
    """The same machine against an SQLite file, async API."""

    class FileMachine(InboxMachine):
        make = staticmethod(
            lambda: SQLiteFileHarness(tmp_path / f"{uuid.uuid4().hex}.db", table="inbox", asynchronous=True)
        )

    FileMachine.TestCase.settings = SLOW
    FileMachine.TestCase().runTest()
