"""The inbox decisions, with no I/O: statuses, what a found journal row means, retries, leases, retention.

Every store and both APIs (sync and async) ask this module what to do; none of them decides on its own.
"""

from __future__ import annotations

import enum
import hashlib
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from edinbox._errors import ConfigurationError, PermanentError, SchemaError, TransientError

__all__ = [
    "COLUMNS",
    "MAX_KEY_BYTES",
    "MIGRATIONS",
    "POOL_SIZE",
    "SCHEMA_VERSION",
    "Action",
    "Failure",
    "Found",
    "Pace",
    "Status",
    "TableName",
    "check_retention",
    "check_version",
    "decide",
    "failure_status",
    "human_duration",
    "idempotency_key",
    "judge",
    "key_problem",
    "migration_steps",
    "parse_table",
]

MIGRATIONS: dict[int, str] = {
    2: "statuses after requeue read requeued",
    3: "the outbox table beside the journal (<journal>_outbox)",
    4: "nothing (the hub's counters were sharded here; the hub's own chain does it now)",
    5: "nothing (the hub's answers table was made here; the hub's own chain does it now)",
    6: "the outbox's unsent rows indexed in id order (<journal>_outbox_unsent): the claim skips the sent rows",
    7: "MariaDB: a processed delivery's values as the journal's defaults (its INSERT names four columns)",
    8: "the journal's retry_at: a failed message waits for it before its next attempt",
    9: "the outbox's destinations without passwords (the relay supplies them from its settings)",
    10: "the journal's trace: the W3C traceparent of the attempt that settled a message",
    11: "the kept payloads beside the journal (<journal>_payloads), indexed for search: the message store",
    12: "PostgreSQL: the status's values checked by a domain (<journal>_status), not by a CHECK on the table",
    13: "the kept payloads' search text written after the settling transaction (SQLite, PostgreSQL): none until then",
    14: "SQLite: the kept payloads' full-text index holds no copy of their words, and a mark says how far it indexed",
}
"""Each version of the journal layout after the first, with what it changes.

Version N is reached by the named queries `v<N>_*` of `sql/<dialect>/migrations.sql`, run in file order, in the
transaction of `migrate()`; adding a version is one line here and its queries there (see DEVELOPERS.md).
"""

SCHEMA_VERSION = max(MIGRATIONS, default=1)
"""Version of the journal layout: `create_schema()` writes it, `migrate()` reaches it, `verify()` demands it."""

COLUMNS = (
    "consumer",
    "source",
    "message_id",
    "fingerprint",
    "status",
    "attempts",
    "last_error",
    "lease_until",
    "received_at",
    "settled_at",
    "payload",
    "conflicts",
    "conflict_fingerprint",
    "conflict_payload",
    "last_conflict_at",
    "retry_at",
    "trace",
)
"""The journal columns, in the order `get` and `records` read them."""

MAX_KEY_BYTES = 512
"""The longest consumer, source or message id, in UTF-8 bytes, on every store (three fit in a PostgreSQL index row)."""

POOL_SIZE = 16
"""The most connections a URL inbox opens when calls overlap (tasks, threads). The pool starts with one and grows
only while calls wait, so one call at a time uses one connection; 16 leaves ordinary concurrency (8 tasks) uncapped,
where psycopg_pool's own default (4) held 8 tasks to 0.63-0.65x of a pool of 8."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")


class Status(enum.Enum):
    """The state of one journal row."""

    PROCESSED = "processed"
    """Settled: the effects committed with the row."""
    IN_PROGRESS = "in_progress"
    """Lease mode: claimed, the non-transactional effect may be running until `lease_until`."""
    FAILED = "failed"
    """The handler failed fewer than `max_attempts` times; the next delivery retries it."""
    DEAD = "dead"
    """Parked: the handler failed `max_attempts` times, or once with a PermanentError (or an expired at-most-once
    lease); an operator decides."""
    CONFLICT = "conflict"
    """Processed, and later delivered again under the same key with another fingerprint; kept for operators."""
    REQUEUED = "requeued"
    """An operator requeued a dead or conflict row: like FAILED with no attempt yet; the next delivery runs it."""


SETTLED = frozenset({Status.PROCESSED, Status.CONFLICT})


class Action(enum.Enum):
    """What to do with a delivery whose key is already in the journal."""

    DUPLICATE = "duplicate"
    """Nothing runs; the caller acks."""
    CONFLICT = "conflict"
    """Nothing runs; record the conflicting fingerprint for operators; the caller acks."""
    DEAD = "dead"
    """Nothing runs: the row is parked; the caller acks."""
    RETRY = "retry"
    """Run the handler again (a failed row, or a lease that expired)."""
    PARK = "park"
    """Park the row as dead now (an expired lease of an at-most-once effect, or attempts exhausted)."""
    BUSY = "busy"
    """A live lease is held elsewhere: not settled, the caller must not ack."""
    WAIT = "wait"
    """A failed row whose retry time has not come: nothing runs, no attempt is counted; not settled, the caller
    must not ack, and hands the delivery back to come again at the retry time (RetryLater)."""


class Failure(enum.Enum):
    """Who pays for a handler's failure."""

    PARK = "park"
    """A PermanentError: the message alone is parked (dead) at once with the reason; it is settled."""
    UNSETTLED = "unsettled"
    """A TransientError (or a configuration error): rollback, nothing recorded, no attempt; not settled."""
    ATTEMPT = "attempt"
    """The handler's own exception: one failed attempt toward max_attempts; the message is not settled."""


def judge(error: Exception) -> Failure:
    """Decide who pays for `error`, a handler failure as edinbox sees it (driver errors already mapped).

    A ConfigurationError or SchemaError is the operator's to fix, not the message's: it costs nothing, as a
    TransientError does.
    """
    if isinstance(error, PermanentError):
        return Failure.PARK
    if isinstance(error, TransientError | ConfigurationError | SchemaError):
        return Failure.UNSETTLED
    return Failure.ATTEMPT


def key_problem(value: str) -> str | None:
    """Why `value` cannot be part of a key (over MAX_KEY_BYTES, a NUL, not encodable), or None when it can.

    The answer starts with the value itself, cut to 32 characters, so it reads as one line.
    """
    shown = repr(value) if len(value) <= 32 else f"{value[:32]!r}..."
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        return f"{shown} is not valid Unicode text (it holds a lone surrogate)"
    if size > MAX_KEY_BYTES:
        return f"{shown} is {size} UTF-8 bytes long, over the limit of {MAX_KEY_BYTES}"
    if "\x00" in value:
        return f"{shown} contains a NUL character, which PostgreSQL text cannot hold"
    return None


@dataclass(frozen=True, slots=True)
class Found:
    """The part of an existing journal row that the decision needs."""

    status: Status
    fingerprint: str
    attempts: int
    lease_until: datetime | None
    retry_at: datetime | None = None
    """When a failed row may run again (None: at once)."""
    trace: str | None = None
    """The W3C traceparent of the attempt that settled the row (None: nothing was traced)."""


@dataclass(frozen=True, slots=True)
class TableName:
    """A validated journal table name, optionally schema-qualified (`edi.inbox`)."""

    schema: str | None
    name: str

    def __str__(self) -> str:
        """Return the dotted form, for messages."""
        return f"{self.schema}.{self.name}" if self.schema else self.name


def parse_table(table: str, *, qualified: bool) -> TableName:
    """Validate `table` (one or two identifiers of letters, digits and `_`) and split off its schema."""
    if not isinstance(table, str):
        raise ConfigurationError(f"table must be a string, not {type(table).__name__}")
    parts = table.split(".")
    if len(parts) > 2 or not all(_IDENTIFIER.fullmatch(part) for part in parts):
        raise ConfigurationError(
            f"invalid table name {table!r}: use 1-48 letters, digits or '_' (not starting with a digit)"
            + (", optionally qualified by a schema as in 'edi.inbox'" if qualified else "")
        )
    if len(parts) == 2:
        if not qualified:
            raise ConfigurationError(f"table {table!r}: this database has no schemas, use an unqualified name")
        return TableName(schema=parts[0], name=parts[1])
    return TableName(schema=None, name=parts[0])


def decide(
    found: Found,
    fingerprint: str,
    *,
    now: datetime,
    max_attempts: int,
    at_most_once: bool = False,
) -> Action:
    """Decide what a delivery of `fingerprint` does when its key is already journaled as `found`."""
    if found.status in SETTLED:
        return Action.DUPLICATE if found.fingerprint == fingerprint else Action.CONFLICT
    if found.status is Status.DEAD:
        return Action.DEAD
    if found.status is Status.IN_PROGRESS:
        if found.lease_until is not None and found.lease_until > now:
            return Action.BUSY
        # The lease expired: the holder crashed or overran, and the effect may or may not have happened.
        if at_most_once or found.attempts >= max_attempts:
            return Action.PARK
        return Action.RETRY
    if found.attempts >= max_attempts:  # a failed row from a run with a larger max_attempts
        return Action.PARK
    if found.status is Status.FAILED and found.retry_at is not None and found.retry_at > now:
        return Action.WAIT  # too early: the delivery goes back to wait, and costs no attempt
    return Action.RETRY


def failure_status(attempts: int, *, max_attempts: int) -> Status:
    """Status of a row whose handler has now failed `attempts` times in all."""
    return Status.DEAD if attempts >= max_attempts else Status.FAILED


def human_duration(span: timedelta | float) -> str:
    """A duration the way the options take it: 30d, 12h, 5m, 1d2h3m4s, else seconds (90s, 1.5s); under a minute to
    three significant digits at most (an age of 4.48124 s is `4.48s`, 0.0123 s `0.0123s`)."""
    seconds = span.total_seconds() if isinstance(span, timedelta) else float(span)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    if seconds < 60:
        return f"{seconds:.3g}s"
    rest, parts = round(seconds), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


def check_retention(older_than: timedelta, *, horizon: timedelta) -> None:
    """Refuse a purge that would forget keys the broker can still redeliver (younger than the horizon)."""
    if older_than < timedelta(0):
        raise ConfigurationError(f"older_than must not be negative, got {human_duration(older_than)}")
    if older_than < horizon:
        raise ConfigurationError(
            "refusing to purge rows younger than the redelivery horizon: "
            f"older_than={human_duration(older_than)} < horizon={human_duration(horizon)}"
        )


class Pace:
    """The purge's throttle: how long to wait before the next batch so that at most `max_rate` rows per second are
    deleted, counted from the first batch (None or infinity: no wait). Pauses come between committed batches, so
    the purge holds no row lock while it waits."""

    def __init__(self, max_rate: float | None, *, clock: Callable[[], float] = time.monotonic) -> None:
        """Refuse a rate that is not a positive number (ConfigurationError); start counting now."""
        if max_rate is not None and (
            isinstance(max_rate, bool) or not isinstance(max_rate, int | float) or not max_rate > 0
        ):
            raise ConfigurationError(f"max_rate must be a positive number of rows per second, got {max_rate!r}")
        self.max_rate = None if max_rate is None or math.isinf(max_rate) else float(max_rate)
        self._clock = clock
        self._started = clock()
        self.rows = 0

    def count(self, rows: int) -> None:
        """Count `rows` more rows deleted."""
        self.rows += rows

    def delay(self) -> float:
        """Seconds to wait before the next batch: until the rows counted so far fit within the rate."""
        if self.max_rate is None:
            return 0.0
        return max(0.0, self._started + self.rows / self.max_rate - self._clock())


def idempotency_key(
    consumer: str, source: str, message_id: str, *, fingerprint: str | None = None, requeued: str | None = None
) -> str:
    """The key a lease-mode handler passes on to a non-transactional API: the same on every redelivery.

    It is f(consumer, source, message_id); when the delivery is the conflicting copy an operator requeued
    (`fingerprint` equals the row's `requeued` conflict fingerprint), the fingerprint joins it, so the remote
    side sees the corrected message as a new request, while its redeliveries keep that same key.
    """
    parts = [consumer, source, message_id]
    if requeued is not None and fingerprint == requeued:
        parts.append(fingerprint)
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return f"edinbox-{digest[:40]}"


def check_version(found: list[int], *, version: int, table: object) -> None:
    """Raise SchemaError unless the version table holds exactly `version`; an older one names `edinbox migrate`."""
    if sorted(found) == [version]:
        return
    if len(found) == 1 and found[0] < version:
        raise SchemaError(
            f"journal table {table} has schema version {found[0]}, this edinbox needs {version}: "
            "run `edinbox migrate` (Inbox.migrate()) to upgrade it"
        )
    raise SchemaError(f"journal table {table} has schema version {found or 'none'}, this edinbox needs {version}")


def migration_steps(found: list[int], *, version: int, table: object) -> list[int]:
    """The versions to apply, in order, to a journal whose version table holds `found`; SchemaError when the
    journal is newer than this edinbox or its version table is not one row."""
    if len(found) != 1:
        raise SchemaError(f"journal table {table} has schema version {found or 'none'}: expected exactly one row")
    if found[0] > version:
        raise SchemaError(
            f"journal table {table} has schema version {found[0]}, newer than this edinbox's {version}: "
            "upgrade edinbox instead"
        )
    return [step for step in sorted(MIGRATIONS) if found[0] < step <= version]
