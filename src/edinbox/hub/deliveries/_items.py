"""What the hub does with one delivery, decided before any transaction: its interchanges, keys, invoices and routes.

For an EDI payload the interchange key wins (`Interchange.message()`); the delivery's producer id or broker
coordinates key only non-EDI payloads, and only when the configuration sends those through the inbox.

Every fault of the data is found here, per interchange, and parks that interchange alone (route `reject`, with its
reason), never its siblings and never the batch: a payload over `max_payload` (not parsed), a payload that does not
parse, an interchange without its trailer, a key the journal cannot hold (LimitError), a trailer that disagrees with
its content (`Interchange.disagreements`: a count or control number of SE/UNT, GE/UNE or IEA/UNZ; its
acknowledgment rejects it, so the partner sends a corrected one under a new key: parked whatever the agreements, the
rule is about the data), an interchange the partner registry keeps out (`_partners.refusal`: an unknown sender,
a receiver that is not ours; its rejection says so, TA1 R 006 / 009, CONTRL UCI 4 23 / 7), an invoice that cannot be
read (EdiSyntaxError: a bad date, a missing DTM+137) or holds a value the invoices table cannot (`invoice_problem`),
and, under an agreement with `validate = "strict"`, an interchange whose invoices break their implementation guide
(`edi.validate`; with "report" its findings only go into its acknowledgment, accepted with errors).
The invoices read here travel with the item, so the handler never reads them twice. They are read one at a time
(`Interchange.iter_invoices`) and each is checked as it comes; for a sink that needs only the totals and the line
count (the SQL sink) each is kept without its lines, so a big interchange never holds all its lines at once.

A delivery whose items are all parked is rejected as a whole: the source keeps the whole payload (the spool's
rejected/ folder, the broker's dead-letter queue), so the rejected table keeps only its first `HEAD` bytes and its
reason says the full size and where the rest is; when the source has to keep it elsewhere (a dead letter too large
for its topic, produced without its payload), its reject says where, and `kept_instead` rewrites the reason. A parked
interchange beside processed siblings is acked with them, so the rejected table keeps it whole (it is at most
`max_payload`), unless the database refuses to hold it whole (MariaDB reads no statement over its
max_allowed_packet): then it keeps its first `HEAD` bytes, and its reason says the rest is not kept (`refused`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from edinbox import edi
from edinbox._errors import LimitError
from edinbox._message import Message
from edinbox.hub.config import HubConfig, Route, levels
from edinbox.hub.database import compact_findings, describe_finding
from edinbox.hub.partners import Refusal, controls, partner_key, refusal
from edinbox.hub.sinks import invoice_problem
from edinbox.sources import Delivery, Source

__all__ = ["HEAD", "Item", "cut", "kept_at", "kept_instead", "message_types", "plan", "refused"]

HEAD = 64 * 1024
"""Bytes of a payload the rejected table keeps when the source keeps the whole of it."""

_INVOICE_TYPES = frozenset(("INVOIC", "810"))


@dataclass(frozen=True, slots=True)
class Item:
    """One unit of work in a delivery: an interchange (or a whole non-EDI payload) and its route."""

    route: Route
    label: str
    """The key for logs: `source/message_id`, or the delivery's coordinates for parked payloads."""
    message: Message | None = None
    """The interchange's inbox message; for a parked interchange whose header identifies it, one that is never
    journaled (the route says reject) and only names its source, so its logs and metric labels name its partner."""
    types: tuple[str, ...] = ()
    reason: str = ""
    payload: bytes = b""
    invoices: tuple[Any, ...] = ()
    """The interchange's invoices (`edinbox.edi.Invoice`), read once while planning (without their lines unless
    the plan was asked to keep them)."""
    received: edi.Received | None = None
    """What acknowledging the interchange needs, read while planning when some agreement sends acknowledgments;
    for a parked interchange whose header identifies it, what its rejection needs."""
    subject: tuple[str, str] | None = None
    """The interchange key `(source, control number)` of a parked interchange that gets a rejection (`received`)."""
    refusal: Refusal | None = None
    """Why the partner registry keeps a parked interchange out (`_partners.refusal`), None for a fault of its data."""
    controls: tuple[tuple[str, str], ...] = ()
    """The interchange's control numbers by level (`_ledger.controls`), for the ledger; none for a payload that is
    not an interchange or whose header names nobody."""
    validation: tuple[int, str] | None = None
    """What validating the interchange found (`compact_findings`: how many errors, the JSON list), kept with its
    key; None when its agreement does not validate it."""
    partner: str = ""
    """The sender as agreements name it (`qualifier:id`, `partner_key`) of an interchange whose header identifies
    it, read once while planning for the ledger and the metrics; empty for anything else."""

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the parked bytes (rejected payloads are stored once per content)."""
        return hashlib.sha256(self.payload).hexdigest()


def message_types(interchange: edi.Interchange) -> tuple[str, ...]:
    """The message types in an interchange (INVOIC, 810, 997, CONTRL, TA1...), as the parser reports them."""
    return tuple(t.upper() for t in interchange.message_types)


def plan(delivery: Delivery, config: HubConfig, *, kept: str = "", lines: bool = True) -> list[Item]:
    """Split a delivery into items: one per interchange, or one for a payload that is refused or not EDI.

    `kept` says where the source keeps a payload it rejects (e.g. "the dead-letter queue edi.in.dead"); the reason
    of a parked payload cut to its first `HEAD` bytes names it. `lines` False keeps each invoice without its lines
    (`Invoice.without_lines()`: the sink reads only totals and `line_count`); they are checked all the same.
    """
    items = _items(delivery, config, lines=lines)
    if items and all(item.route == Route.REJECT for item in items):
        if len(items) == 1:  # it stands for the whole delivery (refused, too big, not EDI, one interchange)
            return [cut(items[0], size=delivery.size or len(delivery.payload), kept=kept)]
        return [cut(item, size=len(item.payload), kept=kept) for item in items]
    return items


def _items(delivery: Delivery, config: HubConfig, *, lines: bool) -> list[Item]:
    if delivery.reason:  # the source parked it itself (too big, not a regular file): never parsed
        return [Item(Route.REJECT, delivery.coordinates, reason=delivery.reason, payload=delivery.payload[:HEAD])]
    payload = delivery.payload
    if len(payload) > config.max_payload:
        reason = f"the payload has {len(payload)} bytes, more than max_payload ({config.max_payload} bytes)"
        return [Item(Route.REJECT, delivery.coordinates, reason=reason, payload=payload[:HEAD])]
    try:
        interchanges = edi.parse(payload)
    except edi.EdiSyntaxError as exc:
        return [_not_edi(delivery, config, f"not a valid EDI interchange: {exc}")]
    if not interchanges:
        return [_not_edi(delivery, config, "no EDI interchange found in the payload")]
    return [_interchange(delivery, interchange, config, lines=lines) for interchange in interchanges]


def _interchange(delivery: Delivery, interchange: edi.Interchange, config: HubConfig, *, lines: bool) -> Item:
    """Plan one interchange; a fault of its own data parks it alone (with what its rejection needs, when some
    agreement answers partners and its header identifies it: garbage has nobody to answer)."""

    findings: Mapping[int, tuple[edi.Finding, ...]] = {}

    def parked(reason: str, *, faulty: int | None = None, finding: edi.Finding | None = None) -> Item:
        item = Item(Route.REJECT, delivery.coordinates, reason=_short(reason), payload=interchange.raw)
        if not interchange.identified:  # garbage names no partner and no message type
            return item
        named, types, sender = _named(interchange), message_types(interchange), partner_key(interchange.sender)
        chosen = levels(config.agreement(sender).ledger)
        item = replace(item, message=named, types=types, controls=controls(interchange, chosen), partner=sender)
        if not config.acknowledges:
            return item
        received = edi.received(interchange, rejected=True, faulty=faulty, finding=finding, findings=findings)
        return replace(item, received=received, subject=interchange.key)

    if not interchange.keyable:
        return parked(f"unkeyable: {'; '.join(interchange.problems) or 'the interchange has no trailer'}")
    try:
        message = interchange.message()
    except LimitError as exc:
        return parked(f"its key cannot be journaled: {exc}")
    if config.dead_letters and delivery.headers:  # a dead letter carries the delivery's own headers
        message = replace(message, headers=dict(delivery.headers))
    label = f"{message.source}/{message.message_id}"
    if refused := refusal(config, interchange):  # not for this hub, whatever it holds: answered for its parties
        item = replace(parked(refused.reason), label=label, refusal=refused)
        if item.received is None:
            return item
        return replace(item, received=replace(item.received, error=refused.error))
    if interchange.disagreements:  # its acknowledgment rejects it: booking it would book what the partner re-sends
        reason = f"a trailer disagrees with the interchange: {interchange.disagreements[0].reason}"
        return replace(parked(reason), label=label)
    types = message_types(interchange)
    # one invoice among acknowledgments is enough to need the inbox
    needs_inbox = Route.INBOX in map(config.route, types)
    route = (Route.INBOX if needs_inbox else Route.BYPASS) if types else Route(config.default_route)
    sender = partner_key(interchange.sender)
    agreement = config.agreement(sender)
    invoicing = route == Route.INBOX and not _INVOICE_TYPES.isdisjoint(types)
    kept: tuple[int, str] | None = None
    if invoicing and agreement.validate != "off":
        validation = edi.validate(interchange, agreement.overlay)
        findings = validation.findings
        kept = compact_findings(interchange, validation) if validation.checked else None
        if findings and agreement.validate == "strict":
            reason = f"it breaks its implementation guide: {_first(validation, kept)}"
            return replace(parked(reason), label=label, validation=kept)
    invoices: list[edi.Invoice] = []
    if invoicing:
        try:
            for invoice in interchange.iter_invoices():
                if problem := invoice_problem((invoice,)):
                    at = _invoice_message(interchange, read=len(invoices))
                    return replace(parked(f"an invoice cannot be stored: {problem}", faulty=at), label=label)
                invoices.append(invoice if lines else invoice.without_lines())
        except (edi.EdiSyntaxError, ValueError, ArithmeticError) as exc:
            # the parser promises EdiSyntaxError only; any other data fault of a number or date parks it the same way
            at = _invoice_message(interchange, read=len(invoices))
            finding = exc.finding if isinstance(exc, edi.EdiSyntaxError) else None
            return replace(parked(f"an invoice cannot be read: {exc}", faulty=at, finding=finding), label=label)
    # the interchange itself is not kept: its parsed segments would stay in memory through the transaction
    received = edi.received(interchange, findings=findings) if route == Route.INBOX and config.acknowledges else None
    return Item(
        route,
        label,
        message=message,
        types=types,
        invoices=tuple(invoices),
        received=received,
        controls=controls(interchange, levels(agreement.ledger)),
        validation=kept,
        partner=sender,
    )


def _first(validation: edi.Validation, kept: tuple[int, str] | None) -> str:
    """How many errors the validation found, and the first one in words."""
    total = kept[0] if kept else sum(map(len, validation.findings.values())) + validation.dropped
    first = json.loads(kept[1])[0] if kept else {}
    errors = "1 error" if total == 1 else f"{total} errors"
    return f"{errors}; the first in {describe_finding(first)}"


def _named(interchange: edi.Interchange) -> Message | None:
    """A message that names the source of an interchange whose header identifies it, even an incomplete one (its
    labels only: never journaled); None when its key parts are more than the journal holds (LimitError)."""
    try:
        return Message(interchange.control_number or "-", interchange.source, fingerprint="")
    except (LimitError, ValueError):
        return None


def _invoice_message(interchange: edi.Interchange, *, read: int) -> int | None:
    """The index (among `interchange.messages`) of the invoice `iter_invoices` reads after the `read` first: one
    invoice per INVOIC / 810 message, in order, so the one that failed (None past the last)."""
    kind = "810" if interchange.standard == "X12" else "INVOIC"
    following = [m.index for m in interchange.messages if m.type == kind][read:]
    return following[0] if following else None


def _not_edi(delivery: Delivery, config: HubConfig, reason: str) -> Item:
    payload = delivery.payload
    if Route(config.non_edi) is Route.INBOX:
        try:
            message = Message(delivery.key, delivery.source, payload, headers=dict(delivery.headers))
        except LimitError as exc:
            reason = _short(f"its key cannot be journaled: {exc}")
            return Item(Route.REJECT, delivery.coordinates, reason=reason, payload=payload)
        return Item(Route.INBOX, f"{message.source}/{message.message_id}", message=message)
    return Item(Route.REJECT, delivery.coordinates, reason=_short(reason), payload=payload)


def _short(reason: str, limit: int = 1000) -> str:
    """A reason fit for one log line and one column: a huge value quoted in an error is cut."""
    return reason if len(reason) <= limit else f"{reason[: limit - 40]}... ({len(reason)} characters)"


def cut(item: Item, *, size: int, kept: str) -> Item:
    """A parked item of a rejected delivery: its first HEAD bytes, the reason saying where the whole payload is."""
    if size <= HEAD:
        return item
    reason = f"{item.reason}; the first {HEAD} of its {size} bytes are kept here{_whole(kept)}"
    return replace(item, reason=reason, payload=item.payload[:HEAD])


def refused(item: Item, *, error: str) -> Item:
    """A parked item kept whole whose payload the database refused as too big (`error`): its first HEAD bytes, the
    reason saying its size and that the rest is not kept (its delivery is acked with its processed siblings)."""
    size = len(item.payload)
    reason = f"{item.reason}; the first {HEAD} of its {size} bytes are kept here, the rest is not kept: {error}"
    return replace(item, reason=reason, payload=item.payload[:HEAD])


def kept_instead(item: Item, *, kept: str, instead: str) -> Item:
    """An item `cut` with `kept`, its reason saying the whole payload is in `instead` (where the source had to keep
    it when it rejected the delivery); an item kept whole (or whose reason names no `kept`) is returned as it is."""
    said = _whole(kept)
    if not item.reason.endswith(said):
        return item
    return replace(item, reason=item.reason[: -len(said)] + _whole(instead))


def _whole(kept: str) -> str:
    """The end of a cut item's reason: where the whole payload is."""
    return f", the whole payload is in {kept}" if kept else ", the whole payload was rejected by the source"


def kept_at(source: Source) -> str:
    """Where `source` keeps a payload the hub rejects: the spool's rejected/ folder, or the broker's dead letters."""
    root = getattr(source, "root", None)
    if root is not None:
        return f"the spool's rejected folder {root}/rejected"
    dead = getattr(source, "dead", None) or getattr(source, "dead_letter", None)
    if dead:
        return f"the dead letters {dead} of {source.url}"
    return f"the dead letters of {source.url}"
