"""What became of one delivered item, as the `settled` log line, the counters and the metrics name it."""

from __future__ import annotations

from enum import StrEnum

from edinbox._message import Outcome

__all__ = ["HANDLED", "DeliveryOutcome"]


class DeliveryOutcome(StrEnum):
    """What became of a delivery (or of one interchange of it, in the hub); its value is the text the logs, the
    counters table, the metrics' `outcome` label and the traces keep."""

    PROCESSED = "processed"
    """The handler ran and its effects committed with the journal row (`Outcome.PROCESSED`)."""
    RESENT = "resent"
    """The hub's handler ran and found every invoice already in accounting (a partner's resend)."""
    DUPLICATE = "duplicate"
    """The key was journaled with the same content: nothing ran (`Outcome.DUPLICATE`)."""
    CONFLICT = "conflict"
    """The key was processed with other content: nothing ran, the copy is kept (`Outcome.CONFLICT`)."""
    DEAD = "dead"
    """The key is parked in the journal, its handler failed for good (`Outcome.DEAD`)."""
    REJECTED = "rejected"
    """It can never be journaled (no key, a value the journal cannot hold, not EDI): parked by the source."""
    BYPASSED = "bypassed"
    """Routed around the inbox (the hub's acknowledgments): acked, nothing journaled."""
    WAITING = "waiting"
    """Not settled: it failed before and comes back at its retry time."""
    NOT_SETTLED = "not-settled"
    """Not settled (a handler failure, a live lease elsewhere, an outage): it comes back."""

    @classmethod
    def of(cls, outcome: Outcome) -> DeliveryOutcome:
        """The delivery outcome of a settled message's inbox outcome."""
        return cls(outcome.value)


HANDLED = frozenset({DeliveryOutcome.PROCESSED, DeliveryOutcome.RESENT})
"""The outcomes whose handler ran (its effect committed): counted with the effect, in its transaction."""
