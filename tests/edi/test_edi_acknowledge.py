"""Acknowledgments (TA1, 997, 999, CONTRL): keyable for our own parser, valid for pyx12 and pydifact, with the
subject's control numbers and counts, rejections with their codes, and duplicate notices."""

from __future__ import annotations

import io
import warnings
from datetime import datetime

import pytest
from edi_fixtures import ACME, EDIFACT_INVOIC, HUB, INVOICE, X12_810

from edinbox.edi import (
    EdiSyntaxError,
    Finding,
    Received,
    ReceivedGroup,
    ReceivedSet,
    parse,
    received,
    render_interchange,
    render_reply,
    replies,
    reply_key,
)

WHEN = datetime(2026, 12, 3, 2, 30)


def subject(standard: str, text: bytes | None = None) -> Received:
    """What acknowledging a two-invoice interchange (or `text`) needs."""
    data = text or render_interchange(
        [INVOICE, INVOICE], standard=standard, sender=ACME, receiver=HUB, control_number="905"
    )
    return received(parse(data)[0])


def answer(found: Received, kind: str, *, duplicate: bool = False, control: str = "42") -> bytes:
    """Render the acknowledgment `kind` of `found` from the hub."""
    return render_reply(replies(found, kind, duplicate=duplicate), found, sender=HUB, control_number=control, when=WHEN)


def segments(data: bytes) -> list[tuple[str, ...]]:
    """Every segment of the one interchange in `data`, as (tag, first components...)."""
    (interchange,) = parse(data)
    return [(s.tag, *(e[0] if e else "" for e in s.elements)) for s in interchange.segments]


@pytest.mark.parametrize("kind", ["TA1", "997", "999"])
def test_x12_acknowledgments_are_keyable_interchanges_back_to_the_sender(kind: str) -> None:
    """Each X12 acknowledgment parses as one keyable interchange from the hub to the partner, of its own type,
    with our control number and no problem."""
    data = answer(subject("X12"), kind, control="42")
    (ack,) = parse(data)
    assert ack.keyable
    assert ack.problems == ()
    assert (ack.sender, ack.receiver, ack.control_number) == (HUB, ACME, "000000042")
    assert ack.message_types == (kind,)
    assert ack.message().message_id == "000000042"
    assert reply_key(subject("X12"), sender=HUB, control_number="42") == ack.key


def test_997_refers_to_the_group_and_each_transaction_set() -> None:
    """The 997 carries AK1 with GS01/GS06, AK2 + AK5 A per transaction set and AK9 A with the counts."""
    rows = segments(answer(subject("X12"), "997"))
    body = [r for r in rows if r[0] in ("AK1", "AK2", "AK5", "AK9")]
    assert body == [
        ("AK1", "IN", "905"),
        ("AK2", "810", "0001"),
        ("AK5", "A"),
        ("AK2", "810", "0002"),
        ("AK5", "A"),
        ("AK9", "A", "2", "2", "2"),
    ]
    assert ("GS", "FA", "HUB", "ACME", "20261203", "0230", "42", "X", "004010") in rows


def test_a_wrong_segment_count_rejects_its_transaction_set_alone() -> None:
    """An SE01 that does not count the set's segments gives AK5 R 4 for that set and AK9 P (partially accepted)."""
    data = render_interchange([INVOICE, INVOICE], standard="X12", sender=ACME, receiver=HUB, control_number="905")
    broken = data.replace(b"SE*10*0002~", b"SE*7*0002~")
    assert broken != data
    rows = segments(answer(subject("X12", broken), "997"))
    assert ("AK5", "R", "4") in rows
    assert ("AK9", "P", "2", "2", "1") in rows


def test_ta1_accepts_or_rejects_with_its_note_code() -> None:
    """TA1 names ISA13/ISA09/ISA10 with A 000; a duplicate gets R 025; an IEA02 mismatch R 001."""
    found = subject("X12")
    assert ("TA1", "000000905", "261130", "1200", "A", "000") in segments(answer(found, "TA1"))
    assert ("TA1", "000000905", "261130", "1200", "R", "025") in segments(answer(found, "TA1", duplicate=True))
    data = render_interchange([INVOICE], standard="X12", sender=ACME, receiver=HUB, control_number="905")
    mismatch = data.replace(b"IEA*1*000000905~", b"IEA*1*000000906~")
    assert ("TA1", "000000905", "261130", "1200", "R", "001") in segments(answer(subject("X12", mismatch), "TA1"))


def test_isa14_and_unb_0031_say_whether_an_acknowledgment_was_asked_for() -> None:
    """`requested` reads ISA14 = 1 and UNB 0031 = 1."""
    data = render_interchange([INVOICE], standard="X12", sender=ACME, receiver=HUB, control_number="905")
    assert not subject("X12", data).requested
    isa = data.index(b"*0*P*")
    assert subject("X12", data[:isa] + b"*1*P*" + data[isa + 5 :]).requested
    edifact = render_interchange([INVOICE], standard="EDIFACT", sender=ACME, receiver=HUB, control_number="905")
    assert not subject("EDIFACT", edifact).requested
    asked = edifact.replace(b"+905'UNH", b"+905++++1'UNH")
    assert subject("EDIFACT", asked).requested


def test_contrl_acknowledges_or_rejects_and_notices_duplicates() -> None:
    """CONTRL: UCI 7 for an accepted interchange, UCI 4 26 for a duplicate, UCM 4 29 per message with a bad count."""
    found = subject("EDIFACT")
    rows = segments(answer(found, "CONTRL"))
    assert ("UNH", "1", "CONTRL") in rows
    assert ("UCI", "905", "ACME", "HUB", "7") in rows
    assert ("UCI", "905", "ACME", "HUB", "4", "26") in segments(answer(found, "CONTRL", duplicate=True))
    data = render_interchange([INVOICE, INVOICE], standard="EDIFACT", sender=ACME, receiver=HUB, control_number="905")
    broken = data.replace(b"UNT+14+2'", b"UNT+13+2'")
    assert broken != data
    rows = segments(answer(subject("EDIFACT", broken), "CONTRL"))
    assert ("UCM", "2", "INVOIC", "4", "29") in rows
    (ack,) = parse(answer(found, "CONTRL"))
    assert ack.keyable
    assert ack.problems == ()
    assert ack.message_types == ("CONTRL",)


def test_an_interchange_of_acknowledgments_is_flagged_never_to_be_answered() -> None:
    """A received 997 or CONTRL is `only_acknowledgments`; an invoice interchange is not."""
    for standard, kind in (("X12", "997"), ("EDIFACT", "CONTRL")):
        assert subject(standard, answer(subject(standard), kind)).only_acknowledgments
        assert not subject(standard).only_acknowledgments


def test_pyx12_validates_997_and_999_against_its_maps() -> None:
    """pyx12 validates our 997 (4010) and 999 (005010X231A1) of a HIPAA group against its maps, and reads a TA1."""
    pyx12_document = pytest.importorskip("pyx12.x12n_document")
    import pyx12.params

    group = ReceivedGroup(
        "HC", "905", "005010X222A1", (ReceivedSet("837", "0001", ("837",)), ReceivedSet("837", "0002", ("837",), "4"))
    )
    found = Received("X12", ACME, HUB, "000000905", False, ("261130", "1200"), True, (group,), types=("837",))
    for kind in ("997", "999", "TA1"):
        data = answer(found, kind).decode()
        assert pyx12_document.x12n_document(pyx12.params.params(), io.StringIO(data), io.StringIO(), None), kind


def test_pyx12_reads_the_997_of_an_invoice_group() -> None:
    """pyx12's envelope reader reads the 997 of an 810 group segment by segment, with no error."""
    x12file = pytest.importorskip("pyx12.x12file")
    reader = x12file.X12Reader(io.StringIO(answer(subject("X12"), "997").decode()))
    tags = [segment.get_seg_id() for segment in reader]
    assert tags == ["ISA", "GS", "ST", "AK1", "AK2", "AK5", "AK2", "AK5", "AK9", "SE", "GE", "IEA"]
    assert list(reader.pop_errors()) == []


def test_pydifact_reads_contrl() -> None:
    """pydifact reads our CONTRL: its sender, recipient, control reference and the UCI elements."""
    collection = pytest.importorskip("pydifact.segmentcollection")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        interchange = collection.Interchange.from_str(
            answer(subject("EDIFACT"), "CONTRL", duplicate=True).decode("latin-1")
        )
        (message,) = list(interchange.get_messages())
    assert (interchange.sender, interchange.recipient, interchange.control_reference) == (
        ["HUB", "ZZ"],
        ["ACME", "ZZ"],
        "42",
    )
    assert message.type == "CONTRL"
    assert [(s.tag, s.elements) for s in message.segments] == [
        ("UCI", ["905", ["ACME", "ZZ"], ["HUB", "ZZ"], "4", "26"])
    ]


def rejected(standard: str, data: bytes | None = None, *, faulty: int | None = None) -> Received:
    """What the rejection of a two-invoice interchange (or `data`) the receiver parks needs."""
    text = data or render_interchange(
        [INVOICE, INVOICE], standard=standard, sender=ACME, receiver=HUB, control_number="905"
    )
    return received(parse(text)[0], rejected=True, faulty=faulty)


def test_a_parked_interchange_rejects_every_set_with_the_faulty_ones_code() -> None:
    """Parked whole for its second invoice: the 997 says AK5 R 5 for that set, AK5 R for its sibling and AK9 R with
    two received and none accepted; the 999 says IK5 R 5 for both (IK502 is required there); the TA1 accepts the
    envelope, which had no error."""
    found = rejected("X12", faulty=1)
    rows = segments(answer(found, "997"))
    assert [r for r in rows if r[0] in ("AK2", "AK5", "AK9")] == [
        ("AK2", "810", "0001"),
        ("AK5", "R"),
        ("AK2", "810", "0002"),
        ("AK5", "R", "5"),
        ("AK9", "R", "2", "2", "0"),
    ]
    rows = segments(answer(found, "999"))
    assert [r for r in rows if r[0] in ("IK5", "AK9")] == [
        ("IK5", "R", "5"),
        ("IK5", "R", "5"),
        ("AK9", "R", "2", "2", "0"),
    ]
    assert ("TA1", "000000905", "261130", "1200", "A", "000") in segments(answer(found, "TA1"))


def test_an_interchange_without_its_trailers_is_rejected_with_their_codes() -> None:
    """No SE, GE and IEA: TA1 R 023 (premature end), AK5 R 2 (no SE) and AK9 R ... 3 (no GE); EDIFACT without UNT
    and UNZ: CONTRL UCI 4 13 and UCM 4 13 for the message. Both rejections parse as keyable interchanges."""
    data = render_interchange([INVOICE], standard="X12", sender=ACME, receiver=HUB, control_number="905")
    cut = data[: data.index(b"SE*")]
    (interchange,) = parse(cut)
    assert (interchange.keyable, interchange.identified) == (False, True)
    found = received(interchange)
    assert found.rejected
    assert ("TA1", "000000905", "261130", "1200", "R", "023") in segments(answer(found, "TA1"))
    rows = segments(answer(found, "997"))
    assert ("AK5", "R", "2") in rows
    assert ("AK9", "R", "1", "1", "0", "3") in rows
    edifact = render_interchange([INVOICE], standard="EDIFACT", sender=ACME, receiver=HUB, control_number="905")
    found = received(parse(edifact[: edifact.index(b"UNT+")])[0])
    rows = segments(answer(found, "CONTRL"))
    assert ("UCI", "905", "ACME", "HUB", "4", "13") in rows
    assert ("UCM", "1", "INVOIC", "4", "13") in rows
    for data in (answer(found, "CONTRL"), answer(received(interchange), "997")):
        (ack,) = parse(data)
        assert ack.keyable
        assert ack.problems == ()


def test_an_edifact_rejection_is_uci_4_with_a_ucm_for_the_faulty_message() -> None:
    """Parked for its first message: UCI 4 without a code (the envelope was fine), UCM 4 12 for that message only."""
    rows = segments(answer(rejected("EDIFACT", faulty=0), "CONTRL"))
    assert [r for r in rows if r[0] in ("UCI", "UCM")] == [
        ("UCI", "905", "ACME", "HUB", "4"),
        ("UCM", "1", "INVOIC", "4", "12"),
    ]


def test_pyx12_validates_the_rejections() -> None:
    """pyx12 validates the 997 and 999 of a rejected HIPAA group (every set R, one with its code) and the TA1 R 023
    of an interchange without its trailer, with no error."""
    pyx12_document = pytest.importorskip("pyx12.x12n_document")
    import pyx12.params

    sets = (ReceivedSet("837", "0001", ("837",)), ReceivedSet("837", "0002", ("837",), "5"))
    group = ReceivedGroup("HC", "905", "005010X222A1", sets)
    found = Received(
        "X12", ACME, HUB, "000000905", False, ("261130", "1200"), True, (group,), types=("837",), rejected=True
    )
    truncated = Received(
        "X12", ACME, HUB, "000000905", False, ("261130", "1200"), True, (group,), error="023", rejected=True
    )
    for kind, subject_ in (("997", found), ("999", found), ("TA1", truncated)):
        data = answer(subject_, kind).decode()
        errors = io.StringIO()
        assert pyx12_document.x12n_document(pyx12.params.params(), io.StringIO(data), errors, None), (kind, data)


def test_pydifact_reads_a_rejection() -> None:
    """pydifact reads the CONTRL of a parked interchange: UCI 4 and the UCM of the faulty message."""
    collection = pytest.importorskip("pydifact.segmentcollection")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = answer(rejected("EDIFACT", faulty=1), "CONTRL").decode("latin-1")
        (message,) = list(collection.Interchange.from_str(data).get_messages())
    assert [(s.tag, s.elements) for s in message.segments] == [
        ("UCI", ["905", ["ACME", "ZZ"], ["HUB", "ZZ"], "4"]),
        ("UCM", ["2", ["INVOIC", "D", "96A", "UN", "EAN008"], "4", "12"]),
    ]


def finding_of(data: bytes) -> Finding | None:
    """The finding the invoice reader reports for the first (only) interchange in `data`."""
    (interchange,) = parse(data)
    with pytest.raises(EdiSyntaxError) as caught:
        interchange.invoices()
    return caught.value.finding


def detailed(data: bytes, kind: str) -> bytes:
    """The rejection `kind` of the interchange in `data`, parked for its unreadable invoice, as the hub builds it."""
    found = received(parse(data)[0], rejected=True, faulty=0, finding=finding_of(data))
    return answer(found, kind)


BAD_DATE = X12_810.replace(b"BIG*20261130", b"BIG*20261399")


def test_a_bad_big01_date_gives_ak3_and_ak4_before_ak5() -> None:
    """A month-13 BIG01: the 997 says segment BIG at position 2 has element errors (AK3 8), element 1 (373) is an
    invalid date (AK4 8) with the value sent, then AK5 R 5; the 997 reads back with our parser."""
    data = detailed(BAD_DATE, "997")
    assert b"AK2*810*0001~AK3*BIG*2**8~AK4*1*373*8*20261399~AK5*R*5~" in data
    assert [s[0] for s in segments(data)][3:8] == ["AK1", "AK2", "AK3", "AK4", "AK5"]
    assert parse(data)[0].keyable


def test_the_999_says_it_with_ik3_and_ik4() -> None:
    """The 999 of the same rejection carries IK3, the CTX of its business unit (the invoice number) and IK4 before
    IK5 R 5."""
    expected = b"AK2*810*0001~IK3*BIG*2**8~CTX*BIG02>INV-905~IK4*1*373*8*20261399~IK5*R*5~"
    assert expected in detailed(BAD_DATE, "999")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (b"IT1*1*2*EA*50.00", b"IT1*1*2*EA*5O.00", b"AK3*IT1*6**8~AK4*4*212*6*5O.00~"),  # letter O in a price
        (b"IT1*1*2*EA*50.00", b"IT1*1*" + b"9" * 36 + b"*EA*50.00", b"AK3*IT1*6**8~AK4*2*358*5*" + b"9" * 36 + b"~"),
        (b"TDS*11960", b"TDS*", b"AK3*TDS*9**8~AK4*1*610*1~"),  # empty total: mandatory element missing
        (b"BIG*20261130*INV-905", b"BIG*20261130*", b"AK3*BIG*2**8~AK4*2*76*1~"),
        (b"BIG*20261130*INV-905*****DI~", b"", b"AK3*BIG*2**3~AK5"),  # no BIG: mandatory segment missing, no AK4
        (b"N1*SE*ACME GMBH*92*4000001000005~", b"", b"AK3*N1*5*N1*3~AK5"),  # no seller: its N1 loop is missing
    ],
)
def test_each_invoice_fault_says_its_segment_and_element(old: bytes, new: bytes, expected: bytes) -> None:
    """A bad number (invalid character, too long), a missing element and a missing segment or loop each give the
    AK3 / AK4 an analyst expects (positions counted from ST = 1)."""
    data = X12_810.replace(old, new, 1)
    data = data.replace(b"SE*12*", b"SE*11*") if not new else data  # the segment count stays right
    assert expected in detailed(data, "997")


def test_a_bad_value_holding_our_separator_is_not_copied() -> None:
    """A partner using `|` may send a date holding `*`: AK4 then omits the value rather than break the 997."""
    data = BAD_DATE.replace(b"*", b"|").replace(b"BIG|20261399", b"BIG|2026*399")
    assert b"AK3*BIG*2**8~AK4*1*373*8~AK5*R*5~" in detailed(data, "997")


def test_pyx12_validates_the_997_and_999_with_segment_and_element_errors() -> None:
    """pyx12 validates our 997 and 999 carrying AK3/AK4 and IK3/IK4 against its maps, with no error."""
    pyx12_document = pytest.importorskip("pyx12.x12n_document")
    import pyx12.params

    finding = Finding("CLM", 3, "8", 1, 0, "1028", "6", "A*B")
    sets = (ReceivedSet("837", "0001", ("837",), "5", (Finding("NM1", 2, "8", 3, 0, "1035", "1"), finding)),)
    group = ReceivedGroup("HC", "905", "005010X222A1", sets)
    found = Received("X12", ACME, HUB, "000000905", False, ("261130", "1200"), True, (group,), types=("837",))
    for kind in ("997", "999"):
        data = answer(found, kind).decode()
        assert "K4*1*1028*6~" in data  # the value holding `*` is not copied
        errors = io.StringIO()
        assert pyx12_document.x12n_document(pyx12.params.params(), io.StringIO(data), errors, None), (kind, data)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (b"DTM+137:20261130", b"DTM+137:20261399", b"UCM+1+INVOIC:D:96A:UN:EAN008+4+12'UCS+3'UCD+12+1:2'"),
        (b"QTY+47:2'", b"QTY+47:2x'", b"UCS+8'UCD+37+1:2'"),  # invalid character in the first line's quantity
        (b"MOA+77:119.60'", b"MOA+77:" + b"1" * 36 + b"'", b"UCS+16'UCD+39+1:2'"),  # total too long
        (b"DTM+137:20261130:102'", b"", b"UCM+1+INVOIC:D:96A:UN:EAN008+4+12'UCS+3+13'UNT"),  # no DTM after BGM
    ],
)
def test_contrl_says_the_segment_and_element_with_ucs_and_ucd(old: bytes, new: bytes, expected: bytes) -> None:
    """A rejected INVOIC's CONTRL gives, after its UCM, UCS (position from UNH = 1) and UCD (0085 code, element and
    component position): 12 invalid value for a bad date, 37 invalid character, 39 too long, 13 a missing segment."""
    data = EDIFACT_INVOIC.replace(old, new, 1)
    data = data.replace(b"UNT+18+", b"UNT+17+") if not new else data  # the segment count stays right
    assert expected in detailed(data, "CONTRL")


def test_pydifact_reads_ucs_and_ucd() -> None:
    """pydifact reads the CONTRL of a bad DTM+137 date: UCI 4, UCM 4 12, UCS 3, UCD 12 at element 1 component 2."""
    collection = pytest.importorskip("pydifact.segmentcollection")
    data = detailed(EDIFACT_INVOIC.replace(b"DTM+137:20261130", b"DTM+137:20261399"), "CONTRL").decode("latin-1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (message,) = list(collection.Interchange.from_str(data).get_messages())
    assert [(s.tag, s.elements) for s in message.segments][1:] == [
        ("UCM", ["1", ["INVOIC", "D", "96A", "UN", "EAN008"], "4", "12"]),
        ("UCS", ["3"]),
        ("UCD", ["12", ["1", "2"]]),
    ]
