"""The Kafka commit point, without a broker: settled in any order, it never passes a record still in flight."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from edinbox.sources._kafka_offsets import OffsetTracker

TP = ("edi.in", 0)


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Increasing offsets with gaps (transaction markers, compaction) and an order in which they are settled."""
    gaps = draw(st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=30))
    offsets = [sum(gaps[: n + 1]) for n in range(len(gaps))]
    order = draw(st.permutations(offsets))
    settled = order[: draw(st.integers(min_value=0, max_value=len(order)))]
    return offsets, settled


@given(deliveries())
def test_commit_point_never_passes_an_unsettled_record(case: tuple[list[int], list[int]]) -> None:
    """Whatever the ack order, each commit is at most the lowest unsettled offset, and reaches the end when all are."""
    offsets, settled = case
    tracker = OffsetTracker()
    tracker.assign(TP)
    for offset in offsets:
        tracker.delivered(TP, offset)
    last = -1
    for n, offset in enumerate(settled):
        point = tracker.settle(TP, offset)
        unsettled = [o for o in offsets if o not in settled[: n + 1]]
        if point is not None:
            assert point > last
            assert point <= (min(unsettled) if unsettled else offsets[-1] + 1)
            tracker.committed(TP, point)
            last = point
    if len(settled) == len(offsets):
        assert last == offsets[-1] + 1
    revoked = tracker.revoke(TP)
    assert revoked is None or revoked > last


def test_rewind_lets_the_records_come_again_and_flags_them() -> None:
    """After a seek back, the same offsets are delivered again, flagged, and the commit waits for them."""
    tracker = OffsetTracker()
    tracker.assign(TP, horizon=-1)
    assert [tracker.delivered(TP, o) for o in (5, 6, 7)] == [False, False, False]
    assert tracker.settle(TP, 5) == 6
    tracker.committed(TP, 6)
    tracker.rewind(TP, 6)
    assert tracker.point(TP) == 6
    assert [tracker.delivered(TP, o) for o in (6, 7)] == [True, True]
    assert tracker.settle(TP, 7) is None
    assert tracker.settle(TP, 6) == 8


def test_a_revoked_partition_ignores_late_acks() -> None:
    """An ack arriving after the partition moved to another member commits nothing here."""
    tracker = OffsetTracker()
    tracker.assign(TP)
    tracker.delivered(TP, 0)
    assert tracker.revoke(TP) == 0
    assert tracker.settle(TP, 0) is None
    tracker.assign(TP, horizon=0)
    assert tracker.settle(TP, 0) is None  # nothing delivered in this assignment yet: the start is not known here
    assert tracker.delivered(TP, 0) is True
