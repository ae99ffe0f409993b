"""The partner registry: who gets in, and what the hub says of those who do not.

With any `[partners]` agreement, an interchange from a sender with no agreement of its own (and no `"*"`) is refused
unless `unknown_partners = "accept"`, and so is one addressed to a receiver not among `parties` (when set): `refusal`
gives its reason ("unknown partner ZZ:OTHER", "receiver ZZ:X is not this hub") and its envelope error (TA1 R 006 /
009, CONTRL UCI 4 23 / 7). The plan parks it like any other permanent fault of its data (the rejected table, or the
source's rejected folder / dead letters), so nothing of it is journaled or booked.

Each refusal the hub settles is `noticed`: counted in the hub's counters (`unknown_partners`, beside the outcome
`rejected`), counted in `edinbox_unknown_partners_total` when `report_to` gave the process its metrics (the partner
label is the sender only when it has an agreement, `other` otherwise), and logged, once per refused party per
`WINDOW` per consumer: a partner sending fifty interchanges an hour makes one line, which says how many it sent.
The counter commits with the batch; the metric and the log are the process's, noted as the batch is recorded, so a
batch the database rolls back and settles again counts its refusals in the metric again (never in the counter).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from edinbox import edi
from edinbox.hub.config import LOGGER, HubConfig, log_event

__all__ = ["COUNTER", "WINDOW", "Refusal", "forget", "noticed", "refusal", "report_to"]

COUNTER = "unknown_partners"
"""The hub counter (`edinbox_hub_counters.outcome`) of the interchanges refused for their parties."""

WINDOW = 3600.0
"""Seconds between two log lines about one refused party."""

_KEPT = 10_000
"""Refused parties remembered for the log's window; beyond it, those whose window passed are forgotten."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why an interchange does not get in: its reason, the refused party, and the envelope error that answers it."""

    reason: str
    party: str
    """The unknown sender, or the receiver that is not ours ("qualifier:id")."""
    sender: str
    """The interchange's sender ("qualifier:id"): its agreement, if any, answers an unknown receiver."""
    side: str
    """"sender" or "receiver"."""
    error: str
    """TA1 note code / CONTRL 0085 code (`edi.party_error`)."""


def refusal(config: HubConfig, interchange: edi.Interchange) -> Refusal | None:
    """Why the registry keeps `interchange` out (None: it gets in); an interchange whose header does not say who sent
    it is parked for that already."""
    sender = f"{interchange.sender.qualifier}:{interchange.sender.id}"
    receiver = f"{interchange.receiver.qualifier}:{interchange.receiver.id}"
    if not config.known(sender):
        error = edi.party_error(interchange.standard, sender=True)
        return Refusal(f"unknown partner {sender}", sender, sender, "sender", error)
    if not config.ours(receiver):
        error = edi.party_error(interchange.standard, sender=False)
        return Refusal(f"receiver {receiver} is not this hub", receiver, sender, "receiver", error)
    return None


class _Notices:
    """The process's refusals: when each party was last logged, how many since, and the metrics to count them in."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.logged: dict[tuple[str, str], tuple[float, int]] = {}
        self.metrics: Any = None

    def notice(self, consumer: str, refused: Refusal, *, now: float) -> int | None:
        """Count one refusal; the refusals of its party to report now (this one included), None inside its window."""
        key = (consumer, refused.party)
        with self.lock:
            if self.metrics is not None:  # Metrics bounds the label: an unknown sender is `other`
                self.metrics.unknown_partner(consumer=consumer, partner=refused.sender, side=refused.side)
            if len(self.logged) > _KEPT:
                self.logged = {k: v for k, v in self.logged.items() if now - v[0] < WINDOW}
            last, since = self.logged.get(key, (None, 0))
            if last is not None and now - last < WINDOW:
                self.logged[key] = (last, since + 1)
                return None
            self.logged[key] = (now, 0)
            return since + 1


_NOTICES = _Notices()


def noticed(consumer: str, refused: Refusal, *, now: float | None = None) -> None:
    """Count a settled refusal in the metrics (when reported to) and log it, once per party per `WINDOW`: the line
    says how many interchanges of the party were refused since the last line."""
    times = _NOTICES.notice(consumer, refused, now=time.monotonic() if now is None else now)
    if times is None:
        return
    fields = {"consumer": consumer, "party": refused.party, "refused": times, "reason": refused.reason}
    if refused.side == "sender":
        fields["hint"] = f'add [partners."{refused.party}"] to let it in, or unknown_partners = "accept"'
    else:
        fields["hint"] = "add it to parties if this hub receives for it"
    log_event(logging.getLogger(LOGGER), logging.WARNING, "unknown-partner", fields)


def report_to(metrics: Any) -> None:
    """Count the refusals of this process in `metrics` (`edinbox.metrics.Metrics`; None: in none)."""
    with _NOTICES.lock:
        _NOTICES.metrics = metrics


def forget() -> None:
    """Forget when each party was last logged (a new log window for every party): for tests."""
    with _NOTICES.lock:
        _NOTICES.logged.clear()


def doctor_check(config: HubConfig) -> tuple[str, str]:
    """`edinbox doctor`'s partner check: ("warn", why) when the hub lets every sender in, else ("ok", who gets in)."""
    if not config.partners:
        return "warn", "no [partners]: every sender gets in and is booked; agreements keep unknown partners out"
    if "*" in config.partners:
        return "warn", 'a [partners."*"] agreement lets every sender in: unknown partners are booked'
    if config.unknown_partners == "accept":
        return "warn", 'unknown_partners = "accept": a sender without an agreement gets in and is booked'
    receivers = f"to {config.parties}" if config.parties else "to any receiver (parties not set)"
    return "ok", f"{len(config.partners)} partners get in, {receivers}; any other sender is parked"
