"""The hub's answers to partners: which acknowledgments an interchange gets, and writing them to the outbox.

An acknowledgment is written in the transaction that settles its interchange (with the journal row and the
invoices) and sent by the relay after the commit, so a rolled-back interchange is never acknowledged and a crash
loses none. Each one is an interchange of its own from us to the partner, with the next control number of that
partner (`edinbox_hub_control_numbers`: an upsert whose row lock serialises hubs, so no number is used twice; a
rolled-back one is used again, never sent twice), keyed in the outbox by its own inbox key (`source/control
number`, what the partner's inbox dedupes on), and listed in `edinbox_hub_acknowledgments` for `edinbox show`.

Which ones (`kinds`): nothing without an `outbound` destination or for an interchange of acknowledgments only; X12:
a TA1 when asked (ISA14 = 1 and `ta1 = "requested"`, or `ta1 = "always"`), and a 997 or 999 per agreement for its
functional groups (the TA1 and the 997 / 999 of one interchange go out together, as one interchange with one control
number, recorded as kind "TA1+997"); EDIFACT: a CONTRL when asked (UNB 0031 = 1, or `ta1 = "always"`). The same
kinds answer an interchange the hub parks (`Received.rejected`: every set R), once per interchange key; one the
partner registry refused (`_partners`) gets only its TA1 R 006 / 009 or CONTRL UCI 4 23 / 7, when asked: an unknown
sender under the hub's `unknown_outbound`, a receiver that is not ours under the sender's agreement. A duplicate (an
interchange key already processed, or reused with other content) that the partner re-sent gets a TA1 R 025 or a
CONTRL UCI 4 26 when `duplicates = "notify"`, once per delivery (`Answers`): never for the broker's own redelivery
of a delivery that was processed or notified.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from edinbox import AsyncTransaction, edi
from edinbox._plan import Key
from edinbox.hub.config import Agreement, HubConfig
from edinbox.sources import Delivery
from edinbox.stores import fetch_rows

__all__ = [
    "KINDS",
    "REJECTION",
    "Acknowledger",
    "Pending",
    "delivery_id",
    "kinds",
    "partner_key",
    "partner_name",
    "reserve",
]

REJECTION = "rejection"
"""The `delivery` of the `edinbox_hub_answers` row that says an interchange key got its rejection (once per key)."""

_X12_CONTROL_NUMBERS = 999_999_999
"""ISA13 has nine digits: a partner's counter wraps after this many acknowledgments."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_DIGESTED = re.compile(r"--[0-9a-f]{16}\Z")
"""How a partner id that `partner_name` changed ends: a simple id ending so is given a digest of its own too."""


def partner_key(party: edi.Party) -> str:
    """How agreements name a partner: "qualifier:id" (e.g. "ZZ:ACME", "14:5412345000013")."""
    return f"{party.qualifier}:{party.id}"


def kinds(subject: edi.Received, agreement: Agreement, *, duplicate: bool) -> list[str]:
    """The acknowledgments `subject` gets under `agreement` ("TA1", "997", "999", "CONTRL"), in sending order."""
    if not agreement.outbound or subject.only_acknowledgments:
        return []
    x12 = subject.standard == "X12"
    if (subject.standard, subject.error) in edi.PARTY_ERRORS:  # refused for its parties: only the envelope answers
        asked = agreement.ta1 == "always" or (agreement.ta1 == "requested" and subject.requested)
        return ["TA1" if x12 else "CONTRL"] if asked else []
    if duplicate:
        return ["TA1" if x12 else "CONTRL"] if agreement.duplicates == "notify" else []
    asked = agreement.ta1 == "always" or (agreement.ta1 == "requested" and subject.requested)
    if not x12:
        return ["CONTRL"] if asked and agreement.acknowledgment != "none" else []
    found = ["TA1"] if asked else []
    if agreement.acknowledgment != "none" and subject.groups:
        found.append(agreement.acknowledgment)
    return found


def partner_name(partner_id: str) -> str:
    """The partner's id as a path segment or queue name, one per id (two ids never share an outbound folder).

    An id of letters, digits, `_` and `-` is used as it is. Any other (`A.B`, `A B`, `A/B`, `../x`, empty) has its
    other characters made `_` and the first 16 hex digits of the SHA-256 of the id appended after `--`
    (`A.B` -> `A_B--<digest>`), as does a simple id that itself ends in `--` and 16 hex digits, so a changed name is
    never a simple id's.
    """
    if partner_id and not _UNSAFE.search(partner_id) and not _DIGESTED.search(partner_id):
        return partner_id
    digest = hashlib.sha256(partner_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{_UNSAFE.sub('_', partner_id)}--{digest}"


def destination(agreement: Agreement, partner: edi.Party) -> str:
    """The agreement's outbound URL, `{id}` replaced by the partner's id as `partner_name` makes it."""
    return agreement.outbound.replace("{id}", partner_name(partner.id))


@dataclass(frozen=True, slots=True)
class Pending:
    """One acknowledgment to write: what it answers, its kind, and where it goes."""

    subject: edi.Received
    kind: str
    duplicate: bool
    key: Key
    """The answered interchange's key (source, message id)."""
    sender: edi.Party
    destination: str

    @property
    def counter(self) -> str:
        """The control-number counter it draws from: standard, us, the partner."""
        return f"{self.subject.standard}:{partner_key(self.sender)}>{partner_key(self.subject.sender)}"


class Acknowledger:
    """Writes settled interchanges' acknowledgments to the outbox, in the settling transaction."""

    def __init__(self, config: HubConfig) -> None:
        """Answer per `config`'s partner agreements."""
        self.config = config

    def pending(self, subject: edi.Received, *, key: Key, duplicate: bool = False) -> list[Pending]:
        """What `subject` gets under its partner's agreement (see `kinds`); nothing is written yet."""
        return self._pending(subject, self._agreement(subject), key=key, duplicate=duplicate)

    def notifies(self, subject: edi.Received) -> bool:
        """True when a re-send of `subject` would get a duplicate notice: its deliveries are then remembered."""
        return bool(kinds(subject, self._agreement(subject), duplicate=True))

    def processed(self, subject: edi.Received, *, key: Key) -> tuple[list[Pending], bool]:
        """`pending` and `notifies` of a processed interchange, its partner's agreement looked up once."""
        agreement = self._agreement(subject)
        return self._pending(subject, agreement, key=key), bool(kinds(subject, agreement, duplicate=True))

    def _agreement(self, subject: edi.Received) -> Agreement:
        """The sender's agreement; for a sender the registry refused, the hub's `unknown_outbound` (TA1 / CONTRL
        when asked, nothing else)."""
        sender = partner_key(subject.sender)
        if self.config.unknown_outbound and not self.config.known(sender):
            return Agreement(outbound=self.config.unknown_outbound, acknowledgment="none")
        return self.config.agreement(sender)

    @staticmethod
    def _pending(subject: edi.Received, agreement: Agreement, *, key: Key, duplicate: bool = False) -> list[Pending]:
        wanted = kinds(subject, agreement, duplicate=duplicate)
        if not wanted:
            return []
        ours = _party(agreement.sender) if agreement.sender else subject.receiver
        where = destination(agreement, subject.sender)
        return [Pending(subject, kind, duplicate, key, ours, where) for kind in wanted]

    async def once(self, tx: AsyncTransaction, key: Key, *, delivery: str, answer: str) -> bool:
        """Note in `tx` that `key` was answered for `delivery` (`delivery_id`, or REJECTION for the key's one
        rejection); True when this is the first time (the primary key makes a second hub or a redelivery wait for
        the first transaction, then see its row)."""
        return bool(await tx.unit.run("hub_answer_once", self._answer(key, delivery=delivery, answer=answer)))

    async def remember(self, tx: AsyncTransaction, deliveries: Sequence[tuple[Key, str]]) -> None:
        """Note in `tx`, in one batch of statements, the deliveries (key, `delivery_id`) of processed interchanges
        whose re-sends would be notified: the broker's redelivery of one of them is then no re-send."""
        if deliveries:
            rows = [self._answer(key, delivery=d, answer="processed") for key, d in deliveries]
            await tx.unit.run_many("hub_answer_once", rows)

    def _answer(self, key: Key, *, delivery: str, answer: str) -> dict[str, str]:
        """The parameters of one `hub_answer_once` row."""
        return {
            "consumer": self.config.consumer,
            "source": key[0],
            "message_id": key[1],
            "delivery": delivery,
            "answer": answer,
        }

    async def write(self, tx: AsyncTransaction, pending: Sequence[Pending]) -> int:
        """Write the acknowledgments inside `tx`: a block of control numbers per partner (all partners in one
        statement), every outbox row and every `edinbox_hub_acknowledgments` row in one batch of statements each.
        Returns how many were written."""
        if not pending:
            return 0
        together = _together(pending)
        counts = Counter(kinds[0].counter for kinds in together)
        last = await reserve(tx, counts)
        numbers = {c: iter(range(last[c] - n + 1, last[c] + 1)) for c, n in counts.items()}
        now = datetime.now()
        outgoing: list[tuple[str, bytes, str]] = []
        rows: list[dict[str, Any]] = []
        for kinds in together:
            p = kinds[0]
            n = next(numbers[p.counter])
            x12 = p.subject.standard == "X12"
            control = str((n - 1) % _X12_CONTROL_NUMBERS + 1) if x12 else str(n)
            replies = [r for k in kinds for r in edi.replies(k.subject, k.kind, duplicate=k.duplicate)]
            data = edi.render_reply(replies, p.subject, sender=p.sender, control_number=control, when=now)
            source, number = edi.reply_key(p.subject, sender=p.sender, control_number=control)
            key = f"{source}/{number}"
            outgoing.append((p.destination, data, key))
            rows.append(
                {
                    "consumer": self.config.consumer,
                    "source": p.key[0],
                    "message_id": p.key[1],
                    "kind": KINDS.join(k.kind for k in kinds),
                    "duplicate": p.duplicate,
                    "partner": p.counter,
                    "control_number": number,
                    "outbox_key": key,
                }
            )
        await tx.publish_many(outgoing)
        await tx.unit.run_many("hub_record_acknowledgment", rows)
        return len(pending)


KINDS = "+"
"""Joins the kinds of one outgoing interchange in `edinbox_hub_acknowledgments.kind` ("TA1+997")."""


def _together(pending: Sequence[Pending]) -> list[list[Pending]]:
    """The outgoing interchanges of `pending`: an X12 TA1 and the 997 / 999 of the same interchange, to the same
    destination, travel in one interchange under one control number (the TA1 before the group); any other alone."""
    out: list[list[Pending]] = []
    for p in pending:
        last = out[-1] if out else None
        if (
            last is not None
            and p.kind in ("997", "999")
            and last[-1].kind == "TA1"
            and len(last) == 1
            and (last[0].key, last[0].destination, last[0].duplicate, last[0].counter)
            == (p.key, p.destination, p.duplicate, p.counter)
        ):
            last.append(p)
        else:
            out.append([p])
    return out


_BROKER_HEADERS = ("x-delivery-count", "x-death", "x-first-death-", "x-last-death-")
"""Headers a broker adds or changes when it delivers a message again (RabbitMQ): not part of its identity."""


def delivery_id(delivery: Delivery) -> str:
    """What names one delivery across the broker's redeliveries of it: a digest of its coordinates (the spool
    file, stream sequence, entry id or offset), the producer's id and the producer's headers. Two publishes differ
    wherever the broker numbers them or the producer stamps them; RabbitMQ numbers nothing, so there two publishes
    of one payload under one id and headers are one delivery, told apart only when the broker says a delivery is its
    first (`delivery_count == 1`, see `Batch`)."""
    headers = sorted((k, v) for k, v in delivery.headers.items() if not k.lower().startswith(_BROKER_HEADERS))
    text = "\n".join([delivery.coordinates, delivery.message_id or "", *(f"{k}={v}" for k, v in headers)])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


async def reserve(tx: AsyncTransaction, counts: Mapping[str, int]) -> dict[str, int]:
    """Reserve `counts[partner]` control numbers of each partner in one statement; the last number of each block.

    The upsert locks the partners' rows in their order (the statement sorts them), so hubs reserving for the same
    partners at once wait for each other, never deadlock; a rolled-back block is reserved again by the next one."""
    rows = [{"partner": partner, "k": counts[partner]} for partner in sorted(counts)]
    return {str(partner): int(n) for partner, n in await fetch_rows(tx, "hub_reserve_control_numbers", rows)}


def _party(text: str) -> edi.Party:
    qualifier, _, party = text.partition(":")
    return edi.Party(qualifier, party)
