"""Public values of the inbox: the handler's transaction view, a journal row, and the counts per status."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from edinbox._core import Status

__all__ = ["Record", "Stats", "Tx"]


@dataclass(frozen=True, slots=True)
class Tx:
    """What a handler gets: the driver's connection inside the inbox transaction, and how to talk to it.

    `connection` is the driver's own object (psycopg (Async)Connection, sqlite3 / aiosqlite Connection); it is
    None in lease mode, where the handler runs outside any transaction and passes `idempotency_key` on instead.
    `dialect` is "postgresql" or "sqlite".
    """

    connection: Any
    dialect: str
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """One journal row, as operators see it."""

    consumer: str
    source: str
    message_id: str
    fingerprint: str
    status: Status
    attempts: int
    last_error: str | None
    lease_until: datetime | None
    received_at: datetime
    settled_at: datetime | None
    payload: bytes | None
    """Kept only while the row is parked (dead), for operators."""
    conflicts: int
    """How many deliveries reused this key with another fingerprint."""
    conflict_fingerprint: str | None
    conflict_payload: bytes | None
    last_conflict_at: datetime | None


@dataclass(frozen=True, slots=True)
class Stats:
    """Journal rows of one consumer, counted by status."""

    processed: int = 0
    in_progress: int = 0
    failed: int = 0
    dead: int = 0
    conflict: int = 0

    @property
    def total(self) -> int:
        """Every row of the consumer."""
        return self.processed + self.in_progress + self.failed + self.dead + self.conflict

    @classmethod
    def from_counts(cls, counts: dict[Status, int]) -> Stats:
        """Build from a status -> count mapping (missing statuses count zero)."""
        return cls(**{status.value: counts.get(status, 0) for status in Status})
