"""The dead-letter records of a Kafka source's rejects (no I/O): the record itself, or a stand-in without its payload.

A rejected record is produced to the dead-letter topic whole: its payload, its key, its headers, and two more
headers, `edinbox-reason` (why it was parked) and `edinbox-from` (`topic/partition/offset` where it was read). A
payload the producer or the dead-letter topic refuses as too large (MSG_SIZE_TOO_LARGE: over the producer's
`message.max.bytes`, or the broker's or topic's limit) can never be produced, however often it is tried: its record
is parked with a stand-in instead, the same record without the payload (an empty value, not a null one, which a
compacted topic would take for a deletion) and with two more headers, `edinbox-size` (the payload's size in bytes)
and `edinbox-payload` (why it was left out and where the whole record is: the topic keeps it until its retention
removes it).

The reject says where the payload is when its dead letter lacks it (`Posted.kept`, `payload_at`): the hub's rejected
table then says so too, instead of pointing at the dead letters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edinbox.sources._base import Delivery

__all__ = ["Letter", "Posted", "letter", "payload_at", "stand_in", "too_large"]


@dataclass(frozen=True, slots=True)
class Letter:
    """One record for the dead-letter topic."""

    value: bytes
    key: bytes
    headers: list[tuple[str, str]]
    whole: bool
    """True when it carries the rejected record's payload, False for a stand-in."""


@dataclass(frozen=True, slots=True)
class Posted:
    """What became of a reject's dead letter once the brokers answered."""

    error: str | None = None
    """Why it failed (its record is sought back, read and rejected again); None when the record is parked."""
    kept: str = ""
    """Where the payload is when the dead letter does not carry it (a stand-in, or no dead letter at all); empty when
    it does."""


def payload_at(delivery: Delivery, *, topic: str, url: str, dead_letter: str, stand_in: bool) -> str:
    """Where the payload of a record parked without it is: the topic it was read from, while its retention keeps it
    (worded to follow "the whole payload is in")."""
    why = (
        f"its dead letter in {dead_letter} is a stand-in without it, too large for {dead_letter}"
        if stand_in
        else f"{dead_letter} refused even a stand-in without it: it has no dead letter"
    )
    return f"the topic {topic} of {url} at {delivery.coordinates} while its retention keeps it ({why})"


def letter(delivery: Delivery, *, reason: str) -> Letter:
    """The rejected record whole, with its reason and where it was read."""
    headers = [*delivery.headers.items(), ("edinbox-reason", reason), ("edinbox-from", delivery.coordinates)]
    return Letter(delivery.payload, delivery.key.encode(), headers, whole=True)


def stand_in(delivery: Delivery, *, reason: str, refused: str) -> Letter:
    """The rejected record without its payload, which the producer or the topic `refused` as too large."""
    kept = f"left out ({refused}); the whole record is at {delivery.coordinates} while the topic keeps it"
    size = delivery.size if delivery.size is not None else len(delivery.payload)
    headers = [*letter(delivery, reason=reason).headers, ("edinbox-size", str(size)), ("edinbox-payload", kept)]
    return Letter(b"", delivery.key.encode(), headers, whole=False)


def too_large(ck: Any, error: Any) -> bool:
    """Whether librdkafka's error says the record is over a size limit (the producer's, the broker's, the topic's)."""
    codes = {getattr(ck.KafkaError, name, None) for name in ("MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE")}
    return error is not None and hasattr(error, "code") and error.code() in codes - {None}
