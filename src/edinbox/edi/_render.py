"""Write interchanges: invoices (X12 810, EDIFACT INVOIC) and acknowledgments (X12 TA1/997/999, EDIFACT CONTRL).

The one EDI writer of the project (the hub's demo traffic, tests, benches); the inverse of parse() and invoices().

    render_interchange(documents, *, standard, sender, receiver, control_number, test=False, separators=None,
                       decimal_mark=".", line_break="", una=True, prepared_at=None, isa_padding=" ", wrap=None,
                       bom=False, charset="UNOC", trailer=True) -> bytes
    render_invoice(invoice, *, ...the same keywords...) -> bytes          one invoice, one interchange

`documents` are `Invoice`, `Acknowledgment` or `Reply` values (a Reply from `edinbox.edi.replies`: a TA1 between ISA
and IEA with no group, or before the GS of the 997 / 999 it travels with, 997 / 999 sets in an FA group, CONTRL
messages), one message each (an X12 interchange carries
one functional group, so one kind). `standard` is "X12" (ISA/GS/810 or 997/GE/IEA, ISA12 00401, or 00501 with ISA11
= the repetition separator when `separators.repetition` is set) or "EDIFACT" (UNA/UNB/INVOIC D.96A or CONTRL/UNZ).
`separators` default to X12 `* > ~` and EDIFACT level A `: + ' ?`; `decimal_mark` ("." or ",") is used for EDIFACT
numbers and written in UNA3 (X12 has no decimal mark: it is always "."). `line_break` goes after every segment
terminator; `wrap` hard-wraps the text every N characters with `line_break` (default "\\n"); `isa_padding` pads
ISA02/04/06/08 to their fixed widths (" " standard, "\\u00a0" NBSP, "" unpadded). `prepared_at` defaults to noon of
the first invoice's issue date (it is required without an invoice), so the output is a pure function of the
arguments. EDIFACT text is encoded per `charset` (UNOC: Latin-1, UNOY: UTF-8); X12 as UTF-8. Values are escaped with
the release character (EDIFACT); a value X12 cannot carry (it contains a separator) raises ValueError.
`trailer=False` leaves out IEA / UNZ: a truncated interchange, never keyed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, time
from decimal import Decimal
from typing import Required, TypedDict, Unpack

from edinbox.edi._edifact import CHARSETS
from edinbox.edi._invoice import Invoice
from edinbox.edi._model import Party, Segment, Separators

__all__ = ["Acknowledgment", "RenderOptions", "Reply", "render_interchange", "render_invoice"]

_X12 = Separators(element="*", component=">", segment="~")
_EDIFACT = Separators(element="+", component=":", segment="'", release="?")


@dataclass(frozen=True, slots=True)
class Acknowledgment:
    """A positive acknowledgment of one received interchange: an X12 997 (AK1/AK9) or an EDIFACT CONTRL (UCI).

    `control_number` is the acknowledged group (AK102) or interchange (UCI 0020); `sender` and `receiver` are the
    acknowledged interchange's parties (UCI S002 / S003; a 997 does not carry them).
    """

    control_number: str
    sender: Party
    receiver: Party


@dataclass(frozen=True, slots=True)
class Reply:
    """An acknowledgment's content, built by `edinbox.edi._acknowledge`: the segments inside its envelope.

    `type` is "997" or "999" (the segments between ST and SE, in an FA group whose GS08 is `version`), "TA1" (the
    TA1 segment, between ISA and IEA, no group) or "CONTRL" (the segments between UNH and UNT). Values are plain:
    the writer checks (X12) or escapes (EDIFACT) them, and joins each element's components.
    """

    type: str
    segments: tuple[Segment, ...]
    version: str = "004010"


Document = Invoice | Acknowledgment | Reply


@dataclass(frozen=True, slots=True)
class _Envelope:
    """What an interchange's header and trailer say in either standard: ISA/IEA with GS/GE, or UNB/UNZ."""

    sender: Party
    receiver: Party
    control: str
    """The interchange control number (ISA13, UNB 0020)."""
    test: bool
    when: datetime
    trailer: bool
    """False leaves out IEA / UNZ (a truncated interchange)."""
    ack_requested: bool


class RenderOptions(TypedDict, total=False):
    """The keywords of render_interchange (see the module docstring); the first four are required."""

    standard: Required[str]
    sender: Required[Party]
    receiver: Required[Party]
    control_number: Required[str]
    test: bool
    separators: Separators | None
    decimal_mark: str
    line_break: str
    una: bool
    prepared_at: datetime | None
    isa_padding: str
    wrap: int | None
    bom: bool
    charset: str
    trailer: bool
    ack_requested: bool


def render_invoice(invoice: Invoice, **options: Unpack[RenderOptions]) -> bytes:
    """One invoice in one interchange (see the module docstring for the keywords)."""
    return render_interchange([invoice], **options)


def render_interchange(
    documents: Sequence[Document],
    *,
    standard: str,
    sender: Party,
    receiver: Party,
    control_number: str,
    test: bool = False,
    separators: Separators | None = None,
    decimal_mark: str = ".",
    line_break: str = "",
    una: bool = True,
    prepared_at: datetime | None = None,
    isa_padding: str = " ",
    wrap: int | None = None,
    bom: bool = False,
    charset: str = "UNOC",
    trailer: bool = True,
    ack_requested: bool = False,
) -> bytes:
    """An X12 or EDIFACT interchange carrying `documents` (one message each), as bytes; `ack_requested` sets ISA14
    or UNB 0031 to 1 (the sender asks for an acknowledgment of the interchange)."""
    if not documents:
        raise ValueError("render_interchange needs at least one invoice or acknowledgment")
    if decimal_mark not in (".", ","):
        raise ValueError(f"decimal_mark must be '.' or ',', not {decimal_mark!r}")
    envelope = _Envelope(
        sender=sender,
        receiver=receiver,
        control=control_number,
        test=test,
        when=prepared_at or _noon(documents),
        trailer=trailer,
        ack_requested=ack_requested,
    )
    if standard == "X12":
        seps = separators or _X12
        segments = _x12(documents, envelope=envelope, seps=seps, padding=isa_padding)
        text, codec = _join(seps, line_break, segments), "utf-8"
    elif standard == "EDIFACT":
        seps = separators or _EDIFACT
        default = (seps.element, seps.component, seps.segment, seps.release, seps.repetition) == (
            "+",
            ":",
            "'",
            "?",
            None,
        )
        if not una and (not default or decimal_mark != "."):
            raise ValueError("without UNA only the level A service characters ':+.? \\'' can be used")
        segments = _edifact(documents, envelope=envelope, seps=seps, mark=decimal_mark, charset=charset)
        head = ""
        if una:
            c, release, repetition = seps.component, seps.release or " ", seps.repetition or " "
            head = "UNA" + c + seps.element + decimal_mark + release + repetition + seps.segment + line_break
        text, codec = head + _join(seps, line_break, segments), CHARSETS.get(charset, "latin-1")
    else:
        raise ValueError(f"standard must be 'X12' or 'EDIFACT', not {standard!r}")
    if wrap is not None:
        if wrap < 12:
            raise ValueError("wrap must be at least 12 characters so the header tag stays on the first line")
        brk = line_break or "\n"
        text = brk.join(text[k : k + wrap] for k in range(0, len(text), wrap))
    try:
        data = text.encode(codec)
    except UnicodeEncodeError as exc:
        raise ValueError(f"a value cannot be encoded in {charset}: {exc}") from None
    return b"\xef\xbb\xbf" + data if bom else data


def _noon(documents: Sequence[Document]) -> datetime:
    issued = next((d.issue_date for d in documents if isinstance(d, Invoice)), None)
    if issued is None:
        raise ValueError("prepared_at is needed when no invoice dates the interchange")
    return datetime.combine(issued, time(12, 0))


def _number(value: Decimal, mark: str = ".") -> str:
    text = format(value, "f")
    return text.replace(".", mark) if mark != "." else text


def _join(seps: Separators, line_break: str, segments: list[list[str]]) -> str:
    out = []
    for seg in segments:
        while len(seg) > 1 and seg[-1] == "":
            seg.pop()
        out.append(seps.element.join(seg) + seps.segment + line_break)
    return "".join(out)


def _x12_value(seps: Separators, value: str) -> str:
    for char in (seps.element, seps.component, seps.segment, seps.repetition):
        if char and char in value:
            raise ValueError(f"X12 cannot carry {value!r}: it contains the separator {char!r}")
    return value


def _x12(documents: Sequence[Document], *, envelope: _Envelope, seps: Separators, padding: str) -> list[list[str]]:
    if not ((envelope.control.isascii() and envelope.control.isdigit()) and len(envelope.control) <= 9):
        raise ValueError(f"an X12 control number is up to 9 digits, not {envelope.control!r}")
    kinds = {type(d) for d in documents}
    if len(kinds) > 1:
        raise ValueError("an X12 interchange here carries one functional group: invoices or acknowledgments")
    number = envelope.control.zfill(9)

    def pad(value: str, width: int) -> str:
        return value + padding * (width - len(value)) if padding else value

    def v(value: str) -> str:
        return _x12_value(seps, value)

    version, isa11 = ("00501", seps.repetition) if seps.repetition else ("00401", "U")
    isa = [
        "ISA", "00", pad("", 10), "00", pad("", 10),
        pad(v(envelope.sender.qualifier), 2), pad(v(envelope.sender.id), 15),
        pad(v(envelope.receiver.qualifier), 2), pad(v(envelope.receiver.id), 15),
        envelope.when.strftime("%y%m%d"), envelope.when.strftime("%H%M"), isa11, version, number,
        "1" if envelope.ack_requested else "0", "T" if envelope.test else "P",
        seps.component,
    ]  # fmt: skip
    group = str(int(envelope.control))
    ta1 = [_plain(seps, s, v) for d in documents if isinstance(d, Reply) and d.type == "TA1" for s in d.segments]
    if ta1 and len(ta1) == len(documents):  # interchange acknowledgments: no group
        segments = [isa, *ta1]
        return [*segments, ["IEA", "0", number]] if envelope.trailer else segments
    documents = [d for d in documents if not (isinstance(d, Reply) and d.type == "TA1")]  # the TA1s go before GS
    functional = "IN" if Invoice in kinds else "FA"
    first = documents[0]
    segments = [
        isa,
        *ta1,
        [
            "GS",
            functional,
            v(envelope.sender.id),
            v(envelope.receiver.id),
            envelope.when.strftime("%Y%m%d"),
            envelope.when.strftime("%H%M"),
            group,
            "X",
            first.version if isinstance(first, Reply) else "004010",
        ],
    ]
    for k, document in enumerate(documents, 1):
        ref = f"{k:04d}"
        if isinstance(document, Invoice):
            body = [["ST", "810", ref], *_x12_810(document, v)]
        elif isinstance(document, Reply):
            head = ["ST", document.type, ref] + ([document.version] if document.type == "999" else [])
            body = [head, *(_plain(seps, s, v) for s in document.segments)]
        else:
            body = [["ST", "997", ref], ["AK1", "IN", v(document.control_number)], ["AK9", "A", "1", "1", "1"]]
        body.append(["SE", str(len(body) + 1), ref])
        segments.extend(body)
    segments.append(["GE", str(len(documents)), group])
    if envelope.trailer:
        segments.append(["IEA", "1", number])
    return segments


def _plain(seps: Separators, segment: Segment, value: Callable[[str], str]) -> list[str]:
    """A segment of plain values as written: each value checked or escaped, components joined."""
    return [segment.tag, *(seps.component.join(value(c) for c in element) for element in segment.elements)]


def _x12_810(invoice: Invoice, v: Callable[[str], str]) -> list[list[str]]:
    kind = "CR" if invoice.kind == "credit_note" else "DI"
    body: list[list[str]] = [["BIG", invoice.issue_date.strftime("%Y%m%d"), v(invoice.number), "", "", "", "", kind]]
    if invoice.currency:
        body.append(["CUR", "SE", v(invoice.currency)])
    body.append(["N1", "SE", v(invoice.seller.name), "92", v(invoice.seller.id)])
    body.append(["N1", "BY", v(invoice.buyer.name), "92", v(invoice.buyer.id)])
    for n, line in enumerate(invoice.lines, 1):
        it1 = ["IT1", str(n), _number(line.quantity), "EA", _number(line.unit_price)]
        if line.item:
            it1 += ["", "VP", v(line.item)]
        body.append(it1)
        if line.description:
            body.append(["PID", "F", "", "", "", v(line.description)])
    cents = invoice.total.scaleb(2)
    if cents != cents.to_integral_value():
        raise ValueError(f"X12 TDS01 carries whole cents; {invoice.total} has more decimals")
    body.append(["TDS", str(int(cents))])
    body.append(["TXI", "VA", _number(invoice.tax_total)])
    body.append(["CTT", str(len(invoice.lines))])
    return body


def _edifact(
    documents: Sequence[Document], *, envelope: _Envelope, seps: Separators, mark: str, charset: str
) -> list[list[str]]:
    release = seps.release
    service = [c for c in (release, seps.element, seps.component, seps.segment, seps.repetition) if c]

    def e(value: str) -> str:
        if release is None:
            for char in service:
                if char in value:
                    raise ValueError(f"{value!r} contains {char!r} and there is no release character")
            return value
        for char in service:
            if char in value:
                value = "".join(release + c if c in service else c for c in value)
                break
        return value

    def party(p: Party) -> str:
        return seps.component.join([e(p.id), e(p.qualifier)]) if p.qualifier else e(p.id)

    c = seps.component
    unb = [
        "UNB",
        charset + c + "3",
        party(envelope.sender),
        party(envelope.receiver),
        envelope.when.strftime("%y%m%d") + c + envelope.when.strftime("%H%M"),
        e(envelope.control),
    ]
    if envelope.test or envelope.ack_requested:  # S005, 0026, 0029, 0031 (acknowledgment request), 0032, 0035 (test)
        unb += ["", "", "", "1" if envelope.ack_requested else "", "", "1" if envelope.test else ""]
    segments: list[list[str]] = [unb]
    for k, document in enumerate(documents, 1):
        ref = str(k)
        if isinstance(document, Invoice):
            body = [["UNH", ref, c.join(["INVOIC", "D", "96A", "UN", "EAN008"])], *_invoic(document, e, c, mark)]
        elif isinstance(document, Reply):
            body = [["UNH", ref, c.join(["CONTRL", "D", "3", "UN"])], *(_plain(seps, s, e) for s in document.segments)]
        else:
            uci = ["UCI", e(document.control_number), party(document.sender), party(document.receiver), "7"]
            body = [["UNH", ref, c.join(["CONTRL", "D", "3", "UN"])], uci]
        body.append(["UNT", str(len(body) + 1), ref])
        segments.extend(body)
    if envelope.trailer:
        segments.append(["UNZ", str(len(documents)), e(envelope.control)])
    return segments


def _invoic(invoice: Invoice, e: Callable[[str], str], c: str, mark: str) -> list[list[str]]:
    body: list[list[str]] = [["BGM", "381" if invoice.kind == "credit_note" else "380", e(invoice.number), "9"]]
    body.append(["DTM", c.join(["137", invoice.issue_date.strftime("%Y%m%d"), "102"])])
    for qualifier, who in (("SU", invoice.seller), ("BY", invoice.buyer)):
        body.append(["NAD", qualifier, c.join([e(who.id), "", "9"]), "", e(who.name)])
    if invoice.currency:
        body.append(["CUX", c.join(["2", e(invoice.currency), "4"])])
    for n, line in enumerate(invoice.lines, 1):
        body.append(["LIN", str(n), "", c.join([e(line.item), "EN"])] if line.item else ["LIN", str(n)])
        if line.description:
            body.append(["IMD", "F", "", c.join(["", "", "", e(line.description)])])
        body.append(["QTY", c.join(["47", _number(line.quantity, mark)])])
        body.append(["MOA", c.join(["203", _number(line.amount, mark)])])
        body.append(["PRI", c.join(["AAA", _number(line.unit_price, mark)])])
    body.append(["UNS", "S"])
    body.append(["MOA", c.join(["77", _number(invoice.total, mark)])])
    body.append(["MOA", c.join(["176", _number(invoice.tax_total, mark)])])
    return body
