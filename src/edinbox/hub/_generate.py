"""Realistic partner traffic for the demo: EDIFACT INVOIC and X12 810 interchanges, acknowledgments and junk.

Partners differ the way real ones do: X12 or EDIFACT, default or custom separators, a comma as decimal mark,
release characters in names, line breaks after segments or none. The generator also knows the ground truth the demo
checks against: which files are copies of one interchange (producer duplicates, some re-rendered with other
separators), which reuse a control number with another content (conflicts), which re-send an invoice in a new
interchange (caught by the invoice key), and which are broken (no trailer, garbage).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from decimal import Decimal

__all__ = ["Doc", "Partner", "Style", "Traffic", "generate", "render"]

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

    @property
    def total(self) -> Decimal:
        """Sum of the lines (quantity x unit price)."""
        return sum((q * p for q, p in self.lines), Decimal("0.00"))


def _amount(value: Decimal, style: Style) -> str:
    return f"{value:.2f}".replace(".", style.decimal)


def _edifact_escape(text: str, style: Style) -> str:
    for special in (style.release, style.element, style.component, style.segment):
        text = text.replace(special, style.release + special)
    return text


def _join(segments: list[list[str]], style: Style) -> str:
    end = style.segment + ("\n" if style.newline and style.segment != "\n" else "")
    return "".join(style.element.join(seg) + end for seg in segments)


def render_edifact(doc: Doc, style: Style, *, trailer: bool = True) -> bytes:
    """An EDIFACT interchange (INVOIC, or CONTRL for an ack) with the partner's separators."""
    p, s = doc.partner, style

    def esc(text: str) -> str:
        return _edifact_escape(text, s)

    c = s.component
    head = f"UNA{s.component}{s.element}{s.decimal}{s.release} {s.segment}" if s.una else ""
    head += "\n" if head and s.newline else ""
    body: list[list[str]] = []
    if doc.kind == "ack":
        body += [
            ["UNH", "1", c.join(["CONTRL", "D", "3", "UN"])],
            ["UCI", doc.number, c.join([HUB_ID, "ZZZ"]), c.join([p.id, p.qualifier]), "7"],
        ]
    else:
        body += [
            ["UNH", "1", c.join(["INVOIC", "D", "96A", "UN", "EAN008"])],
            ["BGM", "381" if doc.kind == "credit_note" else "380", esc(doc.number), "9"],
            ["DTM", c.join(["137", doc.issue_date.strftime("%Y%m%d"), "102"])],
            ["NAD", "SU", c.join([p.id, "", "9"]), "", esc(p.name)],
            ["NAD", "BY", c.join([doc.buyer[0], "", "9"]), "", esc(doc.buyer[1])],
            ["CUX", c.join(["2", p.currency, "4"])],
        ]
        for n, (qty, price) in enumerate(doc.lines, 1):
            body += [
                ["LIN", str(n), "", c.join([f"40{n:011d}", "EN"])],
                ["QTY", c.join(["47", str(qty), "PCE"])],
                ["MOA", c.join(["203", _amount(qty * price, s)])],
                ["PRI", c.join(["AAA", _amount(price, s)])],
            ]
        tax = (doc.total * Decimal("0.19")).quantize(Decimal("0.01"))
        body += [
            ["UNS", "S"],
            ["MOA", c.join(["77", _amount(doc.total + tax, s)])],
            ["MOA", c.join(["79", _amount(doc.total, s)])],
            ["MOA", c.join(["176", _amount(tax, s)])],
        ]
    body.append(["UNT", str(len(body) + 1), "1"])
    unb = [
        "UNB",
        c.join(["UNOC", "3"]),
        c.join([p.id, p.qualifier]),
        c.join([HUB_ID, "ZZZ"]),
        c.join([doc.prepared.strftime("%y%m%d"), doc.prepared.strftime("%H%M")]),
        doc.control,
    ]
    segments = [unb, *body]
    if trailer:
        segments.append(["UNZ", "1", doc.control])
    return (head + _join(segments, s)).encode("latin-1")


def render_x12(doc: Doc, style: Style, *, trailer: bool = True) -> bytes:
    """An X12 interchange (810, or 997 for an ack) with the partner's separators; ISA stays fixed-width."""
    p, s = doc.partner, style
    isa = [
        "ISA",
        "00",
        " " * 10,
        "00",
        " " * 10,
        p.qualifier,
        p.id.ljust(15),
        "ZZ",
        HUB_ID.ljust(15),
        doc.prepared.strftime("%y%m%d"),
        doc.prepared.strftime("%H%M"),
        "U",
        "00401",
        doc.control,
        "0",
        "P",
        s.component,
    ]
    group = str(int(doc.control) % 100000 or 1)
    gs_code, st_code = ("FA", "997") if doc.kind == "ack" else ("IN", "810")
    body: list[list[str]] = [["ST", st_code, "0001"]]
    if doc.kind == "ack":
        body += [["AK1", "IN", doc.number], ["AK9", "A", "1", "1", "1"]]
    else:
        big = ["BIG", doc.issue_date.strftime("%Y%m%d"), doc.number, "", f"PO{doc.number[-5:]}"]
        if doc.kind == "credit_note":
            big += ["", "", "CR"]
        body += [
            big,
            ["CUR", "SE", p.currency],
            ["N1", "SE", p.name, "92", p.id],
            ["N1", "BY", doc.buyer[1], "92", doc.buyer[0]],
        ]
        for n, (qty, price) in enumerate(doc.lines, 1):
            body += [["IT1", str(n), str(qty), "EA", f"{price:.2f}", "", "VN", f"SKU{n:04d}"]]
        body += [["TDS", str(int(doc.total * 100))], ["CTT", str(len(doc.lines))]]
    body.append(["SE", str(len(body) + 1), "0001"])
    segments = [
        isa,
        [
            "GS",
            gs_code,
            p.id,
            HUB_ID,
            doc.prepared.strftime("%Y%m%d"),
            doc.prepared.strftime("%H%M"),
            group,
            "X",
            "004010",
        ],
        *body,
        ["GE", "1", group],
    ]
    if trailer:
        segments.append(["IEA", "1", doc.control])
    return _join(segments, s).encode("latin-1")


def render(doc: Doc, style: Style | None = None, *, trailer: bool = True) -> bytes:
    """Render a document as its partner writes it (or with another style: a re-rendered producer duplicate)."""
    style = style or doc.partner.style
    if doc.partner.standard == "X12":
        return render_x12(doc, style, trailer=trailer)
    return render_edifact(doc, style, trailer=trailer)


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


def _key(doc: Doc) -> str:
    p = doc.partner
    receiver = "ZZ" if p.standard == "X12" else "ZZZ"
    return f"{p.standard}:{p.qualifier}:{p.id}>{receiver}:{HUB_ID}/{doc.control}"


def generate(messages: int, *, duplicate_rate: float, seed: int) -> Traffic:
    """Generate about `messages` partner interchanges with duplicates, conflicts, resends, acks and broken files."""
    rng = random.Random(seed)  # noqa: S311 - demo traffic, not security
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
        roll = rng.random()
        if roll < 0.06:  # an acknowledgment: naturally idempotent, bypasses the inbox
            doc = next_doc(partner, "ack")
            originals.append((_key(doc), render(doc)))
            traffic.acks += 1
        elif roll < 0.10:  # broken: no trailer, or not EDI at all
            doc = next_doc(partner, "invoice")
            if rng.random() < 0.6:
                originals.append((_key(doc), render(doc, trailer=False)))
            else:
                junk = f"%PDF-1.4 scanned invoice {doc.number}, not EDI\n".encode() + rng.randbytes(24)
                originals.append((f"junk-{doc.number}", junk))
            traffic.malformed += 1
        else:
            doc = next_doc(partner, "credit_note" if rng.random() < 0.1 else "invoice")
            invoice_docs.append(doc)
            originals.append((_key(doc), render(doc)))
            traffic.unique_interchanges += 1
            invoice_keys.add((partner.id, doc.number, doc.kind, doc.issue_date))

    extras: list[tuple[int, tuple[str, bytes]]] = []
    for doc in invoice_docs:
        if rng.random() < duplicate_rate:  # the producer published the same interchange again
            style = None
            if rng.random() < 0.3:  # ...re-rendered by another translator: other separators, same content
                styles = X12_STYLES if doc.partner.standard == "X12" else EDIFACT_STYLES
                other = rng.choice([s for s in styles if s != doc.partner.style])
                # another translator keeps the content, decimal marks included (a comma needs its UNA)
                style = replace(
                    other, decimal=doc.partner.style.decimal, una=other.una or doc.partner.style.decimal != "."
                )
                traffic.rerendered += 1
            extras.append((rng.randrange(len(originals) + 1), (_key(doc), render(doc, style))))
            traffic.duplicates += 1
    for doc in rng.sample(invoice_docs, k=min(len(invoice_docs), max(1, messages // 100))):
        changed = replace(doc, lines=((*doc.lines[0][:1], doc.lines[0][1] + 1), *doc.lines[1:]))
        extras.append((rng.randrange(len(originals) + 1), (_key(doc), render(changed))))  # control number reused
        traffic.conflicts += 1
    for doc in rng.sample(invoice_docs, k=min(len(invoice_docs), max(1, messages // 100))):
        controls[doc.partner.id] += 1
        control = (
            f"{controls[doc.partner.id]:09d}" if doc.partner.standard == "X12" else f"IC{controls[doc.partner.id]}"
        )
        resent = replace(doc, control=control)  # the same invoice again, in a new interchange
        extras.append((rng.randrange(len(originals) + 1), (_key(resent), render(resent))))
        traffic.unique_interchanges += 1
        traffic.resends += 1
    files = list(originals)
    for position, item in sorted(extras, key=lambda e: -e[0]):
        files.insert(position, item)
    traffic.files = files
    traffic.invoices = len(invoice_keys)
    return traffic
