"""The inbox contract, part two: lease mode, purge, the schema."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

from edinbox import (
    ConfigurationError,
    InboxError,
    Message,
    NotSettledError,
    Outcome,
    SchemaError,
    Status,
    Tx,
)
from edinbox.testing._contract_base import (
    SOURCE,
    Boom,
    Crash,
    InboxHarness,
    InboxHarnessFactory,
    lease,
    msg,
)


class LeaseContract:
    """How lease mode, purge and the schema checks behave on every store."""

    @pytest.fixture
    def h(self, store_harness: InboxHarnessFactory) -> InboxHarness:
        """A fresh inbox with max_attempts=3 and no redelivery horizon."""
        return store_harness(max_attempts=3, horizon=timedelta(0))

    # -- lease mode ---------------------------------------------------------------------------------------------
    def test_lease_mode_claims_then_completes_with_a_stable_key(self, h: InboxHarness) -> None:
        """Lease mode runs the handler outside a transaction with an idempotency key and settles it once."""
        assert h.process(msg("L1"), lease=lease(30)) is Outcome.PROCESSED
        assert h.process(msg("L1"), lease=lease(30)) is Outcome.DUPLICATE
        assert len(h.keys) == 1
        assert h.keys[0] is not None
        assert h.keys[0].startswith("edinbox-")
        record = h.call("get", SOURCE, "L1")
        assert (record.status, record.lease_until) == (Status.PROCESSED, None)

    def test_a_lease_of_days_is_held_that_long(self, h: InboxHarness) -> None:
        """A lease of two days and a few seconds sets lease_until that far ahead (the interval is bound exactly)."""
        with pytest.raises(Crash):
            h.process(msg("L0"), fail=Crash(), lease=timedelta(days=2, seconds=3, microseconds=5))
        record = h.call("get", SOURCE, "L0")
        assert record.status is Status.IN_PROGRESS
        ahead = record.lease_until - record.received_at
        assert timedelta(days=2, seconds=2) < ahead < timedelta(days=2, seconds=4)

    def test_delivery_during_a_live_lease_is_not_settled(self, h: InboxHarness) -> None:
        """A holder that died mid-effect leaves a live lease: another delivery raises NotSettledError."""
        with pytest.raises(Crash):
            h.process(msg("L2"), fail=Crash(), lease=lease(60))
        assert h.call("get", SOURCE, "L2").status is Status.IN_PROGRESS
        with pytest.raises(NotSettledError):
            h.process(msg("L2"), lease=lease(60))
        with pytest.raises(NotSettledError):
            h.process(msg("L2"))
        assert len(h.keys) == 1

    def test_expired_lease_is_retried_with_the_same_idempotency_key(self, h: InboxHarness) -> None:
        """After the lease expires the effect runs again with the same key, so the remote side can deduplicate."""
        with pytest.raises(Crash):
            h.process(msg("L3"), fail=Crash(), lease=lease(0.05))
        time.sleep(0.1)
        assert h.process(msg("L3"), lease=lease(30)) is Outcome.PROCESSED
        assert len(h.keys) == 2
        assert h.keys[0] == h.keys[1]
        assert h.call("get", SOURCE, "L3").attempts == 2

    def test_expired_lease_is_parked_when_at_most_once(self, h: InboxHarness) -> None:
        """At-most-once: an expired lease is parked DEAD for reconciliation instead of running the effect again."""
        with pytest.raises(Crash):
            h.process(msg("L4"), fail=Crash(), lease=lease(0.05))
        time.sleep(0.1)
        assert h.process(msg("L4"), lease=lease(30), at_most_once=True) is Outcome.DEAD
        record = h.call("get", SOURCE, "L4")
        assert record.status is Status.DEAD
        assert record.last_error is not None
        assert "lease expired" in record.last_error
        assert len(h.keys) == 1

    def test_lease_handler_failure_records_the_attempt(self, h: InboxHarness) -> None:
        """A lease-mode handler exception releases the claim as failed; the next delivery retries it."""
        with pytest.raises(Boom):
            h.process(msg("L5"), fail=Boom("api down"), lease=lease(30))
        record = h.call("get", SOURCE, "L5")
        assert (record.status, record.lease_until, record.last_error) == (Status.FAILED, None, "Boom: api down")
        assert h.process(msg("L5"), lease=lease(30)) is Outcome.PROCESSED

    def lease_handler(self, h: InboxHarness, inner: list[object], *, extend: bool, late: bool = False) -> Any:
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

    def test_a_handler_that_extends_its_lease_is_not_run_twice(self, h: InboxHarness) -> None:
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
        record = h.call("get", SOURCE, "E1")
        assert (record.status, record.attempts, record.lease_until) == (Status.PROCESSED, 1, None)

    def test_without_the_heartbeat_an_expired_lease_is_taken_over(self, h: InboxHarness) -> None:
        """The same schedule without extend_lease lets the second delivery run; the first cannot complete."""
        inner: list[object] = []
        with pytest.raises(NotSettledError):
            h.call("process", msg("E2"), self.lease_handler(h, inner, extend=False), lease=lease(0.1))
        assert inner == [Outcome.PROCESSED]
        assert len(h.seen) == 1
        assert h.call("get", SOURCE, "E2").attempts == 2

    def test_extending_a_lost_lease_raises_not_settled(self, h: InboxHarness) -> None:
        """extend_lease() after another delivery took the message over raises NotSettledError; nothing is charged."""
        inner: list[object] = []
        with pytest.raises(NotSettledError, match="lost"):
            h.call("process", msg("E3"), self.lease_handler(h, inner, extend=True, late=True), lease=lease(0.1))
        assert inner == [Outcome.PROCESSED]
        record = h.call("get", SOURCE, "E3")
        assert (record.status, record.attempts) == (Status.PROCESSED, 2)

    def overrun(
        self, h: InboxHarness, steps: list[tuple[Any, ...]], inner: list[object], *, fail: Exception | None = None
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

    def test_a_late_completer_commits_nothing_once_another_delivery_completed(self, h: InboxHarness) -> None:
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
    def test_a_late_holder_leaves_the_live_claim_of_another_delivery_alone(self, h: InboxHarness, ends: str) -> None:
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
    def test_a_late_holder_cannot_settle_the_claim_of_a_requeued_conflict(self, h: InboxHarness, ends: str) -> None:
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

    def test_a_requeued_conflict_gets_an_idempotency_key_of_its_own(self, h: InboxHarness) -> None:
        """The corrected payload of a requeued conflict runs with a new key, the same on each of its redeliveries."""
        assert h.process(msg("K", b"amount=100"), lease=lease(30)) is Outcome.PROCESSED
        assert h.process(msg("K", b"amount=120"), lease=lease(30)) is Outcome.CONFLICT
        assert h.call("requeue", SOURCE, "K") is True
        with pytest.raises(Crash):
            h.process(msg("K", b"amount=120"), fail=Crash(), lease=lease(0.05))
        time.sleep(0.1)
        assert h.process(msg("K", b"amount=120"), lease=lease(30)) is Outcome.PROCESSED
        assert h.process(msg("K", b"amount=120"), lease=lease(30)) is Outcome.DUPLICATE
        original, corrected, again = h.keys
        assert corrected != original
        assert again == corrected

    # -- purge --------------------------------------------------------------------------------------------------
    def test_purge_deletes_only_old_settled_rows_in_batches(self, h: InboxHarness) -> None:
        """purge() removes processed rows older than the cut-off, whatever the batch size, and nothing unsettled."""
        for i in range(25):
            h.process(msg(f"m{i}"))
        with pytest.raises(Boom):
            h.process(msg("failed"), fail=Boom())
        h.process(msg("m0", b"conflicting"))
        with pytest.raises(Crash):
            h.process(msg("leased"), fail=Crash(), lease=lease(60))
        assert h.call("purge", timedelta(hours=1), batch_size=10) == 0
        h.backdate(7200)
        assert h.call("purge", timedelta(hours=1), batch_size=10) == 24
        remaining = {r.message_id: r.status for r in h.call("records", limit=1000)}
        assert remaining == {"failed": Status.FAILED, "m0": Status.CONFLICT, "leased": Status.IN_PROGRESS}
        assert h.call("purge", timedelta(0)) == 0

    def test_purge_max_rate_spreads_the_deletes_over_time(self, h: InboxHarness) -> None:
        """purge(max_rate=100) of 100 rows in batches of 10 takes at least a second (the pauses between batches
        that keep it at 100 rows/s), deletes them all, and a rate that is not a positive number is refused."""
        for i in range(100):
            h.process(msg(f"r{i}"))
        h.backdate(7200)
        for bad in (0, -1, "fast", float("nan"), True):
            with pytest.raises(ConfigurationError, match="max_rate"):
                h.call("purge", timedelta(hours=1), max_rate=bad)
        started = time.monotonic()
        assert h.call("purge", timedelta(hours=1), batch_size=10, max_rate=100) == 100
        elapsed = time.monotonic() - started
        assert 0.99 <= elapsed < 15, elapsed  # unthrottled: eleven small transactions, well under a second
        assert h.call("records", limit=10) == []

    def test_purge_refuses_a_retention_shorter_than_the_horizon(self, h: InboxHarness) -> None:
        """purge(older_than < horizon) raises ConfigurationError and deletes nothing."""
        h.reopen(max_attempts=3, horizon=timedelta(days=7))
        h.process(msg("keep"))
        h.backdate(2 * 86400)
        with pytest.raises(ConfigurationError, match="horizon"):
            h.call("purge", timedelta(days=1))
        assert h.call("get", SOURCE, "keep") is not None
        assert h.call("purge", timedelta(days=7)) == 0

    # -- schema -------------------------------------------------------------------------------------------------
    def test_create_schema_is_idempotent_and_verify_accepts_it(self, h: InboxHarness) -> None:
        """create_schema() twice is harmless and verify() passes on the result."""
        h.process(msg("kept"))
        h.call("create_schema")
        h.call("verify")
        assert h.process(msg("kept")) is Outcome.DUPLICATE

    def test_verify_refuses_another_schema_version(self, h: InboxHarness) -> None:
        """A journal written by another schema version is refused by verify() and create_schema()."""
        h.set_version(99)
        with pytest.raises(SchemaError, match="version"):
            h.call("verify")
        with pytest.raises(SchemaError, match="version"):
            h.call("create_schema")

    def test_verify_refuses_a_missing_table(self, h: InboxHarness) -> None:
        """verify() on a table that does not exist raises SchemaError."""
        h.admin(f"DROP TABLE {h.table}")
        with pytest.raises(SchemaError, match="does not exist"):
            h.call("verify")

    def test_a_delivery_to_a_missing_table_is_a_schema_error_chained_from_the_driver(self, h: InboxHarness) -> None:
        """The journal's own INSERT failing (its table dropped under a running inbox) raises SchemaError chained from
        the driver's error, never the driver's error itself; the handler does not run."""
        assert h.process(msg("before")) is Outcome.PROCESSED
        h.admin(f"DROP TABLE {h.table}")
        with pytest.raises(SchemaError) as raised:
            h.process(msg("after"))
        assert raised.value.__cause__ is not None
        assert not isinstance(raised.value.__cause__, InboxError)
        assert h.effects("after") == 0
