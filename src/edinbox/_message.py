"""Values shared by every part: the message to deduplicate, the outcome of processing it, and a message to send."""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import NamedTuple

from edinbox._core import MAX_KEY_BYTES, key_problem
from edinbox._errors import LimitError

__all__ = ["Message", "Outcome", "Outgoing"]


class Outcome(enum.Enum):
    """How a settled message ended; every outcome means the caller may ack."""

    PROCESSED = "processed"
    """New: the handler ran and its effects committed with the journal row."""
    DUPLICATE = "duplicate"
    """Already processed with the same fingerprint: nothing ran."""
    CONFLICT = "conflict"
    """Key already processed with a different fingerprint: nothing ran, kept for operators."""
    DEAD = "dead"
    """Parked with its reason until requeued: the handler failed `max_attempts` times, or once permanently."""


@dataclass(frozen=True, slots=True)
class Message:
    """A delivery to deduplicate: its key is (consumer, source, message_id).

    `message_id` and `source` are at most MAX_KEY_BYTES (512) UTF-8 bytes each and hold no NUL, on every store;
    a longer or NUL-bearing key part raises LimitError here, before any SQL.
    """

    message_id: str
    source: str
    payload: bytes = b""
    _: KW_ONLY
    headers: Mapping[str, str] | None = None
    fingerprint: str | None = None

    def __post_init__(self) -> None:
        """Check the key parts and default the fingerprint to the SHA-256 of the payload."""
        if not isinstance(self.message_id, str) or not self.message_id:
            raise ValueError("Message.message_id must be a non-empty string")
        if not isinstance(self.source, str):
            raise ValueError("Message.source must be a string")
        for name in ("message_id", "source"):
            value = getattr(self, name)
            if len(value) > MAX_KEY_BYTES // 4 or "\x00" in value or not value.isascii():
                problem = key_problem(value)
                if problem is not None:
                    raise LimitError(f"Message.{name} {problem}")
        if not isinstance(self.payload, bytes | bytearray | memoryview):
            raise ValueError("Message.payload must be bytes")
        if self.fingerprint is None:
            object.__setattr__(self, "fingerprint", hashlib.sha256(self.payload).hexdigest())

    @property
    def key(self) -> tuple[str, str]:
        """The (source, message_id) pair that identifies this message for one consumer."""
        return (self.source, self.message_id)


class Outgoing(NamedTuple):
    """A message to send: the producer id the receiver keys it by, the payload, and the headers to carry."""

    message_id: str
    payload: bytes
    headers: Mapping[str, str] | None = None
