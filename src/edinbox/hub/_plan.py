"""What the hub does with one delivery, decided before any I/O: its interchanges, their keys and routes.

For an EDI payload the interchange key wins (`Interchange.message()`); the delivery's producer id or broker
coordinates key only non-EDI payloads, and only when the configuration sends those through the inbox. A payload
that does not parse, and an interchange without its trailer, are parked (route `reject`) with a reason.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from typing import Any

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
    interchange: Any = None
    types: tuple[str, ...] = ()
    reason: str = ""
    payload: bytes = b""

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the parked bytes (rejected payloads are stored once per content)."""
        return hashlib.sha256(self.payload).hexdigest()


def _edi() -> Any:
    return importlib.import_module("edinbox.edi")


def message_types(interchange: Any) -> tuple[str, ...]:
    """The message types in an interchange (INVOIC, 810, 997, CONTRL...); `TA1` for an X12 one with none."""
    found = []
    for message in getattr(interchange, "messages", ()):
        kind = getattr(message, "type", None) or getattr(message, "message_type", None)
        if kind:
            found.append(str(kind).upper())
    if not found and getattr(interchange, "standard", "") == "X12":
        found.append("TA1")
    return tuple(dict.fromkeys(found))


def plan(delivery: Delivery, config: HubConfig) -> list[Item]:
    """Split a delivery into items: one per interchange, or one for a payload that is not EDI."""
    edi = _edi()
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
            problems = "; ".join(str(p) for p in interchange.problems) or "the interchange has no trailer"
            start, end = _span(interchange, len(payload))
            items.append(
                Item(REJECT, f"{delivery.coordinates}", reason=f"unkeyable: {problems}", payload=payload[start:end])
            )
            continue
        message = interchange.message()
        types = message_types(interchange)
        route = INBOX if any(config.route(t) == INBOX for t in types) or not types else BYPASS
        if not types:
            route = config.default_route
        label = f"{message.source}/{message.message_id}"
        items.append(Item(route, label, message=message, interchange=interchange, types=types))
    return items


def _span(interchange: Any, size: int) -> tuple[int, int]:
    span = getattr(interchange, "span", None)
    if isinstance(span, slice):
        return span.start or 0, span.stop if span.stop is not None else size
    if isinstance(span, tuple | range) and len(span) >= 2:
        return int(span[0]), int(span[-1]) if isinstance(span, tuple) else int(span.stop)
    return 0, size


def _not_edi(delivery: Delivery, payload: bytes, config: HubConfig, reason: str) -> Item:
    if config.non_edi == INBOX:
        message = Message(delivery.key, delivery.source, payload, headers=dict(delivery.headers))
        return Item(INBOX, f"{message.source}/{message.message_id}", message=message)
    return Item(REJECT, delivery.coordinates, reason=reason, payload=payload)
