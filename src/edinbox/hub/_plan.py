"""What the hub does with one delivery, decided before any I/O: its interchanges, their keys and routes.

For an EDI payload the interchange key wins (`Interchange.message()`); the delivery's producer id or broker
coordinates key only non-EDI payloads, and only when the configuration sends those through the inbox. A payload
that does not parse, an interchange without its trailer, and one whose invoices cannot be read (an
`edi.EdiSyntaxError`: a fault of the data, never retried) are parked (route `reject`) with a reason. Invoices are
read here, before any transaction, so an unreadable one never fails a batch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from edinbox import edi
from edinbox._message import Message
from edinbox.hub._config import BYPASS, INBOX, HubConfig
from edinbox.sources._base import Delivery

__all__ = ["REJECT", "Item", "message_types", "plan"]

REJECT = "reject"


@dataclass(frozen=True, slots=True)
class Item:
    """One unit of work in a delivery: an interchange (or a whole non-EDI payload) and its route."""

    route: str
    """"inbox", "bypass" or "reject"."""
    label: str
    """The key for logs: `source/message_id`, or the delivery's coordinates for parked payloads."""
    message: Message | None = None
    interchange: edi.Interchange | None = None
    types: tuple[str, ...] = ()
    reason: str = ""
    payload: bytes = b""
    invoices: tuple[edi.Invoice, ...] = ()
    """The interchange's invoices, read while planning (inbox route only)."""

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the parked bytes (rejected payloads are stored once per content)."""
        return hashlib.sha256(self.payload).hexdigest()


def message_types(interchange: edi.Interchange) -> tuple[str, ...]:
    """The message types in an interchange (INVOIC, 810, 997, CONTRL, TA1...), as the parser reports them."""
    return tuple(t.upper() for t in interchange.message_types)


def plan(delivery: Delivery, config: HubConfig) -> list[Item]:
    """Split a delivery into items: one per interchange, or one for a payload that is not EDI."""
    payload = bytes(delivery.payload)
    try:
        interchanges = edi.parse(payload)
    except edi.EdiSyntaxError as exc:
        return [_not_edi(delivery, payload, config, f"not a valid EDI interchange: {exc}")]
    if not interchanges:
        return [_not_edi(delivery, payload, config, "no EDI interchange found in the payload")]
    items = []
    for interchange in interchanges:
        if not interchange.keyable:
            problems = "; ".join(interchange.problems) or "the interchange has no trailer"
            start, end = interchange.span
            items.append(
                Item(REJECT, f"{delivery.coordinates}", reason=f"unkeyable: {problems}", payload=payload[start:end])
            )
            continue
        message = interchange.message()
        types = message_types(interchange)
        # one invoice among acknowledgments is enough to need the inbox
        needs_inbox = any(config.route(t) == INBOX for t in types)
        route = (INBOX if needs_inbox else BYPASS) if types else config.default_route
        label = f"{message.source}/{message.message_id}"
        try:
            invoices = tuple(interchange.invoices()) if route == INBOX else ()
        except edi.EdiSyntaxError as exc:
            start, end = interchange.span
            reason = f"unreadable invoice in {label}: {exc}"
            items.append(Item(REJECT, label, types=types, reason=reason, payload=payload[start:end]))
            continue
        items.append(Item(route, label, message=message, interchange=interchange, types=types, invoices=invoices))
    return items


def _not_edi(delivery: Delivery, payload: bytes, config: HubConfig, reason: str) -> Item:
    if config.non_edi == INBOX:
        message = Message(delivery.key, delivery.source, payload, headers=dict(delivery.headers))
        return Item(INBOX, f"{message.source}/{message.message_id}", message=message)
    return Item(REJECT, delivery.coordinates, reason=reason, payload=payload)
