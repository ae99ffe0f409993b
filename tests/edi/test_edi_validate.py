"""Validation against the shipped implementation guides, and the acknowledgments it makes: the exact AK3/AK4,
IK3/IK4/CTX and UCS/UCD codes of invalid documents, 997 and 999 valid for pyx12 and CONTRL read by pydifact whether
accepted, accepted with errors or rejected, partner overlays, and parse + validate raising only EdiSyntaxError."""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from edi_fixtures import CORPUS, EDIFACT_INVOIC, HUB, X12_810
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from edinbox.edi import (
    GUIDES,
    EdiSyntaxError,
    Overlay,
    Received,
    load,
    parse,
    received,
    render_reply,
    replies,
    validate,
)

WHEN = datetime(2026, 12, 3, 2, 30)


def acknowledged(data: bytes, *, rejected: bool = False, overlay: Overlay | None = None) -> Received:
    """What acknowledging the one interchange in `data` needs, with its validation's findings."""
    (interchange,) = parse(data)
    return received(interchange, rejected=rejected, findings=validate(interchange, overlay).findings)


def answer(found: Received, *kinds: str) -> bytes:
    """The acknowledgment(s) `kinds` of `found`, in one interchange from the hub."""
    out = [reply for kind in kinds for reply in replies(found, kind)]
    return render_reply(out, found, sender=HUB, control_number="42", when=WHEN)


def x12(old: bytes, new: bytes, count: int = 12) -> bytes:
    """The clean 810 with one change, its SE01 set to `count` segments."""
    return X12_810.replace(old, new, 1).replace(b"SE*12*", f"SE*{count}*".encode())


def edifact(old: bytes, new: bytes, count: int = 18) -> bytes:
    """The clean INVOIC with one change, its UNT 0074 set to `count` segments."""
    return EDIFACT_INVOIC.replace(old, new, 1).replace(b"UNT+18+", f"UNT+{count}+".encode())


def test_every_guide_loads_and_the_clean_documents_pass() -> None:
    """The five guides load (005010, the 850 and D01B over their bases); the clean 810 and INVOIC have no finding,
    nor do their 005010 and D01B versions, nor the corpus 810s."""
    assert {load(name).version for name in GUIDES} == {"004010", "005010", "D96A", "D01B"}
    for data in (
        X12_810,
        EDIFACT_INVOIC,
        X12_810.replace(b"*X*004010~", b"*X*005010~"),
        EDIFACT_INVOIC.replace(b"INVOIC:D:96A:UN:EAN008", b"INVOIC:D:01B:UN:EAN010"),
    ):
        (interchange,) = parse(data)
        found = validate(interchange)
        assert found.checked == (0,)
        assert not found, found
    for path in sorted(CORPUS.glob("x12_810*")) if CORPUS.is_dir() else ():
        for interchange in parse(path.read_bytes()):
            assert not validate(interchange), path.name


X12_CASES = [
    # a bad date: BIG01 month 13
    (x12(b"BIG*20261130", b"BIG*20261332"), b"AK3*BIG*2**8~AK4*1*373*8*20261332~"),
    # a bad code value: BIG07 transaction type
    (x12(b"*****DI~", b"*****QQ~"), b"AK3*BIG*2**8~AK4*7*640*7*QQ~"),
    # a missing mandatory segment: no BIG, found missing at the CUR that follows ST
    (x12(b"BIG*20261130*INV-905*****DI~", b"", 11), b"AK3*BIG*2**3~"),
    # a too long element: BIG02 is AN 1/22
    (x12(b"INV-905", b"INV-" + b"9" * 19), b"AK3*BIG*2**8~AK4*2*76*5*INV-9999999999999999999~"),
    # an unknown segment
    (x12(b"CUR*SE*EUR~", b"CUR*SE*EUR~ZZZ*1~", 13), b"AK3*ZZZ*4**1~"),
    # an N1 loop's party without its id: N103 needs N104 (P0304)
    (x12(b"N1*BY*HUB AG*92*4000002000002~", b"N1*BY*HUB AG*92~"), b"AK3*N1*5*N1*8~AK4*4*67*2~"),
]


@pytest.mark.parametrize(("data", "expected"), X12_CASES)
def test_x12_errors_get_their_ak3_and_ak4(data: bytes, expected: bytes) -> None:
    """Each invalid 810 gets the AK3 (segment, position from ST = 1, loop, 720 code) and AK4 (element position,
    reference, 723 code, value) an analyst expects; accepted with errors (AK5 E 5, AK9 E) or rejected (R 5)."""
    reported = answer(acknowledged(data), "997")
    assert expected + b"AK5*E*5~AK9*E*1*1*1~" in reported
    assert expected + b"AK5*R*5~AK9*R*1*1*0~" in answer(acknowledged(data, rejected=True), "997")


def test_the_999_names_the_situational_trigger_with_ctx() -> None:
    """The 999 gives IK3/IK4 with the same codes, each IK3 followed by the CTX of the invoice it is about (BIG02),
    and after an element required by another (N104 by N103) a CTX naming the trigger: segment, position, loop and
    element."""
    data = X12_CASES[-1][0]
    reported = answer(acknowledged(data), "999")
    expected = b"IK3*N1*5*N1*8~CTX*BIG02>INV-905~IK4*4*67*2~CTX*SITUATIONAL TRIGGER*N1*5*N1*3~IK5*E*5~AK9*E*1*1*1~"
    assert expected in reported


EDIFACT_CASES = [
    (edifact(b"DTM+137:20261130", b"DTM+137:20261399"), b"UCS+3'UCD+12+1:2'"),  # a bad date
    (edifact(b"BGM+380+", b"BGM+999+"), b"UCS+2'UCD+12+1:1'"),  # a bad document name code
    (edifact(b"BGM+380+INV-905+9'", b"", 17), b"UCS+2+13'"),  # no BGM: found missing at the DTM
    (edifact(b"INV-905", b"INV-" + b"9" * 32), b"UCS+2'UCD+39+2'"),  # 1004 is an..35
    (edifact(b"CUX+2:EUR:4'", b"CUX+2:EUR:4'ZZZ+1'", 19), b"UCS+7+15'"),  # an unknown segment
]


@pytest.mark.parametrize(("data", "expected"), EDIFACT_CASES)
def test_edifact_errors_get_their_ucs_and_ucd(data: bytes, expected: bytes) -> None:
    """Each invalid INVOIC gets the UCS (position from UNH = 1, 0085 code of a segment error) and UCD (0085 code,
    element:component) expected, after a UCM 7 (accepted with errors, UCI 7) or UCM 4 12 (rejected, UCI 4)."""
    identifier = b"UCM+1+INVOIC:D:96A:UN:EAN008"
    accepted = answer(acknowledged(data), "CONTRL")
    assert b"+7'" + identifier + b"+7'" + expected in accepted
    assert b"+4'" + identifier + b"+4+12'" + expected in answer(acknowledged(data, rejected=True), "CONTRL")


def test_a_partner_overlay_requires_and_allows() -> None:
    """An overlay requiring BIG04 (a PO number) and RFF+ON reports them missing; one allowing REF*20 and a ZZZ
    segment accepts thirteen REFs and the ZZZ the guide would refuse."""
    (interchange,) = parse(X12_810)
    (found,) = validate(interchange, Overlay.parse(require="BIG04")).findings[0]
    assert (found.segment, found.position, found.element, found.reference, found.code) == ("BIG", 2, 4, "324", "1")
    (interchange,) = parse(EDIFACT_INVOIC)
    (found,) = validate(interchange, Overlay.parse(require="RFF+ON")).findings[0]
    assert (found.segment, found.segment_code, found.position) == ("RFF", "3", 18)
    refs = b"".join(b"REF*IA*%d~" % n for n in range(13))
    (interchange,) = parse(x12(b"CUR*SE*EUR~", b"CUR*SE*EUR~" + refs + b"ZZZ*1~", 26))
    assert [f.segment_code for f in validate(interchange).findings[0]] == ["5", "1"]
    assert not validate(interchange, Overlay.parse(allow="REF*20, ZZZ"))
    with pytest.raises(ValueError, match="require"):
        Overlay.parse(require="big04")


def hipaa(found: Received) -> Received:
    """The same acknowledgment content for an 837 group, so pyx12's HIPAA maps (which list the sets they take) check
    every segment of it: the business unit named as a claim's (CLM01, the one HIPAA's 999 map knows here)."""
    sets = [
        tuple(
            replace(s, type="837", identifier=("837",), unit=("CLM01", *s.unit[1:]) if s.unit else ()) for s in g.sets
        )
        for g in found.groups
    ]
    pairs = zip(found.groups, sets, strict=True)
    groups = tuple(replace(g, type="HC", version="005010X222A1", sets=s) for g, s in pairs)
    return replace(found, groups=groups, types=("837",))


def test_pyx12_validates_accepted_accepted_with_errors_and_rejected() -> None:
    """pyx12 validates our 997 (4010) and 999 (005010X231A1), the TA1 before the group in the same interchange, for a
    clean set, a set accepted with errors (with a CTX) and a rejected one."""
    pyx12_document = pytest.importorskip("pyx12.x12n_document")
    import pyx12.params

    for found in (
        acknowledged(X12_810),
        acknowledged(X12_CASES[-1][0]),
        acknowledged(X12_CASES[0][0], rejected=True),
    ):
        for kind in ("997", "999"):
            data = answer(hipaa(found), "TA1", kind).decode()
            errors = io.StringIO()
            ok = pyx12_document.x12n_document(pyx12.params.params(), io.StringIO(data), errors, None)
            assert ok, (kind, data, errors.getvalue())


def test_a_ta1_and_its_997_travel_in_one_interchange() -> None:
    """The TA1 and the 997 of one interchange render as one interchange with one control number: ISA, TA1, then the
    FA group; our parser reads both types from it."""
    data = answer(acknowledged(X12_810), "TA1", "997")
    (interchange,) = parse(data)
    assert interchange.control_number == "000000042"
    assert interchange.keyable
    assert [s.tag for s in interchange.segments][:3] == ["ISA", "TA1", "GS"]
    assert set(interchange.message_types) == {"TA1", "997"}


def test_pydifact_reads_accepted_accepted_with_errors_and_rejected_contrl() -> None:
    """pydifact reads our CONTRL of a clean INVOIC (UCI 7), one accepted with errors (UCM 7, UCS, UCD) and a
    rejected one (UCI 4, UCM 4 12)."""
    collection = pytest.importorskip("pydifact.segmentcollection")
    bad = EDIFACT_CASES[0][0]
    expected = {
        EDIFACT_INVOIC: ["UCI"],
        bad: ["UCI", "UCM", "UCS", "UCD"],
    }
    for data, rejected in ((EDIFACT_INVOIC, False), (bad, False), (bad, True)):
        text = answer(acknowledged(data, rejected=rejected), "CONTRL").decode("latin-1")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (message,) = list(collection.Interchange.from_str(text).get_messages())
        assert [s.tag for s in message.segments] == expected[data]
        actions = [s.elements[3 if s.tag == "UCI" else 2] for s in message.segments if s.tag in ("UCI", "UCM")]
        assert actions == (["4", "4"] if rejected else ["7"] * len(actions))


NUMERIC = [
    (X12_810, b"000000905"),  # ISA13 (and IEA02)
    (X12_810, b"SE*12"),
    (X12_810, b"GE*1"),
    (X12_810, b"IT1*1*2"),
    (X12_810, b"TDS*11960"),
    (X12_810, b"CTT*2"),
    (EDIFACT_INVOIC, b"UNT+18"),
    (EDIFACT_INVOIC, b"QTY+47:2"),
    (EDIFACT_INVOIC, b"MOA+77:119.60"),
    (EDIFACT_INVOIC, b"INV0000000905"),  # UNB 0020
]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(NUMERIC), digits=st.integers(1, 100_000), first=st.sampled_from("0159"))
def test_numeric_fields_of_any_length_raise_only_edi_syntax_errors(
    case: tuple[bytes, bytes], digits: int, first: str
) -> None:
    """A numeric field of 1 to 100,000 digits anywhere: parsing, keying, validating, reading the invoices and
    acknowledging raise nothing but EdiSyntaxError."""
    data, old = case
    head = old.rstrip(b"0123456789.")
    number = (first + "7" * (digits - 1)).encode()
    text = data.replace(old, head + number, 1)
    try:
        for interchange in parse(text):
            findings = validate(interchange).findings
            try:
                interchange.message()
                interchange.invoices()
            except EdiSyntaxError:
                pass
            found = received(interchange, findings=findings)
            for kind in ("TA1", "997", "999") if interchange.standard == "X12" else ("CONTRL",):
                answer(found, kind)
    except EdiSyntaxError:
        pass


def test_the_example_of_the_docs_runs() -> None:
    """The validator example of docs/validation.md runs on an 810 without a PO number and prints its one finding."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "validation.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "docs/validation.md", "exec"), {"data": X12_810})  # noqa: S102 - our own docs
    assert printed.getvalue() == "BIG 2  8 4 0 324 1 \n"


_PIECES = st.sampled_from(["", "0", "7", "12", "-", ".", ",", "A", "ZZ", "EA", " ", "é", "\x00", ">", ":", "99999"])


def _valid(rule: Any) -> st.SearchStrategy[str]:
    """A value its rule finds right (or empty, when the rule allows it): a code of its list, digits within its
    lengths (a sign, a decimal mark for R), text within its lengths."""
    low, high = max(rule.min, 1), rule.max
    if rule.codes:
        right = st.sampled_from(sorted(c for c in rule.codes if low <= len(c) <= high))
    elif rule.type[0] == "N":
        right = st.from_regex(rf"-?[0-9]{{{low},{high}}}", fullmatch=True)
    elif rule.type == "R":
        right = st.from_regex(rf"-?[0-9]{{{low},{high}}}", fullmatch=True).map(lambda v: v[:-1] + "." + v[-1:])
    else:
        right = st.text(alphabet="AZaz09 -./", min_size=low, max_size=high)
    return right if rule.required else st.one_of(right, st.just(""))


def _wrong(rule: Any) -> st.SearchStrategy[str]:
    """Values often wrong for the element: a right one with a digit or a letter more or its last character less,
    pieces of other values, too many digits."""
    right = _valid(rule) if rule is not None else st.just("A")
    return st.one_of(
        right.map(lambda v: v + "7"),
        right.map(lambda v: v + "A"),
        right.map(lambda v: v[:-1]),
        st.lists(_PIECES, min_size=1, max_size=6).map("".join),
        st.from_regex(r"-?[0-9]{0,20}([.,][0-9]{0,4})?", fullmatch=True),
    )


@st.composite
def _segment(draw: st.DrawFn) -> tuple[str, str, str]:
    """A guide, a tag with a fast path in it, and a segment text of that tag: right values, then at most one element
    replaced by a value often wrong for it, or one element more."""
    name = draw(st.sampled_from(GUIDES))
    rules = load(name)
    element = "+" if rules.standard == "EDIFACT" else "*"
    simple = {tag for tag, d in rules.segments.items() if all(e.rule and e.rule.type not in ("DT", "TM") for e in d)}
    tag = draw(st.sampled_from(sorted(simple)))
    definition = rules.segments[tag]
    values = [draw(_valid(e.rule)) for e in definition]
    values = values[: draw(st.integers(0, len(values)))] if draw(st.booleans()) else values
    spot = draw(st.integers(0, len(values)))
    if draw(st.booleans()):
        rule = definition[spot].rule if spot < len(definition) else None
        values[spot : spot + 1] = [draw(_wrong(rule))]
    return name, tag, element.join([tag, *values])


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_segment())
@example(("x12-810-004010", "IT1", "IT1*1*" + "1" * 14 + ".5"))  # 15 digits: right
@example(("x12-810-004010", "IT1", "IT1*1*" + "1" * 15 + ".5"))  # 16: too long
@example(("x12-810-004010", "IT1", "IT1*1*" + "1" * 16))
@example(("x12-810-004010", "IT1", "IT1*1*."))
@example(("x12-810-004010", "IT1", "IT1*1*-"))
@example(("x12-810-004010", "IT1", "IT1*1*1.2.3"))
@example(("x12-810-004010", "CTT", "CTT*1A"))
@example(("x12-810-004010", "CTT", "CTT*-"))
@example(("x12-810-004010", "REF", "REF*ZZ*" + "A" * 31))
@example(("x12-810-004010", "REF", "REF*ZZ*\x00"))
@example(("edifact-invoic-d96a", "UNT", "UNT+1,5+1"))
def test_the_fast_path_accepts_only_segments_the_element_checks_find_clean(case: tuple[str, str, str]) -> None:
    """A segment text the compiled pattern of its tag matches (X12 `*` `>`, EDIFACT `+` `:` with `,` as decimal
    mark) is one the element-by-element checks find no element error in; what they find wrong it never matches."""
    from edinbox.edi._fast import pattern
    from edinbox.edi._validate import _Walk

    name, tag, text = case
    rules = load(name)
    edifact = rules.standard == "EDIFACT"
    element, component = ("+", ":") if edifact else ("*", ">")
    walk = _Walk(rules, "," if edifact else ".")
    walk.text(element, component)
    definition = rules.segments[tag]
    fast = pattern(tag, definition, element=element, component=component, marks=walk.marks)
    assert fast is not None
    walk.elements(text.split(element)[1:], definition, tag, 1, "")
    errors = [f for f in walk.found if f.code not in ("2", "10")]  # syntax notes: checked apart from the pattern
    if fast.fullmatch(text) is not None:
        assert errors == [], text


PO_850 = (
    b"ISA*00*          *00*          *ZZ*ACME           *ZZ*HUB            *261130*1205*U*00401*000000701*0*P*>~"
    b"GS*PO*ACME*HUB*20261130*1205*701*X*004010~ST*850*0001~BEG*00*SA*PO-701**20261130~CUR*BY*EUR~REF*DP*12~"
    b"DTM*002*20261205~N1*ST*HUB AG*92*4000002000002~N3*MAIN STREET 1~N4*BERLIN**10115*DE~"
    b"PO1*1*10*EA*4.5**VP*W-1*BP*4000003000017~PID*F****WIDGET~PO1*2*3*EA*12**VP*W-2~CTT*2*13~SE*13*0001~"
    b"GE*1*701~IEA*1*000000701~"
)


def test_an_850_is_checked_against_its_guide() -> None:
    """An X12 850 004010 purchase order is validated by its own guide: a clean one has no finding; a BEG01 code
    outside 353's list, a PO1 with PO103 but no PO102 (C0302) and PO106 without PO107 (P0607), and no PO1 at all
    give AK4 7, AK4 2 with the element that made it required, and AK3 3; an 850 of 005010 has no guide."""
    (clean,) = parse(PO_850)
    found = validate(clean)
    assert (found.checked, dict(found.findings)) == ((0,), {})
    bad = PO_850.replace(b"BEG*00*SA", b"BEG*99*SA").replace(b"PO1*2*3*EA*12**VP*W-2~", b"PO1*2**EA*12**VP~")
    (interchange,) = parse(bad)
    codes = [
        (f.segment, f.position, f.segment_code, f.element, f.code, f.trigger) for f in validate(interchange).findings[0]
    ]
    assert codes == [("BEG", 2, "8", 1, "7", 0), ("PO1", 11, "8", 2, "2", 3), ("PO1", 11, "8", 7, "2", 6)]
    lines = PO_850.split(b"~")
    without = b"~".join(line for line in lines if not line.startswith((b"PO1", b"PID"))).replace(b"SE*13*", b"SE*10*")
    (interchange,) = parse(without)
    missing = [(f.segment, f.segment_code, f.loop) for f in validate(interchange).findings[0]]
    assert missing == [("PO1", "3", "PO1")]
    (later,) = parse(PO_850.replace(b"*X*004010~", b"*X*005010~"))
    assert validate(later).checked == ()
