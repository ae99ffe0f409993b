"""Dead letters: a message parked DEAD is also published, once, through the outbox to the configured error
destination with why it died; sent back, it is a new delivery of the same key."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest

from edinbox import ConfigurationError, Inbox, Message, Outcome, PermanentError, Retry, Status, Tx
from edinbox._message import Outgoing

ERRORS = "amqp://guest:guest@127.0.0.1:5672/?queue=errors"
NO_WAIT = Retry(immediate=100)


class Refused(Exception):
    """The handler's own failure."""


def _refuse(tx: Tx, message: Message) -> None:
    raise Refused("accounting refused\nthe invoice")


def _accept(tx: Tx, message: Message) -> None:
    """A handler with no effect."""


@pytest.fixture
def inbox() -> Iterator[Inbox]:
    """An in-memory inbox with max_attempts=2, no wait between attempts, and an error destination."""
    with Inbox("sqlite://", consumer="accounting", max_attempts=2, retry=NO_WAIT, dead_letters=ERRORS) as made:
        made.create_schema()
        yield made


def _letters(inbox: Inbox) -> list[tuple[str, Outgoing]]:
    """Relay the outbox once; the (destination, message) pairs it sent."""
    sent: list[tuple[str, Outgoing]] = []

    def collect(destination: str, messages: Sequence[Outgoing]) -> None:
        sent.extend((destination, m) for m in messages)

    inbox.relay(collect, destinations=[ERRORS])  # the stored destination has no password: the relay supplies it
    return sent


def test_the_failure_that_parks_publishes_one_letter_with_why(inbox: Inbox) -> None:
    """The second failure (max_attempts=2) parks the row and stores one letter for the error destination: the
    original payload and headers under the message's id, with the exception's type, message (one line) and the
    attempts; the first failure and later deliveries of the dead message store none."""
    message = Message("000000905", "X12:ZZ:ACME>ZZ:HUB", b"ISA...", headers={"traceparent": "00-abc-def-01"})
    with pytest.raises(Refused):
        inbox.process(message, _refuse)
    assert _letters(inbox) == []
    with pytest.raises(Refused):
        inbox.process(message, _refuse)
    assert inbox.process(message, _refuse) is Outcome.DEAD
    [(destination, letter)] = _letters(inbox)
    assert destination == ERRORS
    assert (letter.message_id, letter.payload) == ("000000905", b"ISA...")
    assert letter.headers == {
        "traceparent": "00-abc-def-01",
        "Edinbox-Source": "X12:ZZ:ACME>ZZ:HUB",
        "Edinbox-Message-Id": "000000905",
        "Edinbox-Error-Type": "Refused",
        "Edinbox-Error": "accounting refused the invoice",
        "Edinbox-Attempts": "2",
    }
    assert _letters(inbox) == []  # sent once


def test_a_permanent_failure_is_lettered_at_once_and_a_requeued_one_again(inbox: Inbox) -> None:
    """A PermanentError parks at once with its letter (1 attempt); requeued and parked again, it is lettered again:
    one letter per parking."""

    def unreadable(tx: Tx, message: Message) -> None:
        raise PermanentError("not an invoice")

    message = Message("m", "s", b"x")
    assert inbox.process(message, unreadable) is Outcome.DEAD
    [(_, first)] = _letters(inbox)
    assert (first.headers or {})["Edinbox-Attempts"] == "1"
    assert (first.headers or {})["Edinbox-Error-Type"] == "PermanentError"
    assert inbox.requeue("s", "m") is True
    assert inbox.process(message, unreadable) is Outcome.DEAD
    assert len(_letters(inbox)) == 1


def test_only_the_poison_of_an_isolated_batch_is_lettered(inbox: Inbox) -> None:
    """In an isolated batch the message that parks gets the letter; its batch-mates none."""

    def handler(tx: Tx, batch: list[Message]) -> None:
        if any(m.message_id == "bad" for m in batch):
            raise Refused("bad")

    batch = [Message("a", "s", b"1"), Message("bad", "s", b"2"), Message("b", "s", b"3")]
    inbox.process_batch(batch, handler, isolate=True)
    results = inbox.process_batch(batch, handler, isolate=True)
    assert isinstance(results[1], Refused)
    assert [letter.message_id for _, letter in _letters(inbox)] == ["bad"]


def test_a_redriven_letter_is_a_delivery_of_the_same_key(inbox: Inbox) -> None:
    """The letter sent back to the consumer (its message id, its Edinbox-Source) is the same key: DEAD while parked,
    processed once after an operator's requeue."""
    message = Message("r", "amqp:edi.in", b"payload")
    for _ in range(2):
        with pytest.raises(Refused):
            inbox.process(message, _refuse)
    [(_, letter)] = _letters(inbox)
    headers: dict[str, Any] = dict(letter.headers or {})
    redriven = Message(letter.message_id, headers["Edinbox-Source"], letter.payload, headers=headers)
    assert redriven.key == message.key
    assert inbox.process(redriven, _accept) is Outcome.DEAD
    assert inbox.requeue(*redriven.key) is True
    assert inbox.process(redriven, _accept) is Outcome.PROCESSED
    assert inbox.process(redriven, _accept) is Outcome.DUPLICATE
    record = inbox.get(*redriven.key)
    assert record is not None
    assert record.status is Status.PROCESSED


def test_an_expired_lease_parked_at_most_once_is_lettered() -> None:
    """An at-most-once lease that expired is parked for reconciliation by the next delivery, with its letter."""
    with Inbox("sqlite://", consumer="c", dead_letters=ERRORS) as inbox:
        inbox.create_schema()
        message = Message("l", "s", b"x")

        def crash(tx: Tx, message: Message) -> None:
            raise SystemExit  # the process dies mid-effect: the claim stays, its lease runs out

        with pytest.raises(SystemExit):
            inbox.process(message, crash, lease=timedelta(microseconds=1), at_most_once=True)
        assert inbox.process(message, _accept, lease=timedelta(seconds=30), at_most_once=True) is Outcome.DEAD
        [(_, letter)] = _letters(inbox)
    assert "lease expired" in (letter.headers or {})["Edinbox-Error"]


@pytest.mark.parametrize("destination", ["dir:///var/errors", "not a url", 5])
def test_a_destination_that_cannot_carry_why_is_refused(destination: object) -> None:
    """A spool folder (no headers), a non-URL or a non-string is a ConfigurationError when the inbox is built."""
    with pytest.raises(ConfigurationError):
        Inbox("sqlite://", consumer="c", dead_letters=destination)  # type: ignore[arg-type]
