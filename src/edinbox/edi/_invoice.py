"""Invoices carried by an interchange: the values, the shared readers, and the dispatch per standard.

Money is `Decimal`, never float, and always finite. Unit prices are per unit (EDIFACT PRI 5284 unit price basis
divided out). Numbers longer than 35 characters (EDIFACT n..35, the widest numeric element of either standard)
are refused, and the arithmetic runs in its own decimal context (28 digits, overflow trapped), so whatever the
data, `read_invoices` yields finite values or raises EdiSyntaxError.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from datetime import date
from decimal import Context, Decimal, DecimalException, DivisionByZero, InvalidOperation, Overflow, localcontext
from typing import TYPE_CHECKING, Any, TypeVar, cast

from edinbox.edi._errors import EdiSyntaxError, Finding, NotKeyableError
from edinbox.edi._model import EdiMessage, Segment

if TYPE_CHECKING:
    from edinbox.edi._interchange import Interchange

__all__ = ["Element", "Invoice", "InvoiceLine", "InvoiceParty", "Reader", "read_invoices"]

_NUMBER = re.compile(r"-?(?:[0-9]+(?:[.,][0-9]*)?|[.,][0-9]+)\Z")
_NUMBER_SIZE = 35  # EDIFACT n..35 (5004 monetary amount, 6060 quantity); X12 R and N elements are shorter
T = TypeVar("T")
_ARITHMETIC = Context(prec=28, Emax=999_999, Emin=-999_999, traps=[InvalidOperation, DivisionByZero, Overflow])


@dataclass(frozen=True, slots=True)
class InvoiceParty:
    """The seller or buyer of an invoice: its id (NAD 3039 / N104) and name (NAD C080 / N102)."""

    id: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class InvoiceLine:
    """One invoice line: quantity, unit price (per one unit) and line amount; `item` is the product id."""

    quantity: Decimal
    unit_price: Decimal
    amount: Decimal
    item: str = ""
    description: str = ""


@dataclass(frozen=True, slots=True)
class Invoice:
    """An invoice or credit note from an EDIFACT INVOIC message or an X12 810 transaction set.

    `kind` is "invoice" or "credit_note" (BGM 1001 = 381 and other credit-note codes; BIG07 = CR); `currency` is
    the ISO 4217 code stated (CUX / MOA / CUR02) or None when the message states none (the partner's default
    applies); `message_ref` is UNH 0062 / ST02. `line_count` is counted from `lines` (not an argument), and kept
    by `without_lines()`, which drops the lines themselves.
    """

    number: str
    issue_date: date
    kind: str
    seller: InvoiceParty
    buyer: InvoiceParty
    currency: str | None
    total: Decimal
    tax_total: Decimal
    lines: tuple[InvoiceLine, ...] = ()
    message_ref: str = ""
    line_count: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        """Accept any sequence of lines (a list too) and keep it as a tuple; count them."""
        object.__setattr__(self, "lines", tuple(self.lines))
        object.__setattr__(self, "line_count", len(self.lines))
        if self.kind not in ("invoice", "credit_note"):
            raise ValueError(f"Invoice.kind must be 'invoice' or 'credit_note', not {self.kind!r}")

    def without_lines(self) -> Invoice:
        """The same invoice without its lines, `line_count` kept: for a consumer of the totals only."""
        copy = object.__new__(Invoice)  # every field copied as it is (no __init__ to check what was checked)
        for name in _INVOICE_FIELDS:
            object.__setattr__(copy, name, getattr(self, name))
        object.__setattr__(copy, "lines", ())  # set once, on a copy no one else holds yet
        return copy


_INVOICE_FIELDS = tuple(f.name for f in fields(Invoice))


@dataclass(frozen=True, slots=True)
class Element:
    """Where a value sits in its segment, for an acknowledgment's element error: 1-based element position,
    component position (0 for a simple element) and data element reference number (373 BIG01 date...)."""

    element: int
    component: int = 0
    reference: str = ""


class Reader:
    """Reads one message's segments and raises EdiSyntaxError that point at the faulty segment."""

    def __init__(self, interchange: Interchange, message: EdiMessage, label: str, *, shared: dict[Any, Any]) -> None:
        self.interchange = interchange
        self.message = message
        self.segments = message.segments
        self.label = f"{label} message {message.control_number!r}"
        self.shared = shared

    def share(self, value: T) -> T:
        """`value`, or an equal one read before from the same interchange: the same parties and currency over
        thousands of invoices are kept once."""
        return cast(T, self.shared.setdefault(value, value))

    def fail(
        self,
        sentence: str,
        position: int = 0,
        *,
        missing: str = "",
        loop: str = "",
        at: Element | None = None,
        code: str = "",
        value: str = "",
    ) -> EdiSyntaxError:
        """An EdiSyntaxError about the segment at `position` within the message; with the `missing` segment's tag
        (and its `loop`), or the element `at` with its error `code` and `value`, it carries the acknowledgment's
        `Finding`."""
        index = self.message.segment_range[0] + position
        finding = None
        if missing:
            finding = Finding(missing, position + 1, "3", loop=loop)
        elif at is not None and position < len(self.segments):
            finding = Finding(
                self.segments[position].tag, position + 1, "8", at.element, at.component, at.reference, code, value
            )
        return EdiSyntaxError(
            f"{self.label}: {sentence}",
            offset=self.interchange._body.offset(index),
            segment_index=index,
            finding=finding,
        )

    def decimal(self, value: str, what: str, position: int, *, at: Element | None = None) -> Decimal:
        """A number with a point or comma decimal mark (no thousands separators) as an exact Decimal."""
        text = value.strip()
        if len(text) > _NUMBER_SIZE:
            sentence = f"{what} has {len(text)} characters; a number has at most {_NUMBER_SIZE}"
            raise self.fail(sentence, position, at=at, code="5", value=value)
        if not text:
            raise self.fail(f"{what} is missing", position, at=at, code="1")
        if not _NUMBER.match(text):
            raise self.fail(f"{what} {value!r} is not a number", position, at=at, code="6", value=value)
        try:
            return Decimal(text.replace(",", "."))
        except InvalidOperation:  # pragma: no cover - the pattern only lets numbers through
            raise self.fail(f"{what} {value!r} is not a number", position) from None

    def date(self, value: str, what: str, position: int, *, fmt: str = "", at: Element | None = None) -> date:
        """CCYYMMDD (also the date part of CCYYMMDDHHMM[SS], format 102/203/204) or YYMMDD (format 101)."""
        text = value.strip()
        if not text:
            raise self.fail(f"{what} is missing", position, at=at, code="1")
        if fmt == "101" or (not fmt and len(text) == 6):
            text = ("20" if text[:2] < "69" else "19") + text
        if len(text) < 8 or not (text[:8].isascii() and text[:8].isdigit()):
            raise self.fail(f"{what} {value!r} is not a date", position, at=at, code="8", value=value)
        try:
            return date(int(text[:4]), int(text[4:6]), int(text[6:8]))
        except ValueError:
            raise self.fail(f"{what} {value!r} is not a date", position, at=at, code="8", value=value) from None

    def first(self, tag: str, qualifiers: tuple[str, ...], stop: int | None = None) -> tuple[int, Segment] | None:
        """The first segment with `tag` whose element 1 is the earliest-listed qualifier (before `stop`)."""
        found: dict[str, tuple[int, Segment]] = {}
        for k, seg in enumerate(self.segments[:stop]):
            if seg.tag == tag and seg.get(1) in qualifiers and seg.get(1) not in found:
                found[seg.get(1)] = (k, seg)
        for qualifier in qualifiers:
            if qualifier in found:
                return found[qualifier]
        return None


def read_invoices(interchange: Interchange) -> Iterator[Invoice]:
    """Every invoice of a keyable interchange, one at a time, each message's segments built only while it is read;
    NotKeyableError (at once, not on the first invoice) for an incomplete one."""
    if not interchange.keyable:
        raise NotKeyableError(
            f"the {interchange.standard} interchange {interchange.control_number!r} is incomplete; its invoices "
            f"are not read: {'; '.join(interchange.problems)}",
            offset=interchange.span[0],
            segment_index=0,
        )
    return _each(interchange)


def _each(interchange: Interchange) -> Iterator[Invoice]:
    from edinbox.edi._invoic import read_invoic
    from edinbox.edi._x12_810 import read_810

    shared: dict[Any, Any] = {}
    for message in interchange.messages:
        if interchange.standard == "EDIFACT" and message.type == "INVOIC":
            reader, read = Reader(interchange, message, "INVOIC", shared=shared), read_invoic
        elif interchange.standard == "X12" and message.type == "810":
            reader, read = Reader(interchange, message, "810", shared=shared), read_810
        else:
            continue
        try:
            with localcontext(_ARITHMETIC):
                invoice = read(reader)
        except DecimalException as exc:  # a product or quotient out of range: the data's fault
            raise reader.fail(f"its amounts cannot be computed ({type(exc).__name__})") from None
        if not all(n.is_finite() for n in _numbers(invoice)):  # pragma: no cover - the context traps first
            raise reader.fail("an amount is not a finite number")
        del reader  # its segments go before the next message's are built
        yield invoice


def _numbers(invoice: Invoice) -> list[Decimal]:
    """Every Decimal of an invoice: its totals and each line's quantity, unit price and amount."""
    values = [invoice.total, invoice.tax_total]
    for line in invoice.lines:
        values += (line.quantity, line.unit_price, line.amount)
    return values
