"""Handing a delivery back to its source after its transaction: ack, nack (with a delay) or reject, in one place.

Every loop decides here what becomes of a delivery once the journal has settled (or not) its messages: `verdict`
turns a message's result into a `Verdict` (which of the three, with the reject's reason or the nack's delay; the hub
sums up a delivery of several interchanges the same way), and `hand_back` / `hand_back_each` send it. A nack that
fails is itself transient and never stops the loop: the broker or the spool brings the delivery back anyway
(`nack_each` logs one line for all its failures).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from edinbox._errors import ConfigurationError, DataError, NotSettledError, RetryLater, SchemaError, TransientError
from edinbox._logs import log_event
from edinbox._message import Outcome
from edinbox.loop._outcome import DeliveryOutcome
from edinbox.sources import Delivery, Source

__all__ = [
    "ACK",
    "NACK_DELAY",
    "HandBack",
    "Verdict",
    "hand_back",
    "hand_back_each",
    "nack_each",
    "not_the_message",
    "verdict",
]

NACK_DELAY = 1.0
"""Seconds an unsettled delivery waits at least before the source delivers it again (where the source can wait)."""


class HandBack(enum.Enum):
    """What the source is told about a delivery after its transaction."""

    ACK = "ack"
    """Settled: never deliver it again."""
    NACK = "nack"
    """Not settled (a handler failure, a live lease elsewhere, an outage): deliver it again, after a delay."""
    REJECT = "reject"
    """Parked for good (data that can never succeed): to the dead letters or the spool's rejected folder."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A delivery's hand-back, with the reject's reason or the nack's delay (seconds)."""

    hand_back: HandBack
    reason: str = ""
    delay: float = NACK_DELAY


ACK = Verdict(HandBack.ACK)


def verdict(result: Outcome | Exception) -> tuple[Verdict, DeliveryOutcome]:
    """A message's hand-back and its outcome's name, from what `process_batch(..., isolate=True)` returned for it:
    every Outcome acks (DEAD and CONFLICT are kept in the journal for operators); a value the journal cannot hold
    (DataError) rejects; any other exception (the handler's own, a live lease elsewhere) leaves it unsettled: nacked,
    to come back after `NACK_DELAY`, or at its retry time for a RetryLater (it waits: "waiting")."""
    if isinstance(result, Outcome):
        return ACK, DeliveryOutcome.of(result)
    if isinstance(result, DataError):
        return Verdict(HandBack.REJECT, reason=f"it cannot be journaled: {result}"), DeliveryOutcome.REJECTED
    if isinstance(result, RetryLater):  # it failed before: back at its retry time, not before
        return Verdict(HandBack.NACK, delay=max(result.delay.total_seconds(), NACK_DELAY)), DeliveryOutcome.WAITING
    return Verdict(HandBack.NACK), DeliveryOutcome.NOT_SETTLED


async def hand_back(source: Source, delivery: Delivery, verdict: Verdict) -> str | None:
    """Tell `source` what became of `delivery`; for a reject, where the source kept the payload instead of with it,
    when it had to (see `Source.reject`). A failure is a TransientError (SourceError) for the caller."""
    if verdict.hand_back is HandBack.NACK:
        await source.nack(delivery, delay=verdict.delay)
    elif verdict.hand_back is HandBack.REJECT:
        return await source.reject(delivery, reason=verdict.reason)
    else:
        await source.ack(delivery)
    return None


async def hand_back_each(
    source: Source,
    batch: Sequence[tuple[Delivery, Verdict]],
    *,
    done: Callable[[int, bool], None],
    kept: Callable[[int, str], Awaitable[None]] | None = None,
) -> TransientError | None:
    """Hand each delivery of a committed batch back with its verdict; `done(index, handed)` after each (to log and
    count it), `handed` false when it was not handed back (a hand-back failed: its own or an earlier one's);
    `kept(index, instead)` when a reject's payload was kept elsewhere (see `Source.reject`).

    After one hand-back failed, the others are not handed back either (each could wait out its own timeout): the
    source redelivers them, and the journal finds them settled. The rejects go last: parking does more than an ack (a
    reason written, a dead letter produced) and can fail where an ack does not (a full disk), and a reject that fails
    must not hold back its batch-mates' acks (the spool would hand the same batch back for ever). The first failure
    is returned, for the caller to raise once the batch is logged: the outage loop then waits for the source.
    """
    lost: TransientError | None = None
    for index in sorted(range(len(batch)), key=lambda i: batch[i][1].hand_back is HandBack.REJECT):
        delivery, verdict = batch[index]
        handed = False
        if lost is None:
            try:
                instead = await hand_back(source, delivery, verdict)
            except TransientError as exc:
                lost = exc
            else:
                handed = True
                if instead and kept is not None:
                    await kept(index, instead)
        done(index, handed)
    return lost


async def nack_each(
    source: Source,
    deliveries: Sequence[Delivery],
    *,
    delay: float | None = None,
    logger: logging.Logger,
) -> None:
    """Nack each delivery (after `delay` seconds where the source supports it); a failing nack is itself transient,
    and the broker or spool brings it back anyway (a claim taken back meanwhile is back already): one `nack-failed`
    line counts the failures, with the first one's coordinates and error."""
    failed: list[tuple[Delivery, TransientError]] = []
    for delivery in deliveries:
        try:
            await source.nack(delivery, delay=delay)
        except TransientError as exc:
            failed.append((delivery, exc))
    if failed:
        first, error = failed[0]
        fields = {"failed": len(failed), "held": len(deliveries), "delivery": first.coordinates, "error": error}
        log_event(logger, logging.WARNING, "nack-failed", fields)


def not_the_message(error: Exception) -> bool:
    """True for a failure of an isolated message that is an outage or the operator's: it stops the whole step (every
    delivery of the batch is nacked, and the outage loop waits, or the loop ends on a configuration error)."""
    if isinstance(error, NotSettledError):  # a live lease elsewhere: only this delivery waits
        return False
    return isinstance(error, TransientError | ConfigurationError | SchemaError)
