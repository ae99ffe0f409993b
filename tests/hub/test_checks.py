"""The invoice value limits the hub checks before any SQL, against what the real tables accept."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edinbox.edi import Invoice, InvoiceLine, InvoiceParty
from edinbox.hub.sinks._invoice_checks import (
    MAX_TEXT,
    _fits,
    _money_problem,
    _size_problem,
    _text_problem,
    invoice_problem,
)


def invoice(*, total: str = "10.00", number: str = "INV-1", seller: str = "ACME") -> Invoice:
    """A one-off invoice with the given total, number and seller id."""
    return Invoice(
        number=number,
        issue_date=date(2026, 12, 1),
        kind="invoice",
        seller=InvoiceParty(seller),
        buyer=InvoiceParty("HUB"),
        currency="EUR",
        total=Decimal(total),
        tax_total=Decimal("0"),
    )


@pytest.mark.parametrize(
    ("total", "fits"),
    [
        ("9999999999999999.9999", True),
        ("-9999999999999999.9999", True),
        ("1.50000", True),
        ("10000000000000000", False),
        ("1E+21", False),
        ("0.00001", False),
    ],
)
def test_money_limit_matches_postgresql(postgres_url: str, unique_name: str, total: str, fits: bool) -> None:
    """A total passes the check exactly when PostgreSQL's NUMERIC(20, 4) stores it unchanged."""
    assert (invoice_problem([invoice(total=total)]) is None) is fits
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE TEMP TABLE {unique_name} (total NUMERIC(20, 4))")
        try:
            stored = conn.execute(f"INSERT INTO {unique_name} VALUES (%s) RETURNING total", (Decimal(total),))
            row = stored.fetchone()
            kept = row is not None and row[0] == Decimal(total)
        except psycopg.errors.NumericValueOutOfRange:
            kept = False
    assert kept is fits


def test_text_limits_name_the_field() -> None:
    """A NUL in the seller id and an over-long invoice number are refused with the field named."""
    assert "seller" in (invoice_problem([invoice(seller="AC\x00ME")]) or "")
    problem = invoice_problem([invoice(number="9" * (MAX_TEXT + 1))])
    assert problem is not None
    assert "number" in problem
    assert str(MAX_TEXT) in problem


def test_good_invoices_pass() -> None:
    """Ordinary invoices raise no problem."""
    assert invoice_problem([invoice(), invoice(total="-12.3456", number="CN-7")]) is None


@settings(max_examples=400, deadline=None)
@given(
    total=st.decimals(allow_nan=True, allow_infinity=True),
    line=st.decimals(allow_nan=True, allow_infinity=True),
    number=st.text(alphabet="9\x00", max_size=MAX_TEXT + 2),
)
def test_the_quick_check_lets_through_only_what_the_full_check_does(total: Decimal, line: Decimal, number: str) -> None:
    """An invoice the quick check finds fitting has no value the full check refuses, whatever its total, line values
    and number (NaN, infinities, huge exponents, decimals past the fourth, a NUL, one character too many)."""
    lines = [InvoiceLine(line, Decimal(1), line)]
    checked = Invoice(
        number, date(2026, 12, 1), "invoice", InvoiceParty("A"), InvoiceParty("B"), "EUR", total, total, lines
    )
    if _fits(checked):
        assert _text_problem(number) is None
        assert _money_problem(total) is None
        assert _size_problem(line) is None
        assert invoice_problem([checked]) is None
