"""edinbox.testing: the pytest example of docs/retries.md runs as written, and the harness fails a handler that is
not idempotent under its redeliveries."""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from edinbox import Message, Outcome, Status, Tx
from edinbox.testing import Faults, Harness, MemorySink, MemorySource

DOC = Path(__file__).resolve().parents[2] / "docs" / "retries.md"


def _readme_example() -> dict[str, Any]:
    """The names the documentation's `edinbox.testing` block defines, once executed."""
    section = DOC.read_text(encoding="utf-8").split("## Testing your handlers: `edinbox.testing`", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    namespace: dict[str, Any] = {}
    exec(compile(match.group(1), str(DOC), "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace


@pytest.mark.parametrize("name", ["test_invoices_are_created_once", "test_payments_are_sent_once"])
def test_the_documented_example_passes(name: str) -> None:
    """Each test function of the documentation's example passes as written."""
    _readme_example()[name]()


def test_the_documented_example_fails_without_the_idempotency_key() -> None:
    """The documentation's payment example with the idempotency key dropped (a remote call repeated on every redelivery
    after a transient failure) fails assert_once, naming the messages paid twice."""
    code = DOC.read_text(encoding="utf-8").split("## Testing your handlers: `edinbox.testing`", 1)[1]
    code = re.search(r"```python\n(.*?)```", code, re.DOTALL).group(1)  # type: ignore[union-attr]
    broken = code.replace(", idempotency_key=tx.idempotency_key", "")
    assert broken != code
    namespace: dict[str, Any] = {}
    exec(compile(broken, str(DOC), "exec"), namespace)  # noqa: S102 - our own documentation
    with pytest.raises(AssertionError, match="not exactly once under redelivery"):
        namespace["test_payments_are_sent_once"]()


def test_a_handler_writing_outside_the_transaction_is_caught(tmp_path: Path) -> None:
    """A handler that commits its effect in a database of its own (outside the inbox transaction) writes some
    invoices twice under the harness's faults, and assert_once says so; the same handler on `tx.connection` passes."""
    import sqlite3

    other = sqlite3.connect(tmp_path / "elsewhere.db", isolation_level=None)
    other.execute("CREATE TABLE invoices (number TEXT)")

    def own_connection(tx: Tx, message: Message) -> None:
        other.execute("INSERT INTO invoices (number) VALUES (?)", (message.message_id,))

    def in_transaction(tx: Tx, message: Message) -> None:
        tx.connection.execute("INSERT INTO invoices (number) VALUES (?)", (message.message_id,))

    messages = [Message(f"INV-{n}", "erp", b"x") for n in range(40)]
    with Harness(own_connection) as harness:
        report = harness.run(messages)
    elsewhere = Counter(number for (number,) in other.execute("SELECT number FROM invoices"))
    other.close()
    with pytest.raises(AssertionError, match="not exactly once"):
        report.assert_once(elsewhere)
    assert max(elsewhere.values()) > 1
    with Harness(in_transaction, setup=["CREATE TABLE invoices (number TEXT)"]) as harness:
        report = harness.run(messages)
        report.assert_once(Counter(number for (number,) in harness.query("SELECT number FROM invoices")))


def test_every_fault_strikes_and_every_message_settles_once() -> None:
    """With every fault likely, a run publishes duplicates, crashes between commit and ack and fails transiently,
    yet each message settles PROCESSED once (its redeliveries DUPLICATE) with one effect."""
    sink = MemorySink()

    def handler(tx: Tx, message: Message) -> None:
        tx.connection.execute("INSERT INTO effects (id) VALUES (?)", (message.message_id,))

    faults = Faults(duplicates=0.5, crashes=0.5, transient=0.5, seed=3)
    with Harness(handler, setup=["CREATE TABLE effects (id TEXT)"], faults=faults) as harness:
        report = harness.run(Message(f"m{n}", "s", b"x") for n in range(30))
        effects = Counter(i for (i,) in harness.query("SELECT id FROM effects"))
        rows = harness.inbox.records(limit=100)
    assert report.duplicates > 0
    assert report.crashes > 0
    assert report.transient > 0
    assert set(report.settled) == {f"m{n}" for n in range(30)}
    assert report.outcomes.total() == 30 + report.duplicates  # each broker message acked once
    assert report.outcomes[Outcome.PROCESSED] < 30  # some first copies committed, then crashed before the ack
    assert {(r.status, r.attempts) for r in rows} == {(Status.PROCESSED, 1)}  # transient failures cost no attempt
    report.assert_once(effects)
    assert sink.calls == []


def test_a_failing_handler_is_parked_and_its_retries_are_counted() -> None:
    """A handler failing for one message parks it DEAD after max_attempts runs; assert_once expects no effect of it."""

    def handler(tx: Tx, message: Message) -> None:
        if message.message_id == "bad":
            raise RuntimeError("refused")
        tx.connection.execute("INSERT INTO effects (id) VALUES (?)", (message.message_id,))

    with Harness(handler, setup=["CREATE TABLE effects (id TEXT)"], faults=Faults(0, 0, 0), max_attempts=3) as h:
        report = h.run([Message("good", "s", b"x"), Message("bad", "s", b"x")])
        effects = Counter(i for (i,) in h.query("SELECT id FROM effects"))
    assert report.settled == {"good": Outcome.PROCESSED, "bad": Outcome.DEAD}
    assert (report.runs["bad"], report.failures) == (3, 3)
    report.assert_once(effects)


async def test_the_memory_source_redelivers_what_is_not_acked() -> None:
    """MemorySource: a nacked delivery comes back (after its delay) with its delivery count raised; an acked one
    never does; a rejected one is parked with its reason."""
    clock = [0.0]
    source = MemorySource(clock=lambda: clock[0])
    source.publish(("a", b"1"))
    source.publish(("b", b"2"))
    a, b = await source.receive(max_messages=5, timeout=0)
    assert (a.delivery_count, a.redelivered) == (1, False)
    await source.nack(a, delay=2.0)
    await source.reject(b, reason="bad")
    assert await source.receive(max_messages=5, timeout=0) == []
    assert source.next_due() == 2.0
    clock[0] = 2.0
    [again] = await source.receive(max_messages=5, timeout=0)
    assert (again.message_id, again.delivery_count, again.redelivered) == ("a", 2, True)
    await source.ack(again)
    assert source.pending == 0
    assert source.rejected == [(b, "bad")]


def test_the_memory_sink_applies_a_call_once_per_idempotency_key() -> None:
    """MemorySink keeps every call, and a repeated idempotency key is answered without a second effect."""
    sink = MemorySink()
    assert sink.send("k", b"x", idempotency_key="i1") is True
    assert sink.send("k", b"x", idempotency_key="i1") is False
    assert sink.send("k", b"x") is True
    assert (len(sink.calls), sink.effects["k"]) == (3, 2)


def test_a_lease_mode_handler_gets_a_stable_idempotency_key() -> None:
    """In lease mode every run of one message gets the same tx.idempotency_key, so the sink acts once per message."""
    keys: dict[str, set[str | None]] = {}

    def handler(tx: Tx, message: Message) -> None:
        keys.setdefault(message.message_id, set()).add(tx.idempotency_key)

    with Harness(handler, lease=timedelta(seconds=30), faults=Faults(transient=0.5, seed=1)) as harness:
        report = harness.run(Message(f"p{n}", "s", b"x") for n in range(20))
    assert report.transient > 0
    assert all(len(found) == 1 and None not in found for found in keys.values())
