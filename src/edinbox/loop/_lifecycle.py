"""A delivery's lifecycle in a loop, as a table of the transitions allowed (h11's style: states, events, a table).

    CLAIMED --plan--> PLANNED --settle--> SETTLED --ack--> ACKED
       |                 |                   |----nack---> NACKED
       |                 |                   |----reject-> REJECTED
       |                 |                   '----leave--> LEFT
       '---give back-----'---give back--> GIVEN_BACK

A delivery is claimed from its source (by the step, or ahead of its batch while the batch before settles), planned
(keyed; the hub splits it into its items), then settled when its batch's transaction commits. Only then is it handed
back with its verdict: acked, nacked (a message of it is not settled: it comes back later) or rejected (parked by the
source). A step that fails before the commit (an outage, a live lease elsewhere, a stop) gives its deliveries back
unsettled; after the commit, a source that fails while the batch is handed back leaves the rest where they are (the
source redelivers them, and the journal finds them settled). Every other move is a bug of the loop, above all an ack
before the commit, which would lose the effect: `LifecycleError`, raised at once, never charged to a message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from edinbox._errors import InboxError
from edinbox.loop._hand_back import HandBack

__all__ = ["FINAL", "TRANSITIONS", "Lifecycle", "LifecycleError", "Move", "Stage", "move_all"]


class Stage(StrEnum):
    """Where a delivery is in its loop."""

    CLAIMED = "claimed"
    """Received from its source, which holds it for this consumer until it is handed back."""
    PLANNED = "planned"
    """Keyed (the hub: split into its items, each routed); nothing of it is committed."""
    SETTLED = "settled"
    """Its batch's transaction committed: its verdict is known, the source does not know it yet."""
    ACKED = "acked"
    """Handed back settled: never delivered again."""
    NACKED = "nacked"
    """Handed back after its batch committed, with a message of it not settled: delivered again later."""
    REJECTED = "rejected"
    """Handed back to be parked by the source (its rejected folder, its dead letters)."""
    GIVEN_BACK = "given-back"
    """Handed back unsettled before any commit (a failed step, a stop, a live lease elsewhere)."""
    LEFT = "left"
    """Settled, but not handed back: the source failed meanwhile and delivers it again to find it settled."""


class Move(StrEnum):
    """What the loop does to a delivery."""

    PLAN = "plan"
    SETTLE = "settle"
    ACK = "ack"
    NACK = "nack"
    REJECT = "reject"
    GIVE_BACK = "give back"
    LEAVE = "leave"

    @classmethod
    def of(cls, hand_back: HandBack) -> Move:
        """The move that hands a settled delivery back with `hand_back`."""
        return _HANDED[hand_back]


_HANDED = MappingProxyType({hand_back: Move(hand_back.value) for hand_back in HandBack})
"""The move of each hand-back, looked up (twice per delivery) rather than found by value each time."""


TRANSITIONS: Mapping[tuple[Stage, Move], Stage] = MappingProxyType(
    {
        (Stage.CLAIMED, Move.PLAN): Stage.PLANNED,
        (Stage.CLAIMED, Move.GIVE_BACK): Stage.GIVEN_BACK,
        (Stage.PLANNED, Move.SETTLE): Stage.SETTLED,
        (Stage.PLANNED, Move.GIVE_BACK): Stage.GIVEN_BACK,
        (Stage.SETTLED, Move.ACK): Stage.ACKED,
        (Stage.SETTLED, Move.NACK): Stage.NACKED,
        (Stage.SETTLED, Move.REJECT): Stage.REJECTED,
        (Stage.SETTLED, Move.LEAVE): Stage.LEFT,
    }
)
"""Every move allowed, by the stage it starts from; any other is a LifecycleError."""

FINAL = frozenset(Stage) - {stage for stage, _ in TRANSITIONS}
"""The stages a delivery ends in: no move leaves them."""


class LifecycleError(InboxError, RuntimeError):
    """A move the lifecycle does not allow from a delivery's stage (an ack before its commit, a second hand-back): a
    bug of the loop, neither permanent nor transient; it propagates and is never charged to a message."""


@dataclass(slots=True)
class Lifecycle:
    """One delivery's stage, moved only along `TRANSITIONS`."""

    stage: Stage = Stage.CLAIMED

    def check(self, move: Move) -> Stage:
        """The stage `move` would lead to, without moving; LifecycleError when it is not allowed (checked before the
        source is told anything: an ack before the commit is never sent)."""
        after = TRANSITIONS.get((self.stage, move))
        if after is None:
            allowed = ", ".join(m for (stage, m) in TRANSITIONS if stage is self.stage) or "none: it is final"
            raise LifecycleError(f"a delivery {self.stage} cannot {move} (allowed: {allowed})")
        return after

    def move(self, move: Move) -> Stage:
        """Apply `move` and return the new stage; LifecycleError (the stage unchanged) when it is not allowed."""
        self.stage = self.check(move)
        return self.stage

    def handed_back(self, hand_back: HandBack, *, handed: bool) -> Stage:
        """After `hand_back_each`: acked, nacked or rejected as `hand_back` says when `handed`, else left."""
        return self.move(Move.of(hand_back) if handed else Move.LEAVE)


def move_all(lifecycles: Iterable[Lifecycle], move: Move) -> None:
    """Apply `move` to every delivery of a batch (LifecycleError at the first that does not allow it)."""
    for lifecycle in lifecycles:
        lifecycle.move(move)
