"""Envelopes: separators, trailers, counts and the quirks of real partner files, on hand-written fixtures."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import edi_fixtures as fixtures
import pytest

from edinbox import InboxError
from edinbox.edi import EdiSyntaxError, NotKeyableError, Party, Separators, parse


def only(data: bytes):  # type: ignore[no-untyped-def]
    """The single interchange in `data`."""
    found = parse(data)
    assert len(found) == 1
    return found[0]


def test_x12_fixed_width_isa_gives_separators_and_header() -> None:
    """A fixed-width ISA yields its separators, trimmed parties, control number, usage and date."""
    ic = only(fixtures.X12_810)
    assert ic.standard == "X12"
    assert ic.separators == Separators(element="*", component=">", segment="~")
    assert ic.sender == Party("ZZ", "ACME")
    assert ic.receiver == Party("ZZ", "HUB")
    assert ic.control_number == "000000905"
    assert ic.test is False
    assert ic.prepared_at == datetime(2026, 11, 30, 12, 5)
    assert ic.syntax == "00401"
    assert ic.keyable
    assert ic.problems == ()
    assert ic.message_types == ("810",)
    assert [(g.type, g.control_number, len(g.messages)) for g in ic.groups] == [("IN", "905", 1)]
    assert ic.messages[0].control_number == "0001"
    assert [s.tag for s in ic.messages[0].segments][:2] == ["ST", "BIG"]
    assert ic.span == (0, len(fixtures.X12_810))


def test_x12_rewritten_with_bom_nbsp_padding_tabs_and_crlf_terminators() -> None:
    """BOM, NBSP-padded (non-fixed-width) ISA, pipes, CR terminators and TAB indentation still parse."""
    ic = only(fixtures.X12_810_REWRITTEN)
    assert ic.sender == Party("ZZ", "ACME")
    assert ic.receiver == Party("ZZ", "HUB")
    assert ic.separators.element == "|"
    assert ic.separators.component == "^"
    assert ic.keyable
    assert any("not fixed-width" in p for p in ic.problems)
    assert ic.span[0] == 5  # after the BOM and the line break
    assert ic.raw.startswith(b"ISA|")


def test_x12_unpadded_isa_is_read_by_counting_separators() -> None:
    """An ISA whose ids are not padded to 15 characters is read by counting its 16 elements."""
    data = fixtures.X12_810.replace(b"ACME           ", b"ACME").replace(b"HUB            ", b"HUB")
    ic = only(data)
    assert ic.sender == Party("ZZ", "ACME")
    assert ic.control_number == "000000905"
    assert ic.keyable


def test_x12_501_repetition_separator_and_a_letter_in_isa11() -> None:
    """ISA11 is the repetition separator from 00402 on, unless a partner still sends the letter U."""
    five = fixtures.X12_810.replace(b"*U*00401*", b"*^*00501*")
    assert only(five).separators.repetition == "^"
    letter = fixtures.X12_810.replace(b"*U*00401*", b"*U*00501*")
    assert only(letter).separators.repetition is None


def test_x12_hard_wrapped_inside_isa_and_values() -> None:
    """Line breaks every 80 characters, inside the ISA and inside values, are noise when `~` terminates."""
    data = b"\n".join(fixtures.X12_810[k : k + 80] for k in range(0, len(fixtures.X12_810), 80))
    ic = only(data)
    assert ic.keyable
    assert ic.problems == ()
    assert ic.key == only(fixtures.X12_810).key
    assert ic.fingerprint() == only(fixtures.X12_810).fingerprint()


def test_x12_line_feed_terminator() -> None:
    """A line feed at ISA position 106 is the terminator when no other character follows it."""
    data = fixtures.X12_810.replace(b"~", b"\n")
    ic = only(data)
    assert ic.separators.segment == "\n"
    assert ic.raw == data  # the final terminator belongs to the span
    assert ic.keyable
    assert ic.fingerprint() == only(fixtures.X12_810).fingerprint()


def test_x12_multibyte_terminator() -> None:
    """A terminator that is a multi-byte UTF-8 character (U+2026) is one separator, not its first byte."""
    data = fixtures.X12_810.replace(b"~", "\u2026".encode())
    ic = only(data)
    assert ic.separators.segment == "\u2026"
    assert ic.keyable
    assert ic.fingerprint() == only(fixtures.X12_810).fingerprint()


def test_x12_terminator_at_the_start_of_each_line() -> None:
    """A line break at position 106 followed by `~GS` means the real terminator starts each next line."""
    data = fixtures.X12_810.replace(b"~", b"\n~")[:-2] + b"\n~"
    ic = only(data)
    assert ic.separators.segment == "~"
    assert ic.keyable
    assert any("position 106" in p for p in ic.problems)


def test_x12_isb_ise_and_ta1_are_interchange_level() -> None:
    """ISB/ISE and TA1 may stand between ISA and GS; an IEA01 that counts a TA1 as a group is reported."""
    head = fixtures.X12_810.split(b"GS*")[0]
    data = head + b"ISB*1~ISE*200601*0515*04~TA1*000000050*200229*1200*A*000~IEA*1*000000905~"
    ic = only(data)
    assert ic.groups == ()
    assert ic.keyable
    assert ic.problems == ("IEA01 says 1 groups, interchange 000000905 has 0",)
    assert ic.message_types == ("TA1",)
    assert ic.message().headers["edi-message-types"] == "TA1"


def test_x12_ta1_is_a_message_type_beside_transaction_sets() -> None:
    """A TA1 before the first group is listed among the message types, in order of appearance."""
    head, rest = fixtures.X12_810.split(b"GS*", 1)
    ic = only(head + b"TA1*000000050*200229*1200*A*000~GS*" + rest)
    assert ic.message_types == ("TA1", "810")
    assert [m.type for m in ic.messages] == ["810"]


def test_x12_control_number_and_count_mismatches_are_problems() -> None:
    """IEA02, IEA01, GE01, GE02, SE01 and SE02 mismatches are findings, not exceptions; the key stays."""
    data = (
        fixtures.X12_810.replace(b"SE*12*0001", b"SE*11*0002")
        .replace(b"GE*1*905", b"GE*2*906")
        .replace(b"IEA*1*000000905", b"IEA*2*000000906")
    )
    ic = only(data)
    assert ic.keyable
    assert ic.control_number == "000000905"
    text = "\n".join(ic.problems)
    for needle in ("SE01 says 11", "SE02 says 0002", "GE01 says 2", "GE02 says 906", "IEA01 says 2", "IEA02 says"):
        assert needle in text
    assert [(d.level, d.index, d.code) for d in ic.disagreements] == [
        ("set", 0, "3"),
        ("set", 0, "4"),
        ("group", 0, "4"),
        ("group", 0, "5"),
        ("interchange", 0, "001"),
        ("interchange", 0, "021"),
    ]


def test_x12_missing_trailer_is_not_keyable() -> None:
    """Without IEA the interchange is returned, flagged, and message() refuses to key it."""
    data = fixtures.X12_810.split(b"IEA*")[0]
    ic = only(data)
    assert not ic.keyable
    assert any("no trailer IEA" in p for p in ic.problems)
    with pytest.raises(NotKeyableError, match="cannot be keyed"):
        ic.message()


def test_x12_unterminated_trailer_is_not_keyable() -> None:
    """An IEA cut before its terminator may carry a truncated control number, so it does not count."""
    ic = only(fixtures.X12_810[:-1])
    assert not ic.keyable
    assert any("not terminated" in p for p in ic.problems)


def test_x12_missing_se_is_not_keyable() -> None:
    """A transaction set without SE makes the interchange incomplete even when IEA is present."""
    data = fixtures.X12_810.replace(b"SE*12*0001~", b"")
    ic = only(data)
    assert not ic.keyable
    assert not ic.messages[0].complete
    assert any("has no SE" in p for p in ic.problems)


def test_edifact_level_a_defaults_without_una() -> None:
    """Without UNA, `UNB+` means the level A service characters; UNB fields and release characters are read."""
    ic = only(fixtures.EDIFACT_INVOIC)
    assert ic.standard == "EDIFACT"
    assert ic.separators == Separators(element="+", component=":", segment="'", release="?")
    assert ic.sender == Party("14", "4000001000005")
    assert ic.receiver == Party("14", "4000002000002")
    assert ic.control_number == "INV0000000905"
    assert ic.syntax == "UNOC:3"
    assert ic.prepared_at == datetime(2026, 11, 30, 12, 5)
    assert ic.message_types == ("INVOIC",)
    nad = [s for s in ic.segments if s.tag == "NAD"][1]
    assert nad.get(4) == "HUB+CO AG"
    assert ic.problems == ()


def test_edifact_una_custom_separators_and_hard_wrap() -> None:
    """UNA `=*,! ~` with lines wrapped every 15 characters (inside tags and values) reads the same."""
    ic = only(fixtures.EDIFACT_INVOIC_WRAPPED)
    assert ic.separators == Separators(element="*", component="=", segment="~", release="!", decimal=",")
    assert ic.segments[0].tag == "UNB"  # UNA is service string advice, not a segment
    assert ic.raw.startswith(b"UNA")
    assert ic.keyable
    assert ic.problems == ()
    assert ic.key == only(fixtures.EDIFACT_INVOIC).key


def test_edifact_release_character_inside_unb_is_resolved_for_the_key() -> None:
    """A release character inside the recipient id (`006?415160`) is removed before keying."""
    data = fixtures.edifact_orders(b"77?:1", sender=b"006?415160")
    ic = only(data)
    assert ic.sender == Party("ZZZ", "006415160")
    assert ic.control_number == "77:1"
    assert ic.keyable


@pytest.mark.parametrize(
    ("value", "expected", "segments"),
    [
        (b"A??", "A?", 4),  # `??'`: a literal `?`, then a terminator
        (b"A???'B", "A?'B", 4),  # `???'`: a literal `?'`, no terminator
        (b"A?'", "A'", 4),
    ],
)
def test_edifact_release_parity(value: bytes, expected: str, segments: int) -> None:
    """The parity of a run of release characters decides whether the terminator after it is real."""
    data = fixtures.edifact_orders(b"R1").replace(b"BGM+220+PO-1+9'", b"BGM+220+" + value + b"'")
    ic = only(data)
    assert ic.keyable, ic.problems
    bgm = ic.messages[0].segments[1]
    assert bgm.get(2) == expected
    assert len(ic.messages[0].segments) == segments - 1


def test_edifact_level_b_control_characters() -> None:
    """`UNB` followed by IS3 means the level B separators IS1/IS3/IS4 and no release character."""
    data = fixtures.edifact_orders(b"B1").split(b"'", 1)[1]  # drop the UNA
    data = data.replace(b"+", b"\x1d").replace(b":", b"\x1f").replace(b"'", b"\x1c")
    ic = only(data)
    assert ic.separators == Separators(element="\x1d", component="\x1f", segment="\x1c")
    assert ic.sender == Party("ZZZ", "SENDER")
    assert ic.keyable


def test_edifact_groups_and_counts() -> None:
    """UNG/UNE groups are read; UNZ then counts groups; wrong UNT/UNE/UNZ values are reported."""
    data = (
        b"UNB+UNOA:3+S:14+R:14+261130:1205+G1'"
        b"UNG+ORDERS+S:14+R:14+261130:1205+7+UN+D:96A'"
        b"UNH+1+ORDERS:D:96A:UN'BGM+220+A'UNT+9+1'"
        b"UNH+1+ORDERS:D:96A:UN'BGM+220+B'UNT+3+1'"
        b"UNE+1+8'UNZ+2+G1'"
    )
    ic = only(data)
    assert [(g.type, g.control_number, len(g.messages)) for g in ic.groups] == [("ORDERS", "7", 2)]
    assert [m.index for m in ic.messages] == [0, 1]
    assert [m.control_number for m in ic.messages] == ["1", "1"]  # duplicate references are kept apart
    text = "\n".join(ic.problems)
    assert "UNT 0074 says 9 segments, message 1 (ORDERS #1) has 3" in text
    assert "UNE 0060 says 1 messages, group 7 (ORDERS) has 2" in text
    assert "UNE 0048 says 8, group 7 (ORDERS) has UNG 0048 7" in text
    assert "UNZ 0036 says 2 groups, interchange G1 has 1" in text
    assert ic.keyable


def test_edifact_test_indicator_and_unz_mismatch() -> None:
    """UNB 0035 = 1 marks a test interchange; a UNZ reference unlike the UNB's is a finding, keyed on UNB."""
    data = fixtures.edifact_orders(b"T1").replace(b"+T1'", b"+T1++++++1'", 1).replace(b"UNZ+1+T1", b"UNZ+1+T2")
    ic = only(data)
    assert ic.test
    assert ic.control_number == "T1"
    assert ic.problems == ("UNZ 0020 says T2, interchange T1 has UNB 0020 T1",)


def test_edifact_missing_unz_then_next_interchange() -> None:
    """A truncated interchange followed by a complete one: the first is flagged, the second is keyable."""
    data = fixtures.edifact_orders(b"A1", trailer=False) + b"\r\n" + fixtures.edifact_orders(b"A2")
    first, second = parse(data)
    assert not first.keyable
    assert second.keyable
    assert second.control_number == "A2"
    assert data[second.span[0] : second.span[1]] == fixtures.edifact_orders(b"A2")


@pytest.mark.parametrize("glue", [b"", b"\n", b" \r\n"])
def test_interchange_cut_mid_segment_does_not_swallow_the_next(glue: bytes) -> None:
    """A truncated interchange followed (on the same line or the next) by a complete one leaves that one intact."""
    orders = fixtures.edifact_orders(b"Z1")
    data = fixtures.X12_810[:300] + glue + fixtures.X12_810 + b"\n" + orders[:60] + glue + orders
    found = parse(data)
    assert [(ic.control_number, ic.keyable) for ic in found] == [
        ("000000905", False),
        ("000000905", True),
        ("Z1", False),
        ("Z1", True),
    ]
    assert found[1].raw.startswith(b"ISA")
    assert found[3].raw.startswith(b"UNA")


def test_several_interchanges_with_mixed_standards_and_separators() -> None:
    """A mailbag of X12 and EDIFACT interchanges with different separators yields one key each."""
    parts = [fixtures.X12_810, b"\r\n\x00", fixtures.EDIFACT_INVOIC_WRAPPED, b"\n", fixtures.edifact_orders(b"M3")]
    data = b"".join(parts)
    found = parse(data)
    assert [ic.control_number for ic in found] == ["000000905", "INV0000000905", "M3"]
    assert all(ic.keyable for ic in found)
    for ic in found:
        assert data[ic.span[0] : ic.span[1]] == ic.raw


def test_spans_tile_the_input_with_line_ends() -> None:
    """Each span takes the line end after its trailer, so the payloads of a file concatenate back to it."""
    data = fixtures.X12_810 + b"\r\n" + fixtures.edifact_orders(b"L2") + b"\n" + fixtures.edifact_orders(b"L3") + b"\n"
    assert b"".join(ic.raw for ic in parse(data)) == data


def test_charsets_utf8_and_latin1() -> None:
    """Valid UTF-8 is decoded as UTF-8 whatever UNB declares; other bytes per the declared charset."""
    utf8 = fixtures.edifact_orders(b"C1").replace(b"PO-1", "MÜNCHEN".encode())
    latin = fixtures.edifact_orders(b"C2").replace(b"UNOA", b"UNOC").replace(b"PO-1", "MÜNCHEN".encode("latin-1"))
    assert only(utf8).messages[0].segments[1].get(2) == "MÜNCHEN"
    assert only(latin).messages[0].segments[1].get(2) == "MÜNCHEN"


def test_leading_junk_is_skipped_and_reported() -> None:
    """A non-EDI header line before UNA is skipped, reported, and does not prevent keying."""
    ic = only(b"DOC+01=export+02=x'" + fixtures.edifact_orders(b"J1"))
    assert ic.keyable
    assert ic.span[0] == 19
    assert "19 bytes before the interchange header were skipped" in ic.problems[0]


def test_edifact_without_una_hard_wrapped_at_80_columns_is_keyed() -> None:
    """No UNA, wrapped at 80 columns so a line starts with "EAN+1" (a UNB value): keyed, invoices read, and the
    fingerprint of the unwrapped interchange; segments end at apostrophes, not at line breaks."""
    ic = only(fixtures.EDIFACT_INVOIC_WRAPPED_80)
    assert b"\r\nEAN+1'" in fixtures.EDIFACT_INVOIC_WRAPPED_80
    assert ic.keyable, ic.problems
    assert ic.problems == ()
    assert ic.separators.segment == "'"
    assert ic.fingerprint() == only(fixtures.EDIFACT_INVOIC_WRAPPED_80.replace(b"\r\n", b"")).fingerprint()
    assert [i.total for i in ic.invoices()] == [Decimal("119.60")]


def test_line_feeds_instead_of_terminators_are_read_but_never_keyed() -> None:
    """No UNA and no apostrophes, segments on lines: read (for operators) but never keyed."""
    data = b"UNB+UNOA:1+S:14+R:14+180525:2030+2216\nUNH+1+IFCSUM:D:01B:UN\nBGM+610+1\nUNT+3+1\nUNZ+1+2216\n"
    ic = only(data)
    assert ic.control_number == "2216"
    assert not ic.keyable
    with pytest.raises(NotKeyableError):
        ic.message()


@pytest.mark.parametrize(
    ("data", "offset", "index", "words"),
    [
        (b"", 0, None, "empty"),
        (b"  \r\n\x00", 0, None, "empty"),
        (b"hello world", 0, None, "not an interchange"),
        (fixtures.X12_810 + b"garbage", len(fixtures.X12_810), None, "after the last interchange"),
        (b"ISA*00*    ", 0, 0, "truncated"),
        (b"ISA000", 0, None, "not an interchange"),
        (b"UNB#UNOA:1+A+B+1:1+1'", 3, 0, "level A"),
        (b"UNA:+.? 'UNB+UNOA:1+A+B+260101:1200+1", 9, 0, "not terminated"),
    ],
)
def test_bad_input_raises_edi_syntax_error_with_position(
    data: bytes, offset: int, index: int | None, words: str
) -> None:
    """Unreadable bytes raise EdiSyntaxError with the byte offset, the segment index and a sentence."""
    with pytest.raises(EdiSyntaxError, match=words) as caught:
        parse(data)
    assert caught.value.offset == offset
    assert caught.value.segment_index == index
    assert f"at byte {offset}" in str(caught.value)


def test_segment_without_a_tag_is_found_and_never_keyed() -> None:
    """A segment whose tag is not 2-3 letters or digits is reported with its byte offset; the key is refused."""
    ic = only(fixtures.X12_810.replace(b"BIG*", b"BI G*"))
    assert not ic.keyable
    assert any(p.startswith("segment 3 at byte 160 ('BI G*") for p in ic.problems)
    with pytest.raises(NotKeyableError, match="does not start with a tag"):
        ic.message()


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (fixtures.X12_810.replace(b"*000000905*0*P", b"*\x00000000905*0*P", 1), "control number cannot be"),
        (fixtures.edifact_orders(b"R" * 600), "control number cannot be"),
        (fixtures.edifact_orders(b"R1", sender=b"S" * 600), "source cannot be an inbox key"),
    ],
)
def test_control_number_or_source_that_cannot_be_a_key_is_never_keyed(data: bytes, words: str) -> None:
    """A NUL in the control number, or a control number or sender over the key limit: reported, not keyed, and
    message() raises NotKeyableError (an EdiSyntaxError), never the inbox's LimitError."""
    ic = only(data)
    assert not ic.keyable
    assert any(words in p for p in ic.problems)
    with pytest.raises(NotKeyableError, match=words):
        ic.message()


def test_edi_syntax_error_is_a_data_error_not_an_inbox_error() -> None:
    """EdiSyntaxError is a ValueError about the payload, outside the InboxError tree that callers treat as
    edinbox's own failures (a database or broker down); NotKeyableError is an EdiSyntaxError."""
    assert not issubclass(EdiSyntaxError, InboxError)
    assert issubclass(EdiSyntaxError, ValueError)
    assert issubclass(NotKeyableError, EdiSyntaxError)


def test_parse_refuses_text() -> None:
    """parse() takes bytes; text is a programming error, not bad EDI."""
    with pytest.raises(TypeError):
        parse("ISA*")  # type: ignore[arg-type]
