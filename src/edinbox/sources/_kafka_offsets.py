"""Which Kafka offset may be committed, given records settled in any order (no I/O).

A Kafka consumer group keeps one committed offset per partition: everything below it is never delivered again.
Records are settled (their transaction committed) in any order, so the offset to commit is the lowest delivered
record not yet settled, or the one after the highest delivered record when all are settled. Offsets are not
contiguous (transaction markers, compaction), which is why only delivered records count.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["OffsetTracker", "TopicPartition"]

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class _Partition:
    pending: deque[int] = field(default_factory=deque)
    """Delivered offsets, ascending, that the commit point has not passed yet."""
    settled: set[int] = field(default_factory=set)
    high: int = -1
    """The highest offset delivered since the partition was assigned or rewound."""
    committed: int = -1
    """The last offset committed for this partition by this member (the next record to read)."""
    horizon: int = -1
    """The highest offset ever delivered to any member, as far as known: records at or below it are redeliveries."""

    def point(self) -> int:
        """The offset below which every delivered record is settled."""
        while self.pending and self.pending[0] in self.settled:
            self.settled.discard(self.pending.popleft())
        return self.pending[0] if self.pending else self.high + 1


class OffsetTracker:
    """Per-partition commit points of one consumer; the caller serialises access."""

    def __init__(self) -> None:
        """Start with no partition assigned."""
        self._parts: dict[TopicPartition, _Partition] = {}

    def assign(self, tp: TopicPartition, *, horizon: int = -1) -> None:
        """Start tracking a partition the group assigned to this member, delivered up to `horizon` before."""
        self._parts[tp] = _Partition(horizon=horizon)

    def assigned(self, tp: TopicPartition) -> bool:
        """Whether this member currently owns the partition."""
        return tp in self._parts

    def delivered(self, tp: TopicPartition, offset: int) -> bool:
        """Record that the record at `offset` was handed to the caller; return whether it was delivered before."""
        part = self._parts.setdefault(tp, _Partition())
        if offset > part.high:
            part.pending.append(offset)
            part.high = offset
        again = offset <= part.horizon
        part.horizon = max(part.horizon, offset)
        return again

    def horizon(self, tp: TopicPartition) -> int:
        """The highest offset of the partition known to have been delivered (-1 when none)."""
        part = self._parts.get(tp)
        return -1 if part is None else part.horizon

    def point(self, tp: TopicPartition) -> int | None:
        """The partition's commit point (everything delivered below it is settled), None before any delivery."""
        part = self._parts.get(tp)
        return None if part is None or part.high < 0 else part.point()

    def settle(self, tp: TopicPartition, offset: int) -> int | None:
        """Mark the record settled; return the offset to commit when the commit point moved, else None."""
        part = self._parts.get(tp)
        if part is None or offset < part.committed:
            return None  # revoked meanwhile (the new owner gets it again) or already committed past it
        part.settled.add(offset)
        if part.high < 0:
            return None  # nothing delivered since the assignment: the start of the partition is not known here
        point = part.point()
        return point if point > part.committed else None

    def committed(self, tp: TopicPartition, offset: int) -> None:
        """Record that `offset` was committed for the partition."""
        part = self._parts.get(tp)
        if part is not None and offset > part.committed:
            part.committed = offset

    def rewind(self, tp: TopicPartition, offset: int) -> None:
        """Forget deliveries from `offset` on: the consumer seeks back and they are delivered again."""
        part = self._parts.get(tp)
        if part is None:
            return
        while part.pending and part.pending[-1] >= offset:
            part.pending.pop()
        part.high = min(part.high, offset - 1)

    def revoke(self, tp: TopicPartition) -> int | None:
        """Stop tracking the partition; return the offset still to commit for what was settled, else None."""
        part = self._parts.pop(tp, None)
        if part is None or part.high < 0:
            return None
        point = part.point()
        return point if point > part.committed else None

    def lose(self, tp: TopicPartition) -> None:
        """Stop tracking a partition the group took away without a chance to commit."""
        self._parts.pop(tp, None)

    def due(self) -> dict[TopicPartition, int]:
        """The commit point of every partition where it moved past the last commit."""
        return {
            tp: point for tp, part in self._parts.items() if part.high >= 0 and (point := part.point()) > part.committed
        }

    def points(self) -> dict[TopicPartition, int]:
        """The commit point of every partition with deliveries (for close and for tests)."""
        return {tp: part.point() for tp, part in self._parts.items() if part.high >= 0}
