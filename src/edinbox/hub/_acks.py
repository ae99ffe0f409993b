"""The hub's answers to partners: which acknowledgments an interchange gets, and writing them to the outbox.

An acknowledgment is written in the transaction that settles its interchange (with the journal row and the
invoices) and sent by the relay after the commit, so a rolled-back interchange is never acknowledged and a crash
loses none. Each one is an interchange of its own from us to the partner, with the next control number of that
partner (`hub_control_numbers`: an upsert whose row lock serialises hubs, so no number is used twice; a rolled-back
one is used again, never sent twice), keyed in the outbox by its own inbox key (`source/control number`, what the
partner's inbox dedupes on), and listed in `hub_acknowledgments` for `edinbox show`.

Which ones (`kinds`): nothing without an `outbound` destination or for an interchange of acknowledgments only; X12:
a TA1 when asked (ISA14 = 1 and `ta1 = "requested"`, or `ta1 = "always"`), and a 997 or 999 per agreement for its
functional groups; EDIFACT: a CONTRL when asked (UNB 0031 = 1, or `ta1 = "always"`). A duplicate (an interchange key
already processed, or reused with other content) that the partner re-sent (not the broker's own redelivery) gets a
TA1 R 025 or a CONTRL UCI 4 26 when `duplicates = "notify"`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from edinbox import edi
from edinbox._message import Message
from edinbox.hub._config import Agreement, HubConfig

__all__ = ["Acknowledger", "kinds", "partner_key"]

_X12_CONTROL_NUMBERS = 999_999_999
"""ISA13 has nine digits: a partner's counter wraps after this many acknowledgments."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def partner_key(party: edi.Party) -> str:
    """How agreements name a partner: "qualifier:id" (e.g. "ZZ:ACME", "14:5412345000013")."""
    return f"{party.qualifier}:{party.id}"


def kinds(subject: edi.Received, agreement: Agreement, *, duplicate: bool) -> list[str]:
    """The acknowledgments `subject` gets under `agreement` ("TA1", "997", "999", "CONTRL"), in sending order."""
    if not agreement.outbound or subject.only_acknowledgments:
        return []
    x12 = subject.standard == "X12"
    if duplicate:
        return ["TA1" if x12 else "CONTRL"] if agreement.duplicates == "notify" else []
    asked = agreement.ta1 == "always" or (agreement.ta1 == "requested" and subject.requested)
    if not x12:
        return ["CONTRL"] if asked and agreement.acknowledgment != "none" else []
    found = ["TA1"] if asked else []
    if agreement.acknowledgment != "none" and subject.groups:
        found.append(agreement.acknowledgment)
    return found


def destination(agreement: Agreement, partner: edi.Party) -> str:
    """The agreement's outbound URL, `{id}` replaced by the partner's id made safe for a path or queue name."""
    return agreement.outbound.replace("{id}", _UNSAFE.sub("_", partner.id) or "_")


class Acknowledger:
    """Writes a settled interchange's acknowledgments to the outbox, in the settling transaction."""

    def __init__(self, config: HubConfig) -> None:
        """Answer per `config`'s partner agreements."""
        self.config = config

    async def answer(self, tx: Any, subject: edi.Received, *, message: Message, duplicate: bool = False) -> int:
        """Write what `subject` gets (see `kinds`) inside `tx`; return how many acknowledgments were written."""
        agreement = self.config.agreement(partner_key(subject.sender))
        wanted = kinds(subject, agreement, duplicate=duplicate)
        if not wanted:
            return 0
        ours = _party(agreement.sender) if agreement.sender else subject.receiver
        counter = f"{subject.standard}:{partner_key(ours)}>{partner_key(subject.sender)}"
        where = destination(agreement, subject.sender)
        now = datetime.now()
        for kind in wanted:
            n = int((await tx.unit.fetch("hub_next_control_number", {"partner": counter}))[0][0])
            control = str((n - 1) % _X12_CONTROL_NUMBERS + 1) if subject.standard == "X12" else str(n)
            replies = edi.replies(subject, kind, duplicate=duplicate)
            data = edi.render_reply(replies, subject, sender=ours, control_number=control, when=now)
            source, number = edi.reply_key(subject, sender=ours, control_number=control)
            key = f"{source}/{number}"
            await tx.publish(where, data, key=key)
            row = {
                "consumer": self.config.consumer,
                "source": message.source,
                "message_id": message.message_id,
                "kind": kind,
                "duplicate": duplicate,
                "partner": counter,
                "control_number": number,
                "outbox_key": key,
            }
            await tx.unit.run("hub_record_acknowledgment", row)
        return len(wanted)


def _party(text: str) -> edi.Party:
    qualifier, _, party = text.partition(":")
    return edi.Party(qualifier, party)
