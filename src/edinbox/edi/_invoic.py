"""EDIFACT INVOIC (D.93A .. D.01B, EANCOM): read by segment tag and qualifier, never by segment group number."""

from __future__ import annotations

from decimal import Decimal

from edinbox.edi._invoice import Element, Invoice, InvoiceLine, InvoiceParty, Reader
from edinbox.edi._model import Segment

__all__ = ["read_invoic"]

# BGM C002 1001 document name codes meaning a credit note (UNTDID 1001: 81, 83, 261, 262, 296, 308, 381, 396,
# 420, 458, 532).
_CREDIT = frozenset({"81", "83", "261", "262", "296", "308", "381", "396", "420", "458", "532"})
_TOTALS = ("77", "86", "39", "128", "9")  # invoice amount, message total, invoice total, total amount, payable
_LINE_AMOUNTS = ("203", "66", "38")
_QUANTITIES = ("47", "46", "12")
_PRICES = ("AAA", "INV", "AAB")
# Where the values read sit (element, component, data element tag), for a CONTRL's UCD
_DATE = Element(1, 2, "2380")  # DTM C507
_QUANTITY = Element(1, 2, "6060")  # QTY C186
_AMOUNT = Element(1, 2, "5004")  # MOA C516
_PRICE = Element(1, 2, "5118")  # PRI C509
_BASIS = Element(1, 5, "5284")


def _party(reader: Reader, qualifiers: tuple[str, ...], stop: int, what: str) -> InvoiceParty:
    found = reader.first("NAD", qualifiers, stop) or reader.first("NAD", qualifiers)
    if found is None:
        raise reader.fail(f"has no {what} (NAD+{' / NAD+'.join(qualifiers)})")
    position, seg = found
    name = " ".join(c for c in seg.composite(4) if c) or seg.get(3)
    party = InvoiceParty(seg.get(2).strip(), name.strip())
    if not party.id and not party.name:
        raise reader.fail(f"the {what} NAD+{seg.get(1)} has neither an id nor a name", position)
    return reader.share(party)


def _pick(found: dict[str, tuple[int, Segment]], qualifiers: tuple[str, ...]) -> tuple[int, Segment] | None:
    for qualifier in qualifiers:
        if qualifier in found:
            return found[qualifier]
    for value in found.values():
        return value
    return None


def _line(reader: Reader, segs: list[tuple[int, Segment]]) -> InvoiceLine:
    lin_position, lin = segs[0]
    quantities: dict[str, tuple[int, Segment]] = {}
    prices: dict[str, tuple[int, Segment]] = {}
    amounts: dict[str, tuple[int, Segment]] = {}
    description = ""
    for position, seg in segs[1:]:
        kind = {"QTY": quantities, "PRI": prices, "MOA": amounts}.get(seg.tag)
        if kind is not None:
            kind.setdefault(seg.get(1), (position, seg))
        elif seg.tag == "IMD" and not description:
            description = seg.get(3, 4)
    qty = _pick(quantities, _QUANTITIES)
    if qty is None:
        raise reader.fail("line has no quantity (QTY+47)", lin_position)
    quantity = reader.decimal(qty[1].get(1, 2), "QTY quantity", qty[0], at=_QUANTITY)
    amount_at = next((amounts[q] for q in _LINE_AMOUNTS if q in amounts), None)
    amount = reader.decimal(amount_at[1].get(1, 2), "MOA line amount", amount_at[0], at=_AMOUNT) if amount_at else None
    price_at = _pick(prices, _PRICES)
    price: Decimal | None = None
    if price_at is not None:
        position, seg = price_at
        price = reader.decimal(seg.get(1, 2), "PRI price", position, at=_PRICE)
        basis = seg.get(1, 5).strip()
        if basis:
            per = reader.decimal(basis, "PRI unit price basis", position, at=_BASIS)
            if per > 0:
                price = price / per
    if price is None:
        if amount is None or not quantity:
            raise reader.fail("line has neither a price (PRI) nor an amount (MOA+203) to derive it", lin_position)
        price = amount / quantity
    if amount is None:
        amount = quantity * price
    return InvoiceLine(quantity, price, amount, item=lin.get(3, 1), description=description)


def read_invoic(reader: Reader) -> Invoice:
    """The Invoice of one INVOIC message (BGM, DTM+137, NAD, CUX, LIN/QTY/PRI/MOA, UNS, MOA 77 / 176)."""
    segs = reader.segments
    first_line = next((k for k, s in enumerate(segs) if s.tag in ("LIN", "UNS")), len(segs))
    bgm = next(((k, s) for k, s in enumerate(segs) if s.tag == "BGM"), None)
    if bgm is None or not bgm[1].get(2).strip():
        raise reader.fail("has no invoice number (BGM 1004)", bgm[0] if bgm else 0)
    number = bgm[1].get(2).strip()
    kind = "credit_note" if bgm[1].get(1).strip() in _CREDIT else "invoice"
    dtm = reader.first("DTM", ("137", "3"), first_line)
    if dtm is None:
        raise reader.fail("has no document date (DTM+137)", bgm[0] + 1, missing="DTM")  # expected after BGM
    issue_date = reader.date(dtm[1].get(1, 2), "DTM document date", dtm[0], fmt=dtm[1].get(1, 3).strip(), at=_DATE)
    seller = _party(reader, ("SU", "SE", "II"), first_line, "seller")
    buyer = _party(reader, ("BY", "IV", "BT"), first_line, "buyer")
    lines: list[InvoiceLine] = []
    current: list[tuple[int, Segment]] | None = None
    summary_start = len(segs)
    for k, seg in enumerate(segs):
        if seg.tag == "LIN":
            if current:
                lines.append(_line(reader, current))
            current = [(k, seg)]
        elif seg.tag == "UNS":
            summary_start = k
            break
        elif current is not None:
            current.append((k, seg))
    if current:
        lines.append(_line(reader, current))
    totals: dict[str, tuple[int, Segment]] = {}
    taxes = Decimal(0)
    tax_found = False
    scope = list(enumerate(segs))[summary_start:] if summary_start < len(segs) else list(enumerate(segs))
    for k, seg in scope:
        if seg.tag == "MOA":
            totals.setdefault(seg.get(1), (k, seg))
            if seg.get(1) == "124":
                taxes += reader.decimal(seg.get(1, 2), "MOA+124 tax amount", k, at=_AMOUNT)
                tax_found = True
    total_at = next((totals[q] for q in _TOTALS if q in totals), None)
    if total_at is None:
        raise reader.fail("has no invoice total (MOA 77, 86, 39, 128 or 9 after UNS)", summary_start)
    total = reader.decimal(total_at[1].get(1, 2), f"MOA+{total_at[1].get(1)} total", total_at[0], at=_AMOUNT)
    if "176" in totals:
        tax_total = reader.decimal(totals["176"][1].get(1, 2), "MOA+176 tax total", totals["176"][0], at=_AMOUNT)
    else:
        tax_total = taxes if tax_found else Decimal(0)
    cux = next((s for s in segs if s.tag == "CUX"), None)
    currency = reader.share((cux.get(1, 2).strip() if cux else "") or total_at[1].get(1, 3).strip() or None)
    return Invoice(
        number=number,
        issue_date=issue_date,
        kind=kind,
        seller=seller,
        buyer=buyer,
        currency=currency,
        total=total,
        tax_total=tax_total,
        lines=tuple(lines),
        message_ref=reader.message.control_number,
    )
