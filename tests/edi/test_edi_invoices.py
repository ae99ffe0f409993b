"""Invoices from EDIFACT INVOIC and X12 810: fields, fallbacks, Decimal money and clear refusals."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from decimal import Decimal

import edi_fixtures as fixtures
import pytest

from edinbox.edi import (
    EdiSyntaxError,
    Invoice,
    InvoiceLine,
    InvoiceParty,
    NotKeyableError,
    Party,
    Separators,
    parse,
    render_interchange,
)


def invoices(data: bytes) -> list[Invoice]:
    """The invoices of the single interchange in `data`."""
    (ic,) = parse(data)
    return ic.invoices()


def test_edifact_invoic_fields() -> None:
    """BGM, DTM+137, NAD SU/BY, CUX, LIN/QTY/PRI/MOA and MOA 77/176 become an Invoice of Decimals."""
    (invoice,) = invoices(fixtures.EDIFACT_INVOIC)
    assert invoice.number == "INV-905"
    assert invoice.issue_date == date(2026, 11, 30)
    assert invoice.kind == "invoice"
    assert invoice.seller == InvoiceParty("4000001000005", "ACME GMBH")
    assert invoice.buyer == InvoiceParty("4000002000002", "HUB+CO AG")
    assert invoice.currency == "EUR"
    assert invoice.total == Decimal("119.60")
    assert invoice.tax_total == Decimal("19.10")
    assert [(li.quantity, li.unit_price, li.amount, li.item) for li in invoice.lines] == [
        (Decimal(2), Decimal("50.00"), Decimal("100.00"), "W-1"),
        (Decimal(1), Decimal("0.5"), Decimal("0.50"), "W-2"),
    ]
    assert invoice.message_ref == "1"


def test_edifact_comma_decimals_give_the_same_invoice() -> None:
    """UNA with a comma decimal mark (and hard wrapping) yields the same Decimal values."""
    assert invoices(fixtures.EDIFACT_INVOIC_WRAPPED) == invoices(fixtures.EDIFACT_INVOIC)


@pytest.mark.parametrize(
    ("summary", "total", "tax"),
    [
        (b"MOA+86:10.00'MOA+124:1.00'MOA+124:0.50'", "10.00", "1.50"),
        (b"MOA+39:11'", "11", "0"),
        (b"MOA+128:12,5'MOA+9:99'", "12.5", "0"),
        (b"MOA+9:13'MOA+176:2'", "13", "2"),
    ],
)
def test_edifact_total_fallbacks(summary: bytes, total: str, tax: str) -> None:
    """Without MOA+77 the total falls back to 86, 39, 128, 9; without MOA+176 the tax is the sum of MOA+124."""
    data = fixtures.EDIFACT_INVOIC.replace(b"MOA+77:119.60'MOA+176:19.10'", summary)
    (invoice,) = invoices(data)
    assert invoice.total == Decimal(total)
    assert invoice.tax_total == Decimal(tax)


def test_edifact_credit_note_price_basis_and_fallback_parties() -> None:
    """BGM 381 is a credit note; PRI 5284 divides the price; NAD SE/IV stand in for SU/BY; DTM+3 for 137."""
    data = (
        fixtures.EDIFACT_INVOIC.replace(b"BGM+380", b"BGM+381")
        .replace(b"DTM+137:20261130:102", b"DTM+3:261129:101")
        .replace(b"NAD+SU", b"NAD+SE")
        .replace(b"NAD+BY+4000002000002::9++HUB?+CO AG", b"NAD+IV++HUB GMBH")
        .replace(b"PRI+AAA:50.00'", b"PRI+AAA:5000::NTP:100'")
        .replace(b"CUX+2:EUR:4'", b"")
        .replace(b"UNT+18", b"UNT+17")
    )
    (invoice,) = invoices(data)
    assert invoice.kind == "credit_note"
    assert invoice.issue_date == date(2026, 11, 29)
    assert invoice.seller.id == "4000001000005"
    assert invoice.buyer == InvoiceParty("", "HUB GMBH")
    assert invoice.lines[0].unit_price == Decimal(50)
    assert invoice.currency is None


def test_x12_810_fields_with_implied_decimals() -> None:
    """BIG, CUR, N1 SE/BY, IT1/PID, TDS (two implied decimals) and TXI become an Invoice of Decimals."""
    (invoice,) = invoices(fixtures.X12_810)
    assert invoice.number == "INV-905"
    assert invoice.issue_date == date(2026, 11, 30)
    assert invoice.kind == "invoice"
    assert invoice.seller == InvoiceParty("4000001000005", "ACME GMBH")
    assert invoice.buyer == InvoiceParty("4000002000002", "HUB AG")
    assert invoice.currency == "EUR"
    assert invoice.total == Decimal("119.60")
    assert invoice.tax_total == Decimal("19.10")
    assert invoice.lines[0] == InvoiceLine(Decimal(2), Decimal("50.00"), Decimal("100.00"), "W-1", "WIDGET")
    assert invoice.lines[1].amount == Decimal("0.5")


def test_x12_810_credit_memo_and_remit_to_seller() -> None:
    """BIG07 CR is a credit note; N1*RE stands in for the seller and N1*BT for the buyer; no CUR gives None."""
    data = (
        fixtures.X12_810.replace(b"*****DI~", b"*****CR~")
        .replace(b"N1*SE*", b"N1*RE*")
        .replace(b"N1*BY*", b"N1*BT*")
        .replace(b"CUR*SE*EUR~", b"")
        .replace(b"SE*12*0001", b"SE*11*0001")
    )
    (invoice,) = invoices(data)
    assert invoice.kind == "credit_note"
    assert invoice.seller.name == "ACME GMBH"
    assert invoice.buyer.name == "HUB AG"
    assert invoice.currency is None


@pytest.mark.parametrize(
    ("data", "sentence"),
    [
        (fixtures.EDIFACT_INVOIC.replace(b"BGM+380+INV-905+9'", b"BGM+380'"), "has no invoice number"),
        (fixtures.EDIFACT_INVOIC.replace(b"DTM+137:20261130:102'", b""), "has no document date"),
        (fixtures.EDIFACT_INVOIC.replace(b"20261130:102", b"20261330:102"), "is not a date"),
        (fixtures.EDIFACT_INVOIC.replace(b"NAD+SU", b"NAD+XX"), "has no seller"),
        (fixtures.EDIFACT_INVOIC.replace(b"MOA+77:119.60'", b""), "has no invoice total"),
        (fixtures.EDIFACT_INVOIC.replace(b"MOA+77:119.60", b"MOA+77:1.196.0"), "is not a number"),
        (fixtures.EDIFACT_INVOIC.replace(b"QTY+47:2'", b""), "line has no quantity"),
        (fixtures.X12_810.replace(b"TDS*11960~", b""), "has no invoice total"),
        (fixtures.X12_810.replace(b"N1*BY*", b"N1*ZZ*"), "has no buyer"),
        (fixtures.X12_810.replace(b"IT1*1*2*", b"IT1*1*two*"), "IT102 quantity 'two' is not a number"),
        # a quantity and price of 500,000 digits each: their product let decimal.Overflow escape
        (
            fixtures.X12_810.replace(b"IT1*1*2*EA*50.00", b"IT1*1*" + b"9" * 500_000 + b"*EA*" + b"9" * 500_000),
            "IT102 quantity has 500000 characters; a number has at most 35",
        ),
        (fixtures.EDIFACT_INVOIC.replace(b"PRI+AAA:50.00'", b"PRI+AAA:" + b"1" * 36 + b"'"), "at most 35"),
        (fixtures.X12_810.replace(b"BIG*20261130", b"BIG*20261399"), "BIG01 invoice date '20261399' is not a date"),
        (fixtures.EDIFACT_INVOIC.replace(b"DTM+137:", b"DTM+9:"), r"has no document date \(DTM\+137\)"),
    ],
)
def test_missing_or_bad_invoice_fields_raise_a_sentence(data: bytes, sentence: str) -> None:
    """A missing mandatory field, a non-number, an oversized number or an impossible date raises EdiSyntaxError
    naming the message and the field, never another exception."""
    (ic,) = parse(data)
    with pytest.raises(EdiSyntaxError, match=sentence) as caught:
        ic.invoices()
    assert caught.value.segment_index is not None
    assert ic.span[0] <= caught.value.offset < ic.span[1]


def test_interchange_without_invoices_gives_an_empty_list() -> None:
    """ORDERS, 997 and other messages carry no invoices."""
    assert invoices(fixtures.edifact_orders(b"O1")) == []


def test_incomplete_interchange_gives_no_invoices() -> None:
    """Invoices of an interchange without trailer are never read: it is not processed until resent; the one at a
    time reader says so when asked, before any invoice."""
    (ic,) = parse(fixtures.EDIFACT_INVOIC.split(b"UNZ")[0])
    with pytest.raises(NotKeyableError):
        ic.invoices()
    with pytest.raises(NotKeyableError):
        ic.iter_invoices()


@pytest.mark.parametrize("standard", ["X12", "EDIFACT"])
def test_invoices_one_at_a_time_are_the_list_and_can_drop_their_lines(standard: str) -> None:
    """iter_invoices() yields what invoices() returns, in order, one at a time; without_lines() keeps every field
    but the lines, and the line count."""
    lines = [InvoiceLine(Decimal(n), Decimal("2.50"), Decimal(n) * Decimal("2.50"), item=f"W-{n}") for n in (1, 2, 3)]
    parties = {"seller": InvoiceParty("S1"), "buyer": InvoiceParty("B1"), "currency": "EUR"}
    documents = [
        Invoice(
            f"N-{n}", date(2026, 1, 31), "invoice", **parties, total=Decimal(n), tax_total=Decimal(0), lines=lines[:n]
        )
        for n in (1, 2, 3)
    ]
    data = render_interchange(
        documents, standard=standard, sender=Party("ZZ", "S"), receiver=Party("ZZ", "R"), control_number="7"
    )
    (ic,) = parse(data)
    each = ic.iter_invoices()
    first = next(each)
    assert [first, *each] == ic.invoices()
    assert [i.line_count for i in ic.invoices()] == [1, 2, 3]
    short = ic.invoices()[2].without_lines()
    assert (short.lines, short.line_count) == ((), 3)
    assert replace(short, lines=lines) == ic.invoices()[2]
    assert replace(short, lines=()).line_count == 0  # a copy of it counts its own lines again


@pytest.mark.parametrize("standard", ["X12", "EDIFACT"])
def test_render_round_trip_of_several_invoices(standard: str) -> None:
    """render_interchange writes what invoices() reads back, field for field, one message per invoice."""
    first = Invoice(
        number="A-1",
        issue_date=date(2026, 1, 31),
        kind="invoice",
        seller=InvoiceParty("S1", "SELLER"),
        buyer=InvoiceParty("B1", "BUYER"),
        currency="USD",
        total=Decimal("-12.34"),
        tax_total=Decimal("0.00"),
        lines=[InvoiceLine(Decimal("2.0"), Decimal("-6.17"), Decimal("-12.340"), item="X", description="D")],
    )
    second = replace(first, number="A-2", kind="credit_note", lines=())
    data = render_interchange(
        [first, second],
        standard=standard,
        sender=Party("ZZ", "S"),
        receiver=Party("ZZ", "R"),
        control_number="123",
        separators=Separators("|", "^", "~") if standard == "X12" else None,
        decimal_mark="," if standard == "EDIFACT" else ".",
    )
    (ic,) = parse(data)
    assert ic.problems == ()
    read = ic.invoices()
    assert [replace(i, message_ref="") for i in read] == [first, second]


@pytest.mark.parametrize(
    ("change", "options", "words"),
    [
        ({"number": "A*B"}, {"standard": "X12"}, "contains the separator"),
        ({}, {"standard": "X12", "control_number": "12AB"}, "up to 9 digits"),
        ({"total": Decimal("1.001")}, {"standard": "X12"}, "whole cents"),
        ({}, {"standard": "EDIFACT", "una": False, "decimal_mark": ","}, "without UNA"),
        ({}, {"standard": "EDIFACT", "wrap": 5}, "at least 12"),
        ({}, {"standard": "EDI"}, "standard must be"),
        ({"number": "Ω"}, {"standard": "EDIFACT"}, "cannot be encoded in UNOC"),
    ],
)
def test_render_refuses_what_it_cannot_write(change: dict[str, object], options: dict[str, object], words: str) -> None:
    """The writer refuses values and options it cannot represent, with a ValueError naming the reason."""
    invoice = replace(
        Invoice(
            "N-1", date(2026, 1, 1), "invoice", InvoiceParty("S"), InvoiceParty("B"), "EUR", Decimal(1), Decimal(0)
        ),
        **change,  # type: ignore[arg-type]
    )
    kwargs = {"sender": Party("ZZ", "S"), "receiver": Party("ZZ", "R"), "control_number": "1", **options}
    with pytest.raises(ValueError, match=words):
        render_interchange([invoice], **kwargs)  # type: ignore[arg-type]


def test_invoice_kind_is_checked() -> None:
    """An Invoice is an invoice or a credit note, nothing else."""
    with pytest.raises(ValueError, match="kind"):
        Invoice("N", date(2026, 1, 1), "bill", InvoiceParty("S"), InvoiceParty("B"), None, Decimal(1), Decimal(0))
