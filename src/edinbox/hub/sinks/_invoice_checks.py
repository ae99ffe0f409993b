"""What the `invoices` table can hold, checked before any SQL runs, so one bad value parks one interchange.

The SQL sink writes money as `NUMERIC(20, 4)` on PostgreSQL and as exact text on SQLite; both databases get the
same rule here, so an invoice that one accepts the other accepts too. Line values (quantity, unit price, amount)
are not stored by the SQL sink but travel to accounting: they may have any decimals, and at most the same digits
before the decimal point. A value outside these limits is a permanent failure of its interchange (parked at once
with the reason), never a database error that would fail its batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from edinbox.hub.sinks._accounting import party_key

__all__ = ["MAX_DECIMALS", "MAX_DIGITS", "MAX_LINES", "MAX_TEXT", "invoice_problem"]

MAX_DIGITS = 16
"""Digits before the decimal point a money value may have (`NUMERIC(20, 4)`)."""
MAX_DECIMALS = 4
"""Digits after the decimal point a money value may have; more would be rounded, so it is refused."""
MAX_TEXT = 512
"""Characters a party id, invoice number or currency may have (they form the invoice's unique key)."""
MAX_LINES = 2**31 - 1
"""Lines an invoice may have (an `INTEGER` column)."""


def invoice_problem(invoices: Sequence[Any]) -> str | None:
    """The first value of `invoices` that the `invoices` table cannot hold, as a sentence; None when all fit."""
    for invoice in invoices:
        if _fits(invoice):  # the usual case, checked without building a sentence
            continue
        label = f"invoice {str(invoice.number)[:40]!r}"
        for what, text in _texts(invoice):
            if problem := _text_problem(text):
                return f"{label}: {what} {problem}"
        for what, value in (("total", invoice.total), ("tax total", invoice.tax_total)):
            if value is not None and (problem := _money_problem(value)):
                return f"{label}: {what} {problem}"
        if len(invoice.lines) > MAX_LINES:
            return f"{label}: {len(invoice.lines)} lines is more than {MAX_LINES}"
        for n, line in enumerate(invoice.lines, 1):
            for what in ("quantity", "unit_price", "amount"):
                value = getattr(line, what, None)
                if value is not None and (problem := _size_problem(value)):
                    return f"{label}: line {n} {what.replace('_', ' ')} {problem}"
    return None


def _fits(invoice: Any) -> bool:
    """True when every value of `invoice` plainly fits (what `invoice_problem` then has nothing to say about): texts
    short and without NUL, money with at most `MAX_DECIMALS` decimals and `MAX_DIGITS` digits before the point, line
    values finite with at most `MAX_DIGITS` digits before it. False sends the invoice through the full check."""
    for text in (str(invoice.number), party_key(invoice.seller), party_key(invoice.buyer), str(invoice.currency or "")):
        if len(text) > MAX_TEXT or "\x00" in text:
            return False
    for value in (invoice.total, invoice.tax_total):
        if value is not None and not (value.is_finite() and value.adjusted() < MAX_DIGITS and _few_decimals(value)):
            return False
    if len(invoice.lines) > MAX_LINES:
        return False
    for line in invoice.lines:
        for what in ("quantity", "unit_price", "amount"):
            value = getattr(line, what, None)
            if value is not None and not (value.is_finite() and value.adjusted() < MAX_DIGITS):
                return False
    return True


def _few_decimals(value: Decimal) -> bool:
    """True when a finite `value` plainly has at most `MAX_DECIMALS` decimals, read from its text (half the time of
    `as_tuple()`, which builds a tuple of every digit); an exponent in the text (1E+3, 1E-7) says False, for the full
    check to decide."""
    text = str(value)
    point = text.find(".")
    return "E" not in text and (point < 0 or len(text) - point - 1 <= MAX_DECIMALS)


def _texts(invoice: Any) -> Iterable[tuple[str, str]]:
    yield "number", str(invoice.number)
    yield "seller", party_key(invoice.seller)
    yield "buyer", party_key(invoice.buyer)
    yield "currency", str(invoice.currency or "")


def _text_problem(text: str) -> str | None:
    if len(text) > MAX_TEXT:
        return f"has {len(text)} characters, more than {MAX_TEXT}"
    if "\x00" in text:
        return "contains a NUL character"
    return None


def _money_problem(value: Decimal) -> str | None:
    if not value.is_finite():
        return f"{value} is not a finite number"
    _, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):  # pragma: no cover - finite values have an integer exponent
        return f"{value} is not a finite number"
    decimals = max(0, -exponent)
    integer = len(digits) + exponent if len(digits) + exponent > 0 else 0
    if decimals > MAX_DECIMALS and value != value.quantize(Decimal(1).scaleb(-MAX_DECIMALS)).normalize():
        return f"{_short(value)} has more than {MAX_DECIMALS} decimals"
    if integer > MAX_DIGITS:
        return f"{_short(value)} has more than {MAX_DIGITS} digits before the decimal point"
    return None


def _size_problem(value: Decimal) -> str | None:
    """A line value with too many digits before the decimal point (any decimals are fine)."""
    if not value.is_finite():
        return f"{_short(value)} is not a finite number"
    if value.adjusted() >= MAX_DIGITS:
        return f"{_short(value)} has more than {MAX_DIGITS} digits before the decimal point"
    return None


def _short(value: Decimal) -> str:
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
