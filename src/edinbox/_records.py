"""Public values of the inbox: the handler's transaction view, a journal row, and the counts per status."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from edinbox._core import Status
from edinbox._errors import ConfigurationError
from edinbox._outbox import publish_params

__all__ = ["Record", "Stats", "Tx"]


@dataclass(frozen=True, slots=True)
class Tx:
    """What a handler gets: the driver's connection inside the inbox transaction, and how to talk to it.

    `connection` is the driver's own object (psycopg (Async)Connection, PyMySQL / asyncmy Connection, sqlite3 /
    aiosqlite Connection; the Session with `process(..., session=)`), so the handler uses that driver's API and
    placeholders: a cursor (`connection.cursor()`) is what every driver offers, PyMySQL's and asyncmy's connections
    have no `execute`. It is None in lease mode, where the handler runs outside any transaction and passes
    `idempotency_key` on instead. `dialect` is "postgresql", "mysql" (MariaDB and MySQL) or "sqlite". `unit` runs
    the store's named statements (`sql/<dialect>/*.sql`) in this same transaction: `await tx.unit.run(name,
    params)` or `tx.unit.fetch(...)` (None in lease mode).
    """

    connection: Any
    dialect: str
    idempotency_key: str | None = None
    _lease: Callable[[timedelta | None], Any] | None = field(default=None, repr=False, compare=False)
    unit: Any = field(default=None, repr=False, compare=False)

    def publish(self, destination: str, payload: bytes, *, key: str, headers: Mapping[str, str] | None = None) -> Any:
        """Store a message for `destination` (a URL: dir://, amqp://, nats://, redis://, kafka://) in the outbox,
        inside this transaction: a relay sends it only once the transaction commits, with `key` as the producer id.

        Under AsyncInbox, await it. `headers` are kept with the row. ConfigurationError for a destination that is
        not a URL, an empty key or a payload that is not bytes, LimitError for a key over the key limit, and
        ConfigurationError in lease mode (no transaction to publish in).
        """
        if self.unit is None:
            raise ConfigurationError("publish() needs a transaction: lease mode runs the handler outside one")
        return self.unit.run("outbox_insert", publish_params(destination, payload, key=key, headers=headers))

    def publish_many(self, messages: Sequence[tuple[str, bytes, str]]) -> Any:
        """Store several messages `(destination, payload, key)` as `publish` stores each, in one batch of statements
        (under AsyncInbox, await it)."""
        if self.unit is None:
            raise ConfigurationError("publish_many() needs a transaction: lease mode runs the handler outside one")
        rows = [publish_params(destination, payload, key=key, headers=None) for destination, payload, key in messages]
        return self.unit.run_many("outbox_insert", rows)

    def extend_lease(self, duration: timedelta | None = None) -> Any:
        """Lease mode: move the lease's deadline to now + `duration` (default: the lease given to `process`).

        The new deadline commits at once, in a short transaction of its own, so a long handler can call it as a
        heartbeat and no other delivery takes the message over meanwhile. Under AsyncInbox, await it. Raises
        NotSettledError when the lease was lost (it expired and another delivery took the message over: stop,
        the effect belongs to that delivery now), ConfigurationError outside lease mode.
        """
        if self._lease is None:
            raise ConfigurationError("extend_lease() needs lease mode: process(message, handler, lease=...)")
        return self._lease(duration)


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
    retry_at: datetime | None = None
    """When a failed row may run again (a delivery before it is handed back to wait); None: at once."""
    trace: str | None = None
    """The W3C traceparent of the attempt that settled the row (processed); None when nothing was traced."""

    @classmethod
    def from_row(cls, row: Sequence[Any], timestamp: Callable[[Any], datetime | None]) -> Record:
        """Build from a row in `_core.COLUMNS` order; `timestamp` turns the store's timestamps into datetimes."""
        received_at = timestamp(row[8]) or datetime.now().astimezone()  # NOT NULL in the schema
        return cls(
            consumer=row[0],
            source=row[1],
            message_id=row[2],
            fingerprint=row[3],
            status=Status(row[4]),
            attempts=row[5],
            last_error=row[6],
            lease_until=timestamp(row[7]),
            received_at=received_at,
            settled_at=timestamp(row[9]),
            payload=None if row[10] is None else bytes(row[10]),
            conflicts=row[11],
            conflict_fingerprint=row[12],
            conflict_payload=None if row[13] is None else bytes(row[13]),
            last_conflict_at=timestamp(row[14]),
            retry_at=timestamp(row[15]) if len(row) > 15 else None,
            trace=row[16] if len(row) > 16 else None,
        )


@dataclass(frozen=True, slots=True)
class Stats:
    """Journal rows of one consumer, counted by what they say (rows, not deliveries).

    `processed` counts every key whose effect committed, conflicts included: a conflict is counted beside the
    processed row, never instead of it (after PROCESSED then CONFLICT, processed stays 1 and conflict is 1).
    `conflict` counts those processed keys that were later delivered with other content. `failed`, `requeued`,
    `dead` and `in_progress` count keys whose effect has not committed. `total` is the number of rows.
    """

    processed: int = 0
    in_progress: int = 0
    failed: int = 0
    dead: int = 0
    conflict: int = 0
    requeued: int = 0

    @property
    def total(self) -> int:
        """Every row of the consumer (a conflict row is inside `processed`)."""
        return self.processed + self.in_progress + self.failed + self.dead + self.requeued

    @classmethod
    def from_counts(cls, counts: dict[Status, int]) -> Stats:
        """Build from rows counted by status (missing statuses count zero); conflict rows count as processed too."""
        values = {status.value: counts.get(status, 0) for status in Status}
        values["processed"] += values["conflict"]
        return cls(**values)
