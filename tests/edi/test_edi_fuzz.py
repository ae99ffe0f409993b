"""Hypothesis: whatever the bytes, the parser answers with interchanges or EdiSyntaxError, nothing else.

The fast tier runs with every test run; the slow tier (`-m slow`) runs over 10,000 mutated, truncated and random
inputs. Valid renderings with random separators and layouts must round-trip their invoices and fingerprints.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal

import edi_fixtures as fixtures
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from edinbox.edi import (
    EdiSyntaxError,
    Invoice,
    InvoiceLine,
    InvoiceParty,
    Party,
    Separators,
    parse,
    received,
    render_interchange,
    render_reply,
    replies,
)

SEEDS = [
    fixtures.X12_810,
    fixtures.X12_810_REWRITTEN,
    fixtures.EDIFACT_INVOIC,
    fixtures.EDIFACT_INVOIC_WRAPPED,
    fixtures.edifact_orders(b"S?'1"),
    fixtures.X12_810 + b"\n" + fixtures.edifact_orders(b"M2"),
    fixtures.X12_810.replace(b"~", "\u2026".encode()),
]
SINGLE = [fixtures.X12_810, fixtures.EDIFACT_INVOIC, fixtures.edifact_orders(b"T9")]
_TAG = re.compile("[A-Z0-9]{2,3}")
NOISE = [
    b"~",
    b"*",
    b">",
    b"'",
    b"+",
    b":",
    b"?",
    b"\r\n",
    b"\n",
    b"\xc2\xa0",
    b"\xe2\x80\xa6",
    b"\x00",
    b"ISA*",
    b"UNA",
]


def exercise(data: bytes) -> None:
    """Parse and touch everything a caller can reach; only EdiSyntaxError may come out."""
    errors: list[EdiSyntaxError] = []
    try:
        found = parse(data)
    except EdiSyntaxError as error:
        errors.append(error)
        found = []
    for ic in found:
        assert data[ic.span[0] : ic.span[1]] == ic.raw
        assert ic.source
        assert isinstance(ic.message_types, tuple)
        if not all(_TAG.fullmatch(seg.tag) for seg in ic.segments):
            assert not ic.keyable  # a segment without a proper tag is reported, never keyed
        assert len(ic.fingerprint()) == 64
        try:
            assert ic.message().message_id == ic.control_number
        except EdiSyntaxError as error:
            errors.append(error)
        try:
            ic.invoices()
        except EdiSyntaxError as error:
            errors.append(error)
    for error in errors:
        assert 0 <= error.offset <= len(data)
        assert str(error)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid seed with a few random edits: bytes replaced, inserted (often separators) or deleted."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        edit = draw(st.sampled_from(["replace", "insert", "delete", "noise"]))
        if edit == "replace" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif edit == "delete":
            del data[at : at + draw(st.integers(1, 20))]
        else:
            data[at:at] = draw(st.sampled_from(NOISE))
    return bytes(data)


@st.composite
def truncated(draw: st.DrawFn) -> bytes:
    """A valid seed cut short anywhere."""
    data = draw(st.sampled_from(SEEDS))
    return data[: draw(st.integers(0, len(data)))]


def random_bytes() -> st.SearchStrategy[bytes]:
    """Random bytes, some behind a plausible header so they get past the first checks."""
    head = st.sampled_from([b"", b"ISA*", b"UNA:+.? '", b"UNB+", b"\xef\xbb\xbfISA|", b"UNB\x1d"])
    return st.tuples(head, st.binary(max_size=300)).map(b"".join)


INPUTS = st.one_of(mutated(), truncated(), random_bytes())
_HEADS = [b"", b"ISA*", b"UNA:+.? '", b"UNB+", b"\xef\xbb\xbfISA|", b"UNB\x1d"]


def _apply(choice: tuple[int, int, bytes]) -> bytes:
    """Turn (kind, seed, script) into an input: a seed edited by the script, a truncated seed, or random bytes."""
    kind, seed, script = choice
    if kind == 2:
        return _HEADS[seed % len(_HEADS)] + script
    data = bytearray(SEEDS[seed % len(SEEDS)])
    if kind == 1:
        return bytes(data[: int.from_bytes(script[:2] or b"\0", "big") % (len(data) + 1)])
    for k in range(0, min(len(script) - 3, 16), 4):  # up to four edits keep most of the structure
        op, at = script[k] % 4, int.from_bytes(script[k + 1 : k + 3], "big") % (len(data) + 1)
        value = script[k + 3]
        if op == 0 and at < len(data):
            data[at] = value
        elif op == 1:
            data[at:at] = bytes([value])
        elif op == 2:
            del data[at : at + value % 20 + 1]
        else:
            data[at:at] = NOISE[value % len(NOISE)]
    return bytes(data)


# The slow tier draws three values per example (cheap to generate) and builds the input in plain Python.
SCRIPTED = st.tuples(st.integers(0, 2), st.integers(0, 255), st.binary(min_size=4, max_size=300)).map(_apply)
RELAXED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


@settings(max_examples=200, deadline=None, suppress_health_check=RELAXED)
@given(INPUTS)
def test_any_bytes_give_interchanges_or_edi_syntax_error(data: bytes) -> None:
    """Mutated, truncated or random bytes never raise anything but EdiSyntaxError (fast tier)."""
    exercise(data)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, suppress_health_check=RELAXED)
@given(SCRIPTED)
def test_any_bytes_give_interchanges_or_edi_syntax_error_10k(data: bytes) -> None:
    """Over 10,000 mutated, truncated and random inputs, only EdiSyntaxError ever comes out."""
    exercise(data)


@settings(max_examples=200, deadline=None, suppress_health_check=RELAXED)
@given(st.sampled_from(SINGLE), st.data())
def test_truncated_interchange_is_never_keyable(seed: bytes, data: st.DataObject) -> None:
    """Any cut before the trailer's terminator is refused or flagged unkeyable: never keyed on partial data."""
    cut = data.draw(st.integers(0, len(seed) - 1))
    try:
        found = parse(seed[:cut])
    except EdiSyntaxError:
        return
    assert not found[-1].keyable


_TEXT = st.text(alphabet=st.characters(codec="latin-1", exclude_characters="\r\n"), min_size=1, max_size=12)
_AMOUNT = st.decimals(min_value=-10_000, max_value=10_000, places=2, allow_nan=False, allow_infinity=False)


@st.composite
def invoices(draw: st.DrawFn) -> Invoice:
    """A random invoice whose values both standards can carry."""
    ident = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=1, max_size=12)
    lines = draw(st.lists(st.tuples(st.integers(1, 999), _AMOUNT, ident), max_size=4))
    return Invoice(
        number=draw(ident),
        issue_date=draw(st.dates(min_value=date(1970, 1, 1), max_value=date(2068, 12, 31))),
        kind=draw(st.sampled_from(["invoice", "credit_note"])),
        seller=InvoiceParty(draw(ident), draw(ident)),
        buyer=InvoiceParty(draw(ident), draw(ident)),
        currency=draw(st.sampled_from(["EUR", "USD", None])),
        total=draw(_AMOUNT),
        tax_total=draw(_AMOUNT),
        lines=[InvoiceLine(Decimal(q), p, Decimal(q) * p, item=i) for q, p, i in lines],
    )


_EDIFACT_SEPS = [
    None,
    Separators(element="*", component="=", segment="~", release="!"),
    Separators(element="|", component="^", segment="\n", release="\\"),
]
_X12_SEPS = [None, Separators(element="|", component="^", segment="\n"), Separators("!", ":", "\r")]


@settings(max_examples=100, deadline=None, suppress_health_check=RELAXED)
@given(invoices(), st.sampled_from(["X12", "EDIFACT"]), st.data())
def test_renderings_round_trip_and_share_fingerprints(invoice: Invoice, standard: str, data: st.DataObject) -> None:
    """Any invoice rendered in any layout reads back equal, with one key and one fingerprint for all layouts."""
    layout = {
        "separators": data.draw(st.sampled_from(_X12_SEPS if standard == "X12" else _EDIFACT_SEPS)),
        "line_break": data.draw(st.sampled_from(["", "\n", "\r\n"])),
        "bom": data.draw(st.booleans()),
        "decimal_mark": data.draw(st.sampled_from([".", ","])),
    }
    common = {"standard": standard, "sender": Party("ZZ", "S"), "receiver": Party("ZZ", "R"), "control_number": "7"}
    plain = parse(render_interchange([invoice], **common))[0]  # type: ignore[arg-type]
    other = parse(render_interchange([invoice], **common, **layout))[0]  # type: ignore[arg-type]
    assert other.keyable
    assert other.key == plain.key
    assert other.fingerprint() == plain.fingerprint()
    (read,) = other.invoices()
    assert read.number == invoice.number
    assert read.total == invoice.total
    assert read.tax_total == invoice.tax_total
    assert [(li.quantity, li.unit_price, li.amount) for li in read.lines] == [
        (li.quantity, li.unit_price, li.amount) for li in invoice.lines
    ]


NEXT = [fixtures.X12_810, fixtures.EDIFACT_INVOIC_WRAPPED, fixtures.edifact_orders(b"N1")]


@settings(max_examples=300, deadline=None, suppress_health_check=RELAXED)
@given(st.sampled_from(SINGLE), st.sampled_from(NEXT), st.sampled_from([b"", b"\n", b"\r\n"]), st.data())
def test_truncated_interchange_never_hides_the_next(
    first: bytes, then: bytes, glue: bytes, data: st.DataObject
) -> None:
    """A cut-short interchange followed by a complete one: the complete one is still found and keyable."""
    cut = data.draw(st.integers(0, len(first) - 1))
    try:
        found = parse(first[:cut] + glue + then)
    except EdiSyntaxError:
        return  # the whole payload is refused (and kept by the caller): nothing is keyed on partial data
    assert found[-1].keyable, found[-1].problems
    assert found[-1].key == parse(then)[0].key
    assert all(not ic.keyable for ic in found[:-1])


# Values an invoice's number and date fields may hold in bad data: huge, tiny, malformed, exotic digits.
_BAD_VALUES = st.one_of(
    st.sampled_from(
        [
            b"",
            b"0",
            b"-0",
            b"0.0",
            b",",
            b".5",
            b"1e9",
            b"NaN",
            b"Infinity",
            b"20261399",
            b"20260230",
            b"99999999",
            b"1" * 36,
            b"0." + b"0" * 33 + b"1",
            b"-" + b"9" * 34,
            "\u0661\u0662".encode(),
        ]
    ),
    st.sampled_from([b"9" * 500_000, b"9" * 200_000 + b".9", b"1" + b"0" * 999_999]),
    st.integers(-(10**40), 10**40).map(lambda n: str(n).encode()),
    st.text(alphabet="0123456789.,-", max_size=40).map(str.encode),
)
# Where those values go: IT102/IT104/TDS01/TXI02/BIG01 in X12, QTY/PRI/MOA/DTM in EDIFACT (a field, then its value).
_FIELDS = [
    (fixtures.X12_810, b"IT1*1*2*EA*50.00", lambda v: b"IT1*1*" + v + b"*EA*50.00"),
    (fixtures.X12_810, b"IT1*1*2*EA*50.00", lambda v: b"IT1*1*2*EA*" + v),
    (fixtures.X12_810, b"IT1*1*2*EA*50.00", lambda v: b"IT1*1*" + v + b"*EA*" + v),
    (fixtures.X12_810, b"TDS*11960", lambda v: b"TDS*" + v),
    (fixtures.X12_810, b"TXI*VA*19.10", lambda v: b"TXI*VA*" + v),
    (fixtures.X12_810, b"BIG*20261130", lambda v: b"BIG*" + v),
    (fixtures.EDIFACT_INVOIC, b"QTY+47:2'", lambda v: b"QTY+47:" + v + b"'"),
    (fixtures.EDIFACT_INVOIC, b"PRI+AAA:50.00'", lambda v: b"PRI+AAA:" + v + b"'"),
    (fixtures.EDIFACT_INVOIC, b"PRI+AAA:50.00'", lambda v: b"PRI+AAA:50.00:::" + v + b"'"),
    (
        fixtures.EDIFACT_INVOIC,
        b"QTY+47:2'MOA+203:100.00'PRI+AAA:50.00'",
        lambda v: b"QTY+47:" + v + b"'MOA+203:" + v + b"'",
    ),
    (fixtures.EDIFACT_INVOIC, b"MOA+77:119.60'", lambda v: b"MOA+77:" + v + b"'"),
    (fixtures.EDIFACT_INVOIC, b"DTM+137:20261130:102'", lambda v: b"DTM+137:" + v + b":102'"),
    (fixtures.EDIFACT_INVOIC, b"DTM+137:20261130:102'", lambda v: b"DTM+9:" + v + b":102'"),
]


@settings(max_examples=300, deadline=None, suppress_health_check=RELAXED)
@given(st.sampled_from(_FIELDS), st.lists(_BAD_VALUES, min_size=1, max_size=2), st.one_of(mutated(), st.just(b"")))
@example(_FIELDS[2], [b"9" * 500_000], b"")  # quantity and price of 500,000 digits: their product overflowed
def test_invoices_raise_only_edi_syntax_error_and_give_finite_numbers(
    field: tuple[bytes, bytes, object], values: list[bytes], noise: bytes
) -> None:
    """Whatever number or date a valid invoice's fields hold (huge, tiny, malformed), and whatever random edits
    a seed suffered, invoices() returns finite Decimals or raises EdiSyntaxError, never anything else."""
    seed, old, new = field
    data = seed
    for value in values:
        data = data.replace(old, new(value), 1)  # type: ignore[operator]
    for payload in (data, noise) if noise else (data,):
        try:
            found = parse(payload)
        except EdiSyntaxError:
            continue
        for ic in found:
            try:
                read = ic.invoices()
            except EdiSyntaxError:  # the data's fault, said in a sentence: the one outcome besides invoices
                continue
            for invoice in read:
                numbers = [invoice.total, invoice.tax_total]
                numbers += [n for li in invoice.lines for n in (li.quantity, li.unit_price, li.amount)]
                assert all(isinstance(n, Decimal) and n.is_finite() for n in numbers)


# Every numeric field of the envelope (counts and control numbers of headers and trailers), with the text it holds
# in the seed: a digit run of 1 to 100,000 digits takes its place (Python's int() refuses more than 4,300).
_ENVELOPE_NUMBERS = [
    (fixtures.X12_810, b"*000000905*0*P", lambda v: b"*" + v + b"*0*P"),  # ISA13 (fixed width: refused)
    (fixtures.X12_810, b"GS*IN*ACME*HUB*20261130*1205*905*", lambda v: b"GS*IN*ACME*HUB*20261130*1205*" + v + b"*"),
    (fixtures.X12_810, b"ST*810*0001~", lambda v: b"ST*810*" + v + b"~"),
    (fixtures.X12_810, b"SE*12*", lambda v: b"SE*" + v + b"*"),
    (fixtures.X12_810, b"SE*12*0001~", lambda v: b"SE*12*" + v + b"~"),
    (fixtures.X12_810, b"GE*1*", lambda v: b"GE*" + v + b"*"),
    (fixtures.X12_810, b"GE*1*905~", lambda v: b"GE*1*" + v + b"~"),
    (fixtures.X12_810, b"IEA*1*", lambda v: b"IEA*" + v + b"*"),
    (fixtures.X12_810, b"IEA*1*000000905~", lambda v: b"IEA*1*" + v + b"~"),
    (fixtures.X12_810, b"CTT*2~", lambda v: b"CTT*" + v + b"~"),
    (fixtures.EDIFACT_INVOIC, b"+INV0000000905'UNH", lambda v: b"+" + v + b"'UNH"),  # UNB 0020
    (fixtures.EDIFACT_INVOIC, b"UNZ+1+INV0000000905'", lambda v: b"UNZ+1+" + v + b"'"),
    (fixtures.EDIFACT_INVOIC, b"UNZ+1+", lambda v: b"UNZ+" + v + b"+"),
    (fixtures.EDIFACT_INVOIC, b"UNH+1+", lambda v: b"UNH+" + v + b"+"),
    (fixtures.EDIFACT_INVOIC, b"UNT+18+1'", lambda v: b"UNT+18+" + v + b"'"),
    (fixtures.EDIFACT_INVOIC, b"UNT+18+", lambda v: b"UNT+" + v + b"+"),
    (fixtures.EDIFACT_INVOIC, b"261130:1205", lambda v: v + b":1205"),  # UNB S004 date
]
_DIGITS = st.one_of(
    st.integers(1, 40),
    st.sampled_from([4_300, 4_301, 10_000, 100_000]),
    st.integers(1, 100_000),
)


def _answer(data: bytes) -> None:
    """Parse as `exercise` does, then build each interchange's rejection as the hub would: only EdiSyntaxError."""
    exercise(data)
    try:
        found = parse(data)
    except EdiSyntaxError:
        return
    hub = Party("ZZ", "HUB")
    for ic in found:
        if not ic.identified:
            continue
        subject = received(ic, rejected=True, faulty=0)
        for kind in ("TA1", "997", "999") if ic.standard == "X12" else ("CONTRL",):
            render_reply(replies(subject, kind), subject, sender=hub, control_number="1", when=_WHEN)


_WHEN = datetime(2026, 12, 1, 12, 0)


@settings(max_examples=150, deadline=None, suppress_health_check=RELAXED)
@given(
    st.sampled_from(_ENVELOPE_NUMBERS + _FIELDS),
    _DIGITS,
    st.sampled_from([b"9", b"0", b"1", b"12"]),
)
@example(_ENVELOPE_NUMBERS[3], 10_000, b"9")  # SE01 of 10,000 digits: int() raised ValueError
@example(_ENVELOPE_NUMBERS[6], 10_000, b"9")  # GE02 of 10,000 digits
@example(_ENVELOPE_NUMBERS[15], 100_000, b"1")  # UNT 0074 of 100,000 digits
def test_numeric_fields_of_any_length_raise_only_edi_syntax_error(
    field: tuple[bytes, bytes, object], digits: int, unit: bytes
) -> None:
    """A digit run of 1 to 100,000 digits in any count, control number, date or amount raises nothing but
    EdiSyntaxError, whether parsed, keyed, read as invoices or answered with an acknowledgment."""
    seed, old, new = field
    value = (unit * (digits // len(unit) + 1))[:digits]
    data = seed.replace(old, new(value), 1)  # type: ignore[operator]
    assert old in seed
    _answer(data)


def test_a_count_longer_than_the_standard_allows_is_a_disagreement_at_its_trailer() -> None:
    """An SE01 of 10,000 digits is the set's count disagreement (its position and code), not a foreign error."""
    data = fixtures.X12_810.replace(b"SE*12*", b"SE*" + b"9" * 10_000 + b"*", 1)
    (ic,) = parse(data)
    (found,) = ic.disagreements
    assert (found.level, found.index) == ("set", 0)
    assert "10000 characters, more than the 10" in found.reason
    subject = received(ic)
    assert subject.groups[0].sets[0].error == "4"  # 718: number of included segments does not match actual count


def test_control_numbers_of_any_length_compare_as_numbers() -> None:
    """A GE02 of 10,000 digits equal to its GS06 after leading zeros agrees; one digit more disagrees."""
    number = b"7" * 10_000
    data = fixtures.X12_810.replace(b"*905*X*", b"*" + number + b"*X*").replace(b"GE*1*905", b"GE*1*000" + number)
    assert not parse(data)[0].disagreements
    other = data.replace(b"GE*1*000" + number, b"GE*1*" + number + b"7")
    assert [d.level for d in parse(other)[0].disagreements] == ["group"]
