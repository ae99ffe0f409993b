"""Realistic partner traffic for the demo: EDIFACT INVOIC and X12 810 interchanges, acknowledgments and junk.

Partners differ the way real ones do: X12 or EDIFACT, default or custom separators, a comma as decimal mark,
release characters in names, line breaks after segments or none. The generator also knows the ground truth the demo
checks against: which files are copies of one interchange (producer duplicates, some re-rendered with other
separators), which reuse a control number with another content (conflicts), which re-send an invoice in a new
interchange (caught by the invoice key), and which are broken (no trailer, garbage). The bytes come from
edinbox.edi's writer (`render_interchange`); this module only decides who sends what, and how they write it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from decimal import Decimal

from edinbox.edi import Acknowledgment, Invoice, InvoiceLine, InvoiceParty, Party, Separators, render_interchange

__all__ = ["Doc", "Partner", "Style", "Traffic", "generate", "hub_party", "render"]

HUB_ID = "EDINBOXHUB"


@dataclass(frozen=True, slots=True)
class Style:
    """How a partner writes: separators, decimal mark, line breaks."""

    element: str
    component: str
    segment: str
    decimal: str = "."
    release: str = "?"
    newline: bool = False
    una: bool = True


X12_STYLES = (Style("*", ">", "~", newline=True), Style("|", "^", "~"), Style("*", ":", "\n"), Style("^", ">", "~"))
EDIFACT_STYLES = (
    Style("+", ":", "'", newline=True),
    Style("+", ":", "'", decimal=",", newline=True),
    Style("*", "=", "~", release="?"),
    Style("+", ":", "'", una=False),
    Style("|", "^", "!", decimal=","),
)


@dataclass(frozen=True, slots=True)
class Partner:
    """A trading partner that sends us invoices."""

    standard: str
    qualifier: str
    id: str
    name: str
    currency: str
    style: Style

    @property
    def party(self) -> Party:
        """The partner as an interchange sender."""
        return Party(self.qualifier, self.id)


def hub_party(standard: str) -> Party:
    """The hub as an interchange receiver (ZZ: mutually defined in X12, ZZZ in EDIFACT)."""
    return Party("ZZ" if standard == "X12" else "ZZZ", HUB_ID)


PARTNERS = (
    Partner("X12", "ZZ", "ACMESUPPLY", "Acme Supply Co", "USD", X12_STYLES[0]),
    Partner("X12", "01", "123456789", "Globex Foods", "USD", X12_STYLES[1]),
    Partner("X12", "ZZ", "INITECHPARTS", "Initech Parts", "CAD", X12_STYLES[2]),
    Partner("EDIFACT", "14", "4012345000009", "Fahrradhandel Pedal GmbH", "EUR", EDIFACT_STYLES[1]),
    Partner("EDIFACT", "14", "8712345678910", "O'Neill + Sons Ltd", "GBP", EDIFACT_STYLES[0]),
    Partner("EDIFACT", "ZZZ", "LAFROMAGERIE", "La Fromagerie SARL", "EUR", EDIFACT_STYLES[2]),
    Partner("EDIFACT", "14", "5412345000013", "Brouwerij Noord", "EUR", EDIFACT_STYLES[3]),
)
BUYERS = (("5790000000005", "Nordic Retail A/S"), ("0614141000005", "Midwest Grocers Inc"))


@dataclass(frozen=True, slots=True)
class Doc:
    """One interchange to render: an invoice (or credit note), or an acknowledgment (`kind="ack"`)."""

    partner: Partner
    control: str
    kind: str
    number: str = ""
    issue_date: date = date(2026, 12, 1)
    lines: tuple[tuple[int, Decimal], ...] = ()
    buyer: tuple[str, str] = BUYERS[0]
    prepared: datetime = datetime(2026, 12, 2, 9, 30)
    ack_requested: bool = False
    """ISA14 / UNB 0031 = 1: the partner asks for an acknowledgment of the interchange (TA1 / CONTRL)."""

    @property
    def total(self) -> Decimal:
        """Sum of the lines (quantity x unit price)."""
        return sum((q * p for q, p in self.lines), Decimal("0.00"))

    def document(self) -> Invoice | Acknowledgment:
        """What edinbox.edi writes: the invoice (19% tax on the lines), or the acknowledgment of our `number`."""
        p = self.partner
        if self.kind == "ack":
            return Acknowledgment(self.number, sender=hub_party(p.standard), receiver=p.party)
        cent = Decimal("0.01")
        lines = tuple(
            InvoiceLine(Decimal(q), price.quantize(cent), (q * price).quantize(cent), item=f"40{n:011d}")
            for n, (q, price) in enumerate(self.lines, 1)
        )
        tax = (self.total * Decimal("0.19")).quantize(cent)
        seller, buyer = InvoiceParty(p.id, p.name), InvoiceParty(*self.buyer)
        return Invoice(self.number, self.issue_date, self.kind, seller, buyer, p.currency, self.total + tax, tax, lines)


def render(doc: Doc, style: Style | None = None, *, trailer: bool = True) -> bytes:
    """Render a document as its partner writes it (or with another style: a re-rendered producer duplicate).

    `trailer=False` cuts the interchange before its IEA / UNZ: malformed traffic the hub must park.
    """
    s, p = style or doc.partner.style, doc.partner
    x12 = p.standard == "X12"
    return render_interchange(
        [doc.document()],
        standard=p.standard,
        sender=p.party,
        receiver=hub_party(p.standard),
        control_number=doc.control,
        separators=Separators(s.element, s.component, s.segment, release=None if x12 else s.release),
        decimal_mark=s.decimal,
        line_break="\n" if s.newline and s.segment != "\n" else "",
        una=s.una,
        prepared_at=doc.prepared,
        trailer=trailer,
        ack_requested=doc.ack_requested,
    )


@dataclass(slots=True)
class Traffic:
    """Files to publish (producer id, payload) and the ground truth the demo checks."""

    files: list[tuple[str, bytes]] = field(default_factory=list)
    unique_interchanges: int = 0
    """Distinct keys of valid interchanges routed through the inbox (invoices)."""
    invoices: int = 0
    """Distinct invoices (seller, number, kind, issue date) among them: what accounting must hold."""
    duplicates: int = 0
    rerendered: int = 0
    conflicts: int = 0
    resends: int = 0
    acks: int = 0
    malformed: int = 0
    asked: int = 0
    """Unique valid interchanges that ask for an acknowledgment of the interchange (ISA14 / UNB 0031 = 1)."""
    x12: int = 0
    """Unique valid X12 interchanges: each gets a functional acknowledgment (997 or 999) under the demo's agreements."""
    broken_asked: int = 0
    """Interchanges without their trailer that ask for an acknowledgment of the interchange: each gets a TA1 R 023
    or a CONTRL UCI 4 13 (they are parked, but their header says whom to answer)."""
    broken_x12: int = 0
    """X12 interchanges without their trailer: each gets a 997 or 999 rejecting its sets."""
    rejections: int = 0
    """Interchanges without their trailer that get some rejection (every X12 one, an EDIFACT one that asked)."""
    invoice_keys: frozenset[tuple[str, str, str, date]] = frozenset()
    """The key of each distinct invoice (seller id, number, kind, issue date), as the `invoices` table holds it."""


def _key(doc: Doc) -> str:
    p, hub = doc.partner, hub_party(doc.partner.standard)
    return f"{p.standard}:{p.qualifier}:{p.id}>{hub.qualifier}:{hub.id}/{doc.control}"


def generate(messages: int, *, duplicate_rate: float, seed: int, mixed: bool = True) -> Traffic:
    """Generate about `messages` partner interchanges with duplicates, conflicts, resends, acks and broken files.

    `mixed=False`: exactly `messages` distinct invoice interchanges (and their duplicates), nothing else.
    """
    rng = random.Random(seed)  # noqa: S311 - demo traffic, not security
    asks = random.Random(seed + 1)  # noqa: S311 - who asks for a TA1 / CONTRL; its own stream keeps the traffic's
    traffic = Traffic()
    controls = {p.id: rng.randrange(1000, 900000) for p in PARTNERS}
    originals: list[tuple[str, bytes]] = []
    invoice_docs: list[Doc] = []
    invoice_keys: set[tuple[str, str, str, date]] = set()

    def next_doc(partner: Partner, kind: str) -> Doc:
        controls[partner.id] += 1
        number = f"{partner.id[:3]}{controls[partner.id]:07d}"
        control = f"{controls[partner.id]:09d}" if partner.standard == "X12" else f"IC{controls[partner.id]}"
        lines = tuple((rng.randint(1, 40), Decimal(rng.randint(50, 50000)) / 100) for _ in range(rng.randint(1, 4)))
        issued = date(2026, 11, 1) + timedelta(days=rng.randrange(30))
        return Doc(partner, control, kind, number, issued, lines, rng.choice(BUYERS))

    for _ in range(messages):
        partner = rng.choice(PARTNERS)
        roll = rng.random() if mixed else 1.0
        if roll < 0.06:  # an acknowledgment: naturally idempotent, bypasses the inbox
            doc = next_doc(partner, "ack")
            originals.append((_key(doc), render(doc)))
            traffic.acks += 1
        elif roll < 0.10:  # broken: no trailer, or not EDI at all
            doc = next_doc(partner, "invoice")
            if rng.random() < 0.6:
                doc = replace(doc, ack_requested=asks.random() < 0.6)
                originals.append((_key(doc), render(doc, trailer=False)))
                x12 = partner.standard == "X12"
                traffic.broken_asked += doc.ack_requested
                traffic.broken_x12 += x12
                traffic.rejections += x12 or doc.ack_requested
            else:
                junk = f"%PDF-1.4 scanned invoice {doc.number}, not EDI\n".encode() + rng.randbytes(24)
                originals.append((f"junk-{doc.number}", junk))
            traffic.malformed += 1
        else:
            doc = next_doc(partner, "credit_note" if rng.random() < 0.1 else "invoice")
            doc = replace(doc, ack_requested=asks.random() < 0.6)
            invoice_docs.append(doc)
            originals.append((_key(doc), render(doc)))
            traffic.unique_interchanges += 1
            invoice_keys.add((partner.id, doc.number, doc.kind, doc.issue_date))

    extras = _duplicates(invoice_docs, rate=duplicate_rate, rng=rng, traffic=traffic, files=len(originals))
    resent_docs: list[Doc] = []
    odd = min(len(invoice_docs), max(1, messages // 100)) if mixed else 0
    for doc in rng.sample(invoice_docs, k=odd):
        changed = replace(doc, lines=((*doc.lines[0][:1], doc.lines[0][1] + 1), *doc.lines[1:]))
        extras.append((rng.randrange(len(originals) + 1), (_key(doc), render(changed))))  # control number reused
        traffic.conflicts += 1
    for doc in rng.sample(invoice_docs, k=odd):
        controls[doc.partner.id] += 1
        control = (
            f"{controls[doc.partner.id]:09d}" if doc.partner.standard == "X12" else f"IC{controls[doc.partner.id]}"
        )
        resent = replace(doc, control=control)  # the same invoice again, in a new interchange
        resent_docs.append(resent)
        extras.append((rng.randrange(len(originals) + 1), (_key(resent), render(resent))))
        traffic.unique_interchanges += 1
        traffic.resends += 1
    unique = [*invoice_docs, *resent_docs]
    traffic.asked = sum(d.ack_requested for d in unique)
    traffic.x12 = sum(d.partner.standard == "X12" for d in unique)
    files = list(originals)
    for position, item in sorted(extras, key=lambda e: -e[0]):
        files.insert(position, item)
    traffic.files = files
    traffic.invoices = len(invoice_keys)
    traffic.invoice_keys = frozenset(invoice_keys)
    return traffic


def _duplicates(
    docs: list[Doc], *, rate: float, rng: random.Random, traffic: Traffic, files: int
) -> list[tuple[int, tuple[str, bytes]]]:
    """The interchanges a producer published again (about `rate` of `docs`), some re-rendered by another translator,
    each with the position among the `files` first published where it goes; counted in `traffic`."""
    extras: list[tuple[int, tuple[str, bytes]]] = []
    for doc in docs:
        if rng.random() < rate:  # the producer published the same interchange again
            style = None
            if rng.random() < 0.3:  # ...re-rendered by another translator: other separators, same content
                styles = X12_STYLES if doc.partner.standard == "X12" else EDIFACT_STYLES
                other = rng.choice([s for s in styles if s != doc.partner.style])
                # another translator keeps the content, decimal marks included (a comma needs its UNA)
                style = replace(
                    other, decimal=doc.partner.style.decimal, una=other.una or doc.partner.style.decimal != "."
                )
                traffic.rerendered += 1
            extras.append((rng.randrange(files + 1), (_key(doc), render(doc, style))))
            traffic.duplicates += 1
    return extras
