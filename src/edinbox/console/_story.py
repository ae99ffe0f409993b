"""An interchange's story for the console's message page: each part of its life, in order, from what the hub keeps.

Received (the journal row and the deliveries the hub answered for its key), journaled (status, settle time, retry,
last error), what validating it found (`hub.database.read_findings`: how many errors, and each one kept), the
invoices it created, the acknowledgments sent for it (with their relay status), parked copies of it (the same
fingerprint), the payload the message store kept, and its control number in the ledger.
On a library journal (no hub tables) only the journal's parts are told. Every read is a named query of
`hub/sql/<dialect>/console.sql` with bound parameters; the template escapes every value (partner text is data).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from edinbox import AsyncTransaction, edi
from edinbox._async_inbox import AsyncInbox
from edinbox.console._data import trace_ids
from edinbox.hub.database import describe_finding, findings_summary, has_hub
from edinbox.hub.ops import split_key, timestamp
from edinbox.hub.partners import normalise

__all__ = ["Part", "story"]

ANSWERS = {"processed": "delivered and processed", "notice": "delivered again: answered with a duplicate notice"}
"""What each answer the hub recorded for a delivery of the key says."""


@dataclass(frozen=True, slots=True)
class Part:
    """One part of the story: its name (the page's `story-<name>` id), its title, when, and what it says."""

    name: str
    title: str
    at: str
    lines: list[str] = field(default_factory=list)


def _stamp(value: Any) -> str:
    """A time as the hub's tables return it (a datetime, epoch seconds or ISO text), as the console writes times."""
    when = timestamp(value) if value != "" else None
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if when is not None else ""


async def story(inbox: AsyncInbox, key: str, row: dict[str, Any]) -> list[Part]:
    """The parts of the life of the journal row `row` (as `edinbox show` gives it) under `key`, in order."""
    source, message_id = split_key(key)
    params = {"consumer": inbox.consumer, "source": source, "message_id": message_id}
    hub = await has_hub(inbox)
    deliveries: list[Any] = []
    invoices: list[Any] = []
    parked: list[Any] = []
    ledger: list[Any] = []
    if hub:
        fingerprints = {
            "fingerprint": row.get("fingerprint") or "",
            "conflict_fingerprint": row.get("conflict_fingerprint") or "",
        }
        normal = normalise(message_id)
        numbers = {"consumer": inbox.consumer, "partner": edi.partner(source), "number": normal[0] if normal else ""}

        async def read(tx: AsyncTransaction) -> None:
            deliveries.extend(await tx.unit.fetch("console_story_deliveries", params))
            invoices.extend(await tx.unit.fetch("console_story_invoices", params))
            parked.extend(await tx.unit.fetch("console_story_parked", {"consumer": inbox.consumer, **fingerprints}))
            ledger.extend(await tx.unit.fetch("console_story_ledger", numbers))

        await inbox.read(read)
    answered = [d for d in deliveries if d[1] != "rejection"]
    received = [f"attempts: {row.get('attempts')}"]
    if hub:
        received.insert(0, f"deliveries answered: {len(answered)} ({max(len(answered) - 1, 0)} redelivered)")
        received += [f"{ANSWERS.get(d[0], d[0])} at {_stamp(d[2])}" for d in answered]
    if trace := trace_ids(row.get("trace")):
        received.append(f"trace {trace[0]}")
    parts = [Part("received", "Received", _stamp(row.get("received_at")), received)]
    journaled = [f"status: {row.get('status')}"]
    if row.get("retry_at"):
        journaled.append(f"retry at {_stamp(row.get('retry_at'))}")
    if row.get("last_error"):
        journaled.append(f"last error: {row.get('last_error')}")
    parts.append(Part("journaled", "Journaled", _stamp(row.get("settled_at")), journaled))
    if not hub:
        return parts + _kept(row)
    validated = row.get("validated")
    if validated is None:
        parts.append(Part("validated", "Validated", "", ["not validated"]))
    else:
        texts = [findings_summary(validated), *map(describe_finding, validated.get("findings") or ())]
        parts.append(Part("validated", "Validated", _stamp(validated.get("at") or ""), texts))
    parts.append(
        Part(
            "invoices",
            "Invoices created",
            _stamp(invoices[0][4]) if invoices else "",
            [f"{i[2]} {i[1]} of {i[0]}" + (f" (remote id {i[3]})" if i[3] else "") for i in invoices] or ["none"],
        )
    )
    acks = row.get("acknowledgments") or []
    lines = [f"{a['kind']} {a['control_number']}: {a['status']} (written {_stamp(a['at'])})" for a in acks]
    parts.append(
        Part("acknowledgments", "Acknowledgments sent", _stamp(acks[0]["at"]) if acks else "", lines or ["none"])
    )
    lines = [f"rejected/{p[0]}: {p[1]} ({p[2]} deliveries, at {_stamp(p[3])})" for p in parked]
    parts.append(Part("parked", "Parked copies", _stamp(parked[0][3]) if parked else "", lines or ["none"]))
    parts += _kept(row)
    lines = [
        f"{n[0]} {n[1]}: {n[2]} accepted, last {_stamp(n[4]) or '—'}" + (f", parked as rejected/{n[5]}" if n[5] else "")
        for n in ledger
    ]
    parts.append(Part("ledger", "Ledger numbers", _stamp(ledger[0][3]) if ledger else "", lines or ["none"]))
    return parts


def _kept(row: dict[str, Any]) -> list[Part]:
    """The message store's part: the kept payload's facts (its segments are on the page), or that none is kept."""
    kept = row.get("kept")
    if not kept:
        return [Part("kept", "Payload kept", "", ["not kept"])]
    cut = ", cut at the payload cap" if kept.get("truncated") else ""
    line = f"{kept.get('size')} bytes, {kept.get('content_type')}, SHA-256 {kept.get('sha256')}{cut}"
    return [Part("kept", "Payload kept", _stamp(kept.get("kept_at")), [line])]
