"""Bad inputs for the poison tests: each one breaks one interchange in a way the hub must park alone."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from edinbox import Message
from edinbox.hub import Accounting, Created
from edinbox.hub.demo._traffic import PARTNERS, Doc, render

__all__ = ["BAD", "SlowAccounting", "bad_inputs", "good"]

X12, EDIFACT = PARTNERS[0], PARTNERS[4]


def good(n: int, *, partner: Any = X12, prefix: str = "G") -> bytes:
    """A valid invoice interchange, unique by `n` (its control number and invoice number)."""
    control = f"{n:09d}" if partner.standard == "X12" else f"{prefix}{n}"
    lines = ((2, Decimal("6.50")), (3, Decimal("10.00")))
    return render(Doc(partner, control, "invoice", f"{prefix}-{n}", lines=lines))


def _x12(n: int) -> bytes:
    return good(n, partner=X12, prefix="BAD")


def _edifact(n: int) -> bytes:
    return good(n, partner=EDIFACT, prefix="BAD")


def bad_date() -> bytes:
    """An 810 whose BIG date is the 99th day of the 13th month."""
    return _x12(900000001).replace(b"BIG*20261201*", b"BIG*20261399*")


def missing_issue_date() -> bytes:
    """An INVOIC without its DTM+137 (the trailer's segment count adjusted, so only the date is missing)."""
    data = _edifact(900000002).replace(b"DTM+137:20261201:102'\n", b"")
    return data.replace(b"UNT+18+1'", b"UNT+17+1'")


def huge_total() -> bytes:
    """An INVOIC whose total is 10^21: more digits than the invoices table holds."""
    return _edifact(900000003).replace(b"MOA+77:51.17'", b"MOA+77:" + b"1" + b"0" * 21 + b"'")


def long_control_number() -> bytes:
    """An INVOIC whose control number has 10,000 characters: more than a journal key may have."""
    control = b"C" * 10_000
    data = _edifact(900000004)
    return data.replace(b"+BAD900000004'", b"+" + control + b"'")


def huge_quantity() -> bytes:
    """An 810 whose first IT1 quantity has 500,000 digits."""
    return _x12(900000005).replace(b"IT1*1*2*EA*", b"IT1*1*" + b"9" * 500_000 + b"*EA*")


def not_edi() -> bytes:
    """Binary bytes, the start of a PNG: no interchange in them."""
    return b"\x89PNG\r\n" + bytes(range(256)) * 64


BAD = {
    "bad-date": bad_date,
    "missing-dtm137": missing_issue_date,
    "total-1e21": huge_total,
    "control-10000": long_control_number,
    "quantity-500000-digits": huge_quantity,
    "not-edi": not_edi,
}
"""Each bad input by name; a payload over max_payload is made by the tests (it depends on the setting)."""


def bad_inputs() -> list[tuple[str, bytes]]:
    """Every bad input as (producer id, payload)."""
    return [(name, make()) for name, make in BAD.items()]


class SlowAccounting(Accounting):
    """A sink that takes its time, as a big interchange does."""

    def __init__(self, inner: Accounting, *, seconds: float) -> None:
        self.inner = inner
        self.seconds = seconds

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Wait, then create."""
        await asyncio.sleep(self.seconds)
        return await self.inner.create(tx, message, invoices)
