"""X12 810 invoices (004010 and neighbours): BIG, CUR, N1 loops, IT1/PID, TDS (N2), TXI, CTT."""

from __future__ import annotations

from decimal import Decimal

from edinbox.edi._invoice import Element, Invoice, InvoiceLine, InvoiceParty, Reader

__all__ = ["read_810"]

_CREDIT = frozenset({"CR", "CN"})  # BIG07 transaction type code 640: credit memo, credit note
_SELLERS = ("SE", "SU", "VN", "RE", "RI", "II")
_BUYERS = ("BY", "BT", "SO")
# Where the values read sit (element position, data element reference), for an acknowledgment's AK4 / IK4
_BIG01 = Element(1, reference="373")
_IT102 = Element(2, reference="358")
_IT104 = Element(4, reference="212")
_TDS01 = Element(1, reference="610")
_TXI02 = Element(2, reference="782")


def _party(reader: Reader, qualifiers: tuple[str, ...], stop: int, what: str) -> InvoiceParty:
    found = reader.first("N1", qualifiers, stop) or reader.first("N1", qualifiers)
    if found is None:
        raise reader.fail(f"has no {what} (N1*{' / N1*'.join(qualifiers)})", stop, missing="N1", loop="N1")
    position, seg = found
    party = InvoiceParty(seg.get(4).strip(), seg.get(2).strip())
    if not party.id and not party.name:
        raise reader.fail(f"the {what} N1*{seg.get(1)} has neither an id nor a name", position)
    return reader.share(party)


def read_810(reader: Reader) -> Invoice:
    """The Invoice of one 810 transaction set; TDS01 has two implied decimals (N2: 255438 = 2554.38)."""
    segs = reader.segments
    first_line = next((k for k, s in enumerate(segs) if s.tag == "IT1"), len(segs))
    big = next(((k, s) for k, s in enumerate(segs) if s.tag == "BIG"), None)
    if big is None:
        raise reader.fail("has no BIG segment (invoice date and number)", 1, missing="BIG")
    if not big[1].get(2).strip():
        raise reader.fail("has no invoice number (BIG02)", big[0], at=Element(2, reference="76"), code="1")
    position, seg = big
    number = seg.get(2).strip()
    issue_date = reader.date(seg.get(1), "BIG01 invoice date", position, at=_BIG01)
    kind = "credit_note" if seg.get(7).strip() in _CREDIT else "invoice"
    seller = _party(reader, _SELLERS, first_line, "seller")
    buyer = _party(reader, _BUYERS, first_line, "buyer")
    cur = next((s for s in segs if s.tag == "CUR"), None)
    currency = reader.share((cur.get(2).strip() if cur else "") or None)
    lines: list[InvoiceLine] = []
    total: Decimal | None = None
    tds_at = len(segs)
    for k, s in enumerate(segs):
        if s.tag == "IT1":
            quantity = reader.decimal(s.get(2), "IT102 quantity", k, at=_IT102)
            price = reader.decimal(s.get(4), "IT104 unit price", k, at=_IT104)
            lines.append(InvoiceLine(quantity, price, quantity * price, item=s.get(7).strip()))
        elif s.tag == "PID" and lines and not lines[-1].description and k > first_line:
            last = lines[-1]
            lines[-1] = InvoiceLine(last.quantity, last.unit_price, last.amount, last.item, s.get(5).strip())
        elif s.tag == "TDS" and total is None:
            value = s.get(1).strip()
            amount = reader.decimal(value, "TDS01 total", k, at=_TDS01)
            total = amount if "." in value else amount.scaleb(-2)
            tds_at = k
    if total is None:
        raise reader.fail("has no invoice total (TDS01)", len(segs) - 1, missing="TDS")
    summary = [(k, s) for k, s in enumerate(segs) if s.tag == "TXI" and k > tds_at]
    if not summary:
        summary = [(k, s) for k, s in enumerate(segs) if s.tag == "TXI"]
    tax_total = sum(
        (reader.decimal(s.get(2), "TXI02 tax amount", k, at=_TXI02) for k, s in summary if s.get(2)), Decimal(0)
    )
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
