"""Trailers that disagree with their content (SE/GE/IEA, UNT/UNE/UNZ): one check, `Interchange.disagreements`, names
each with its acknowledgment code and a sentence, and the acknowledgments `received` gives say exactly that; pyx12
and pydifact read the rejections."""

from __future__ import annotations

import io
import warnings
from datetime import datetime
from typing import Any

import pytest
from edi_fixtures import ACME, HUB, INVOICE
from hypothesis import given, settings
from hypothesis import strategies as st

from edinbox.edi import Interchange, Received, parse, received, render_interchange, render_reply, replies

WHEN = datetime(2026, 12, 3, 2, 30)
X12 = render_interchange([INVOICE, INVOICE], standard="X12", sender=ACME, receiver=HUB, control_number="905")
EDIFACT = render_interchange([INVOICE, INVOICE], standard="EDIFACT", sender=ACME, receiver=HUB, control_number="905")
UNG = b"UNG+INVOIC+ACME:ZZ+HUB:ZZ+261130:1200+G1+UN+D:96A'"
GROUPED = EDIFACT.replace(b"'UNH+1+", b"'" + UNG + b"UNH+1+", 1).replace(b"UNZ+2+905'", b"UNE+2+G1'UNZ+1+905'")


def only(data: bytes) -> Interchange:
    """The one interchange in `data`."""
    (interchange,) = parse(data)
    return interchange


def changed(data: bytes, old: bytes, new: bytes) -> bytes:
    """`data` with its one `old` replaced by `new`."""
    assert data.count(old) == 1, old
    return data.replace(old, new)


def rows(found: Received, kind: str) -> list[tuple[str, ...]]:
    """The segments of the acknowledgment `kind` of `found` (parsed back with our parser), as first components."""
    data = render_reply(replies(found, kind), found, sender=HUB, control_number="42", when=WHEN)
    answer = only(data)
    assert answer.keyable
    assert answer.problems == ()
    return [(s.tag, *(e[0] if e else "" for e in s.elements)) for s in answer.segments]


X12_CASES = [
    # (old, new, level, index, code, reason, AK5 per set, AK9, TA1 status and note)
    (
        b"SE*10*0002~",
        b"SE*11*0002~",
        ("set", 1, "4"),
        "SE01 says 11 segments, transaction set 0002 (810 #2) has 10",
        [("AK5", "R"), ("AK5", "R", "4")],
        ("AK9", "R", "2", "2", "0"),
        ("A", "000"),
    ),
    (
        b"SE*10*0002~",
        b"SE*10*0003~",
        ("set", 1, "3"),
        "SE02 says 0003, transaction set 0002 (810 #2) has ST02 0002",
        [("AK5", "R"), ("AK5", "R", "3")],
        ("AK9", "R", "2", "2", "0"),
        ("A", "000"),
    ),
    (
        b"GE*2*905~",
        b"GE*3*905~",
        ("group", 0, "5"),
        "GE01 says 3 transaction sets, group 905 (IN) has 2",
        [("AK5", "R"), ("AK5", "R")],
        ("AK9", "R", "2", "2", "0", "5"),
        ("A", "000"),
    ),
    (
        b"GE*2*905~",
        b"GE*2*906~",
        ("group", 0, "4"),
        "GE02 says 906, group 905 (IN) has GS06 905",
        [("AK5", "R"), ("AK5", "R")],
        ("AK9", "R", "2", "2", "0", "4"),
        ("A", "000"),
    ),
    (
        b"IEA*1*000000905~",
        b"IEA*2*000000905~",
        ("interchange", 0, "021"),
        "IEA01 says 2 groups, interchange 000000905 has 1",
        [("AK5", "R"), ("AK5", "R")],
        ("AK9", "R", "2", "2", "0"),
        ("R", "021"),
    ),
    (
        b"IEA*1*000000905~",
        b"IEA*1*000000906~",
        ("interchange", 0, "001"),
        "IEA02 says 000000906, interchange 000000905 has ISA13 000000905",
        [("AK5", "R"), ("AK5", "R")],
        ("AK9", "R", "2", "2", "0"),
        ("R", "001"),
    ),
]


@pytest.mark.parametrize("case", X12_CASES)
def test_an_x12_trailer_that_disagrees_is_rejected_with_its_code(case: tuple[Any, ...]) -> None:
    """Each X12 trailer disagreement is one Disagreement with its code and sentence (also among the problems); the
    rejection the hub writes says that code: AK5 R with 718 code 3 or 4 for its set, AK9 R with 716 code 4 or 5 for
    its group, TA1 R 001 or 021 for the envelope (the 997 then rejects every set), and pyx12 reads the 997."""
    old, new, where, reason, ak5, ak9, ta1 = case
    interchange = only(changed(X12, old, new))
    assert interchange.keyable
    assert [(d.level, d.index, d.code, d.reason) for d in interchange.disagreements] == [(*where, reason)]
    assert reason in interchange.problems
    found = received(interchange, rejected=True)
    ack = rows(found, "997")
    assert [r for r in ack if r[0] == "AK5"] == ak5
    assert [r for r in ack if r[0] == "AK9"] == [ak9]
    assert ("TA1", "000000905", "261130", "1200", *ta1) in rows(found, "TA1")
    x12file = pytest.importorskip("pyx12.x12file")
    data = render_reply(replies(found, "997"), found, sender=HUB, control_number="42", when=WHEN).decode()
    reader = x12file.X12Reader(io.StringIO(data))
    assert [s.get_seg_id() for s in reader][-4:] == ["AK9", "SE", "GE", "IEA"]
    assert list(reader.pop_errors()) == []


EDIFACT_CASES = [
    # (data, old, new, level, index, code, reason, UCI, UCF, UCM)
    (
        EDIFACT,
        b"UNT+14+2'",
        b"UNT+15+2'",
        ("set", 1, "29"),
        "UNT 0074 says 15 segments, message 2 (INVOIC #2) has 14",
        ("UCI", "905", "ACME", "HUB", "4"),
        [],
        [("UCM", "2", "INVOIC", "4", "29")],
    ),
    (
        EDIFACT,
        b"UNT+14+2'",
        b"UNT+14+3'",
        ("set", 1, "28"),
        "UNT 0062 says 3, message 2 (INVOIC #2) has UNH 0062 2",
        ("UCI", "905", "ACME", "HUB", "4"),
        [],
        [("UCM", "2", "INVOIC", "4", "28")],
    ),
    (
        EDIFACT,
        b"UNZ+2+905'",
        b"UNZ+1+905'",
        ("interchange", 0, "29"),
        "UNZ 0036 says 1 messages, interchange 905 has 2",
        ("UCI", "905", "ACME", "HUB", "4", "29"),
        [],
        [],
    ),
    (
        EDIFACT,
        b"UNZ+2+905'",
        b"UNZ+2+906'",
        ("interchange", 0, "28"),
        "UNZ 0020 says 906, interchange 905 has UNB 0020 905",
        ("UCI", "905", "ACME", "HUB", "4", "28"),
        [],
        [],
    ),
    (
        GROUPED,
        b"UNE+2+G1'",
        b"UNE+3+G1'",
        ("group", 0, "29"),
        "UNE 0060 says 3 messages, group G1 (INVOIC) has 2",
        ("UCI", "905", "ACME", "HUB", "4"),
        [("UCF", "G1", "", "", "4", "29")],
        [],
    ),
    (
        GROUPED,
        b"UNE+2+G1'",
        b"UNE+2+G2'",
        ("group", 0, "28"),
        "UNE 0048 says G2, group G1 (INVOIC) has UNG 0048 G1",
        ("UCI", "905", "ACME", "HUB", "4"),
        [("UCF", "G1", "", "", "4", "28")],
        [],
    ),
]


@pytest.mark.parametrize("case", EDIFACT_CASES)
def test_an_edifact_trailer_that_disagrees_is_rejected_with_its_code(case: tuple[Any, ...]) -> None:
    """Each EDIFACT trailer disagreement is one Disagreement with its 0085 code (28 reference, 29 count) and
    sentence; the rejecting CONTRL says it: UCI 4 with the code for UNZ, a UCF 4 for a UNE, a UCM 4 for a UNT; and
    pydifact reads the CONTRL with the same segments."""
    data, old, new, where, reason, uci, ucf, ucm = case
    interchange = only(changed(data, old, new))
    assert interchange.keyable
    assert [(d.level, d.index, d.code, d.reason) for d in interchange.disagreements] == [(*where, reason)]
    found = received(interchange, rejected=True)
    contrl = rows(found, "CONTRL")
    assert [r for r in contrl if r[0] in ("UCI", "UCF", "UCM")] == [uci, *ucf, *ucm]
    collection = pytest.importorskip("pydifact.segmentcollection")
    text = render_reply(replies(found, "CONTRL"), found, sender=HUB, control_number="42", when=WHEN).decode()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (message,) = list(collection.Interchange.from_str(text).get_messages())
    tags = [s.tag for s in message.segments]
    assert tags == [t[0] for t in (uci, *ucf, *ucm)]
    assert message.segments[0].elements[3:] == list(uci[4:])


def test_a_correct_interchange_has_no_disagreement_and_is_accepted() -> None:
    """The clean two-invoice interchanges (EDIFACT with and without a UNG group) have no disagreement and are
    acknowledged as accepted (AK9 A, TA1 A, UCI 7 with no UCF or UCM)."""
    for data in (X12, EDIFACT, GROUPED):
        assert only(data).disagreements == ()
    found = received(only(X12))
    assert ("AK9", "A", "2", "2", "2") in rows(found, "997")
    assert ("TA1", "000000905", "261130", "1200", "A", "000") in rows(found, "TA1")
    for data in (EDIFACT, GROUPED):
        contrl = rows(received(only(data)), "CONTRL")
        assert [r for r in contrl if r[0] in ("UCI", "UCF", "UCM")] == [("UCI", "905", "ACME", "HUB", "7")]


def test_control_numbers_and_counts_match_as_numbers_in_the_parser_and_the_acknowledgment() -> None:
    """The one rule: SE02 "2" for ST02 "0002", GE02 "0905", IEA02 "905" and SE01 "010" agree (numbers when both
    are digits); the parser finds no disagreement and the 997 and TA1 accept, where the acknowledgment once
    compared strings and rejected what the parser accepted."""
    data = changed(X12, b"SE*10*0002~", b"SE*010*2~")
    data = changed(data, b"GE*2*905~", b"GE*2*0905~")
    data = changed(data, b"IEA*1*000000905~", b"IEA*1*905~")
    interchange = only(data)
    assert interchange.disagreements == ()
    found = received(interchange)
    assert [g.error for g in found.groups] == [""]
    assert [s.error for g in found.groups for s in g.sets] == ["", ""]
    assert found.error == ""
    assert ("AK9", "A", "2", "2", "2") in rows(found, "997")


def test_an_edifact_message_in_error_inside_a_group_follows_its_ucf() -> None:
    """A faulty message inside a UNG group is answered under that group's UCF (0083 = 4 when the interchange is
    rejected), not at the interchange level."""
    contrl = rows(received(only(GROUPED), rejected=True, faulty=0), "CONTRL")
    assert [r for r in contrl if r[0] in ("UCI", "UCF", "UCM")] == [
        ("UCI", "905", "ACME", "HUB", "4"),
        ("UCF", "G1", "", "", "4"),
        ("UCM", "1", "INVOIC", "4", "12"),
    ]


SE01 = ["10", "010", "11", "9", "", "X"]
SE02 = ["0002", "2", "02", "0003", "", "A2"]
GE = [("2", "905"), ("02", "0905"), ("3", "905"), ("2", "906"), ("1", "X")]
IEA = [("1", "000000905"), ("01", "905"), ("2", "000000905"), ("1", "000000906"), ("", "")]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SE01), st.sampled_from(SE02), st.sampled_from(GE), st.sampled_from(IEA), st.booleans())
def test_the_acknowledgment_rejects_exactly_the_disagreements(
    se01: str, se02: str, ge: tuple[str, str], iea: tuple[str, str], edifact: bool
) -> None:
    """For any trailer values, `received` reports an error at a set, group or the envelope exactly where
    `disagreements` names one, with its first code; the count rule is: digits whose number is the count."""
    if edifact:
        data = changed(GROUPED, b"UNT+14+2'", f"UNT+{se01.replace('10', '14')}+{se02}'".encode())
        data = changed(data, b"UNE+2+G1'", f"UNE+{ge[0]}+{ge[1].replace('905', 'G1')}'".encode())
        data = changed(data, b"UNZ+1+905'", f"UNZ+{iea[0]}+{iea[1].replace('000000', '')}'".encode())
    else:
        data = changed(X12, b"SE*10*0002~", f"SE*{se01}*{se02}~".encode())
        data = changed(data, b"GE*2*905~", f"GE*{ge[0]}*{ge[1]}~".encode())
        data = changed(data, b"IEA*1*000000905~", f"IEA*{iea[0]}*{iea[1]}~".encode())
    interchange = only(data)
    first: dict[tuple[str, int], str] = {}
    for d in interchange.disagreements:
        first.setdefault((d.level, d.index), d.code)
    found = received(interchange)
    said = {("set", i): s.error for i, s in enumerate(s for g in found.groups for s in g.sets) if s.error}
    said |= {("group", i): g.error for i, g in enumerate(found.groups) if g.error}
    said |= {("interchange", 0): found.error} if found.error else {}
    assert said == first
    count_right = se01.isdigit() and int(se01) == 10
    assert (("set", 1) in first) == (not count_right or not (se02.isdigit() and int(se02) == 2))
