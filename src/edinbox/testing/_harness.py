"""A harness that runs a handler through a real inbox under the faults of an at-least-once broker.

The producer publishes some messages twice, the consumer dies between the commit and the ack (the broker brings the
delivery back), and a transient failure strikes after the handler ran but before the commit (everything rolls back,
the delivery comes back). A handler whose effect is idempotent under the inbox makes one effect per message whatever
happens; `Report.assert_once` checks it against the effects counted where they landed.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import TracebackType
from typing import Any, Self

from edinbox._errors import ConfigurationError, RetryLater, StoreError, TransientError
from edinbox._message import Message, Outcome
from edinbox._records import Tx
from edinbox._retry import Retry
from edinbox._sync_inbox import Inbox
from edinbox.testing._memory import MemorySource

__all__ = ["Faults", "Harness", "Report"]

Handler = Callable[[Tx, Message], object]

NO_WAIT = Retry(immediate=1_000_000)
"""The harness's default retry policy: a failed message may run again at once (the harness tests effects, not
waits; give `retry=` to test those)."""


class InjectedFault(StoreError):
    """The harness's transient failure, raised after the handler ran and before the commit."""


@dataclass(frozen=True, slots=True)
class Faults:
    """How often each fault strikes (probabilities, 0 to 1), drawn from `seed`."""

    duplicates: float = 0.3
    """A message is published twice (a producer's retry: a new broker message with the same key)."""
    crashes: float = 0.3
    """A delivery is settled but the consumer dies before the ack: the broker delivers it again."""
    transient: float = 0.3
    """A TransientError strikes after the handler ran, before the commit: rolled back, delivered again."""
    seed: int = 0

    def __post_init__(self) -> None:
        """Refuse a probability outside [0, 1), which could never let a message through."""
        for name in ("duplicates", "crashes", "transient"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 <= value < 1:
                raise ConfigurationError(f"Faults.{name} must be a probability in [0, 1), got {value!r}")


@dataclass(slots=True)
class Report:
    """What a harness run did: deliveries, faults injected, handler runs and how each message settled."""

    deliveries: int = 0
    duplicates: int = 0
    crashes: int = 0
    transient: int = 0
    failures: int = 0
    """Deliveries whose handler raised its own exception (an attempt counted)."""
    waits: int = 0
    """Deliveries that came before their message's retry time (RetryLater)."""
    runs: Counter[str] = field(default_factory=Counter)
    """Handler runs per message id, rolled back ones included."""
    outcomes: Counter[Outcome] = field(default_factory=Counter)
    settled: dict[str, Outcome] = field(default_factory=dict)
    """The first outcome of each message id (PROCESSED, or DEAD, or CONFLICT...)."""
    unsettled: list[str] = field(default_factory=list)
    """Message ids still not settled when the run stopped (`max_deliveries`)."""

    def assert_once(self, effects: Mapping[str, int]) -> None:
        """Raise AssertionError unless every processed message id has exactly one effect in `effects` (message id
        -> count, read where the handler's effects landed) and no other message id has any."""
        # a DUPLICATE or CONFLICT settled a key whose first copy committed (and then was not acked: a crash)
        processed = {key for key, outcome in self.settled.items() if outcome is not Outcome.DEAD}
        wrong = {key: effects.get(key, 0) for key in processed if effects.get(key, 0) != 1}
        stray = {key: count for key, count in effects.items() if key not in processed and count}
        if self.unsettled:
            raise AssertionError(f"messages never settled: {sorted(self.unsettled)[:10]}")
        if wrong or stray:
            raise AssertionError(
                f"not exactly once under redelivery: effects per message id {dict(sorted(wrong.items())[:10])}"
                f"{f', effects of messages not processed {dict(sorted(stray.items())[:10])}' if stray else ''}"
                f" ({self.deliveries} deliveries: {self.duplicates} producer duplicates, {self.crashes} crashes"
                f" between commit and ack, {self.transient} transient failures after the handler)"
            )


class Harness:
    """Runs `handler(tx, message)` through a real `Inbox` (SQLite in memory unless `db` names another database) fed
    by a `MemorySource` that injects `faults`.

    `setup` statements run first, in one transaction (the handler's tables). With `lease`, the handler runs in lease
    mode (no transaction: pass `tx.idempotency_key` to the remote system). `retry` defaults to no wait between
    attempts; `max_attempts` as for `Inbox`.
    """

    def __init__(
        self,
        handler: Handler,
        *,
        db: str = "sqlite://",
        setup: Sequence[str] = (),
        faults: Faults | None = None,
        lease: timedelta | None = None,
        consumer: str = "harness",
        max_attempts: int = 5,
        retry: Retry = NO_WAIT,
        table: str = "inbox",
    ) -> None:
        """Open the inbox on `db`, create its schema and run `setup`."""
        self.handler = handler
        self.faults = faults or Faults()
        self.lease = lease
        self.inbox = Inbox(db, consumer=consumer, max_attempts=max_attempts, retry=retry, table=table)
        self.inbox.create_schema()
        if setup:
            self.inbox.transaction(lambda tx: [tx.connection.execute(statement) for statement in setup])

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of `sql` on the inbox's database (to count the handler's effects)."""
        return self.inbox.read(lambda tx: [tuple(row) for row in tx.connection.execute(sql, params).fetchall()])

    def run(self, messages: Iterable[Message], *, max_deliveries: int = 10_000) -> Report:
        """Publish `messages` (some twice), then consume until every one is settled and acked; return the report."""
        rng = random.Random(self.faults.seed)  # noqa: S311 - fault injection, not a secret
        source = MemorySource()
        report = Report()
        for message in messages:
            source.publish(message)
            if rng.random() < self.faults.duplicates:
                source.publish(message)
                report.duplicates += 1
        while source.pending and report.deliveries < max_deliveries:
            taken = source.take(1)
            if not taken:
                time.sleep(min(source.next_due() or 0.0, 1.0))
                continue
            [delivery] = taken
            report.deliveries += 1
            message = Message(delivery.message_id or delivery.coordinates, "harness", delivery.payload)
            outcome = self._deliver(message, strike=rng.random() < self.faults.transient, report=report)
            if isinstance(outcome, float):
                source.give_back(delivery, delay=outcome)
                continue
            if rng.random() < self.faults.crashes:  # committed, then the consumer died before its ack
                report.crashes += 1
                source.give_back(delivery)
                continue
            source.settle(delivery)
            report.outcomes[outcome] += 1
            report.settled.setdefault(message.message_id, outcome)
        published = {d.message_id or d.coordinates for d in source.acked}
        report.unsettled = sorted({m for m in report.runs if m not in published} | _left(source))
        return report

    def _deliver(self, message: Message, *, strike: bool, report: Report) -> Outcome | float:
        """Process one delivery; its Outcome, or the seconds to hold it back before it comes again."""

        def handler(tx: Tx, message: Message) -> object:
            report.runs[message.message_id] += 1
            result = self.handler(tx, message)
            if strike:
                report.transient += 1
                raise InjectedFault("injected: the database failed after the handler ran")
            return result

        try:
            if self.lease is None:
                return self.inbox.process(message, handler)
            return self.inbox.process(message, handler, lease=self.lease)
        except RetryLater as waiting:
            report.waits += 1
            return waiting.delay.total_seconds()
        except TransientError:
            return 0.0
        except Exception:  # the handler's own failure: an attempt is counted, the delivery comes again
            report.failures += 1
            return 0.0

    def close(self) -> None:
        """Close the inbox."""
        self.inbox.close()

    def __enter__(self) -> Self:
        """Use the harness as a context manager that closes it."""
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the inbox."""
        self.close()


def _left(source: MemorySource) -> set[str]:
    """Message ids of the deliveries the source still holds."""
    return {d.message_id or d.coordinates for d in source.take(1_000_000)} if source.pending else set()
