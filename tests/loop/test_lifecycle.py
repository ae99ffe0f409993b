"""A delivery's lifecycle as a transition table: every legal path, an illegal move refused, and the hand-back that
says which deliveries it handed back."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edinbox import SourceError
from edinbox.loop import (
    ACK,
    FINAL,
    TRANSITIONS,
    HandBack,
    Lifecycle,
    LifecycleError,
    Move,
    Stage,
    Verdict,
    hand_back_each,
)
from edinbox.sources import Delivery


def _paths(stage: Stage, done: tuple[Move, ...] = ()) -> list[tuple[tuple[Move, ...], Stage]]:
    """Every sequence of allowed moves from `stage` to a final stage, with the stage it ends in."""
    if stage in FINAL:
        return [(done, stage)]
    found = []
    for (start, move), after in TRANSITIONS.items():
        if start is stage:
            found += _paths(after, (*done, move))
    return found


def test_every_legal_path_from_a_claim() -> None:
    """From a claim, a delivery ends acked, nacked, rejected or left only through its commit, and is given back
    unsettled only before it; no other path exists."""
    settled = (Move.PLAN, Move.SETTLE)
    assert sorted(_paths(Stage.CLAIMED)) == sorted(
        [
            ((*settled, Move.ACK), Stage.ACKED),
            ((*settled, Move.NACK), Stage.NACKED),
            ((*settled, Move.REJECT), Stage.REJECTED),
            ((*settled, Move.LEAVE), Stage.LEFT),
            ((Move.PLAN, Move.GIVE_BACK), Stage.GIVEN_BACK),
            ((Move.GIVE_BACK,), Stage.GIVEN_BACK),
        ]
    )
    for moves, final in _paths(Stage.CLAIMED):
        lifecycle = Lifecycle()
        assert [lifecycle.move(move) for move in moves][-1] is final


def test_an_ack_before_the_commit_is_refused_and_changes_nothing() -> None:
    """Acking a planned delivery (its batch not committed) raises LifecycleError naming what is allowed, and the
    stage stays; so does a second hand-back of an acked one."""
    lifecycle = Lifecycle(Stage.PLANNED)
    with pytest.raises(LifecycleError, match="a delivery planned cannot ack \\(allowed: settle, give back\\)"):
        lifecycle.check(Move.ACK)
    with pytest.raises(LifecycleError):
        lifecycle.move(Move.ACK)
    assert lifecycle.stage is Stage.PLANNED
    acked = Lifecycle(Stage.SETTLED)
    acked.handed_back(HandBack.ACK, handed=True)
    with pytest.raises(LifecycleError, match="none: it is final"):
        acked.move(Move.NACK)
    assert acked.stage is Stage.ACKED


@given(st.lists(st.sampled_from(list(Move)), max_size=12))
def test_any_moves_follow_the_table(moves: list[Move]) -> None:
    """Whatever the loop tries: each move either goes where the table says or raises and changes nothing; a delivery
    is acked, nacked or rejected only after it settled; a final stage never moves again."""
    lifecycle = Lifecycle()
    seen = [lifecycle.stage]
    for move in moves:
        before = lifecycle.stage
        try:
            lifecycle.move(move)
        except LifecycleError:
            assert lifecycle.stage is before
            assert (before, move) not in TRANSITIONS
            continue
        assert lifecycle.stage is TRANSITIONS[(before, move)]
        assert before not in FINAL
        seen.append(lifecycle.stage)
    if {Stage.ACKED, Stage.NACKED, Stage.REJECTED, Stage.LEFT} & set(seen):
        assert Stage.SETTLED in seen


class _Source:
    """A source whose `failing`-th ack fails as a broker outage does; it records what it was told."""

    def __init__(self, failing: int) -> None:
        self.failing = failing
        self.told: list[tuple[str, str]] = []

    async def ack(self, delivery: Delivery) -> None:
        if len(self.told) + 1 == self.failing:
            raise SourceError("the broker went away")
        self.told.append(("ack", delivery.coordinates))

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        self.told.append(("nack", delivery.coordinates))

    async def reject(self, delivery: Delivery, *, reason: str) -> str | None:
        self.told.append(("reject", delivery.coordinates))
        return None


async def test_a_failed_hand_back_leaves_the_rest_settled_where_they_are() -> None:
    """`hand_back_each` says which deliveries it handed back: after the second ack fails, that one and the rest
    (the reject, which goes last) are left, and their lifecycles end `left`, the first `acked`."""
    deliveries = [Delivery(b"x", message_id=None, coordinates=f"d{n}", source="test") for n in range(3)]
    verdicts = [ACK, Verdict(HandBack.REJECT, reason="bad"), ACK]
    lifecycles = [Lifecycle(Stage.SETTLED) for _ in deliveries]
    source: Any = _Source(failing=2)

    def done(index: int, handed: bool) -> None:
        lifecycles[index].handed_back(verdicts[index].hand_back, handed=handed)

    lost = await hand_back_each(source, list(zip(deliveries, verdicts, strict=True)), done=done)
    assert isinstance(lost, SourceError)
    assert source.told == [("ack", "d0")]
    assert [lifecycle.stage for lifecycle in lifecycles] == [Stage.ACKED, Stage.LEFT, Stage.LEFT]


def test_the_consumer_page_shows_the_table_as_it_is() -> None:
    """docs/consumer.md's lifecycle table has one row per allowed move, exactly `TRANSITIONS`, and names the final
    stages `FINAL` holds: the page cannot drift from the code."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "consumer.md").read_text(encoding="utf-8")
    section = page.split("## A delivery's lifecycle", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w-]+)` \| `([\w ]+)` \| `([\w-]+)` \|", section, re.MULTILINE)
    assert {(Stage(a), Move(m)): Stage(b) for a, m, b in rows} == dict(TRANSITIONS)
    assert len(rows) == len(TRANSITIONS)
    final = section.split("are final", 1)[0].rsplit("\n\n", 1)[1]
    assert set(re.findall(r"`([\w-]+)`", final)) == {stage.value for stage in FINAL}
