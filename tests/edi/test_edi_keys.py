"""Inbox keys: the source string, the message id and the fingerprint of normalised segments."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from decimal import Decimal

import edi_fixtures as fixtures
import pytest

from edinbox import Message
from edinbox.edi import Invoice, InvoiceLine, InvoiceParty, Party, Separators, _key, parse, render_invoice

INVOICE = Invoice(
    number="INV-7",
    issue_date=date(2026, 11, 30),
    kind="invoice",
    seller=InvoiceParty("4000001000005", "ACME GMBH"),
    buyer=InvoiceParty("4000002000002", "HUB AG"),
    currency="EUR",
    total=Decimal("119.00"),
    tax_total=Decimal("19.00"),
    lines=[InvoiceLine(Decimal("2"), Decimal("50.00"), Decimal("100.00"), item="W-1")],
)


def test_message_carries_key_payload_and_fingerprint() -> None:
    """message() keys on the control number and the parties, and carries the interchange's own bytes."""
    data = b"\xef\xbb\xbf\n" + fixtures.X12_810 + b"\r\n"
    ic = parse(data)[0]
    message = ic.message()
    assert isinstance(message, Message)
    assert message.message_id == "000000905"
    assert message.source == "X12:ZZ:ACME>ZZ:HUB"
    assert message.payload == fixtures.X12_810 + b"\r\n"  # the span takes the line end after the trailer
    assert message.fingerprint == ic.fingerprint()
    assert message.headers == {
        "content-type": "application/EDI-X12",
        "edi-standard": "X12",
        "edi-message-types": "810",
        "edi-test": "0",
    }


def test_source_marks_test_interchanges_and_escapes_ids() -> None:
    """A test interchange gets `;test`; reserved characters in ids are percent-encoded, zeros kept."""
    data = fixtures.edifact_orders(b"0042", sender=b"A?:B>C;D E").replace(b"+0042'", b"+0042++++++1'", 1)
    ic = parse(data)[0]
    assert ic.sender == Party("ZZZ", "A:B>C;D E")
    assert ic.source == "EDIFACT:ZZZ:A%3AB%3EC%3BD%20E>ZZZ:HUB;test"
    assert ic.message().message_id == "0042"


def test_rewritten_interchange_has_same_key_and_fingerprint() -> None:
    """Other separators, CRLF terminators, NBSP padding, TABs, trailing empty elements and a BOM change nothing."""
    first, second = parse(fixtures.X12_810)[0], parse(fixtures.X12_810_REWRITTEN)[0]
    assert first.key == second.key
    assert first.fingerprint() == second.fingerprint()
    assert first.raw != second.raw


def test_edifact_rewritten_with_una_comma_decimals_and_wrap_has_same_fingerprint() -> None:
    """UNA separators, comma decimal marks, another release character and hard wrapping change nothing."""
    first, second = parse(fixtures.EDIFACT_INVOIC)[0], parse(fixtures.EDIFACT_INVOIC_WRAPPED)[0]
    assert first.key == second.key
    assert first.fingerprint() == second.fingerprint()


@pytest.mark.parametrize("chunk", [1, 2, 3, 7])
def test_fingerprint_hashed_in_chunks_is_the_fingerprint_of_the_whole(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The segments are hashed a few thousand at a time (no second copy of a big interchange): any chunk size gives
    the digest of the whole text normalised at once (decimal commas, trailing separators, the X12 ISA included)."""
    samples = [
        fixtures.X12_810,
        fixtures.X12_810_REWRITTEN,
        fixtures.EDIFACT_INVOIC,
        fixtures.EDIFACT_INVOIC_WRAPPED,
        b"UNA:+,? 'UNB+UNOC:3+A:14+B:14+261130:1205+1'UNH+1+INVOIC:D:96A:UN'MOA+77:12,5'QTY+47:,5::'"
        b"FTX+++-3,25+x::'UNT+5+1'UNZ+1+1'",
    ]
    whole = [parse(data)[0].fingerprint() for data in samples]
    monkeypatch.setattr(_key, "_CHUNK", chunk)
    assert [parse(data)[0].fingerprint() for data in samples] == whole


def test_changed_amount_keeps_key_and_changes_fingerprint() -> None:
    """A partner re-using a control number with another amount: same key, another fingerprint (a conflict)."""
    changed = fixtures.X12_810.replace(b"TDS*11960", b"TDS*11961")
    first, second = parse(fixtures.X12_810)[0], parse(changed)[0]
    assert first.key == second.key
    assert first.fingerprint() != second.fingerprint()


def test_receiver_and_test_flag_are_part_of_the_key() -> None:
    """The same sender and number to another receiver, or as a test, is another interchange."""
    base = parse(fixtures.X12_810)[0]
    other = parse(fixtures.X12_810.replace(b"*ZZ*HUB    ", b"*ZZ*HUB2   "))[0]
    test = parse(fixtures.X12_810.replace(b"*0*P*>", b"*0*T*>"))[0]
    assert len({base.key, other.key, test.key}) == 3
    assert test.source.endswith(";test")


@pytest.mark.parametrize("standard", ["X12", "EDIFACT"])
@pytest.mark.parametrize(
    "variant",
    [
        {"line_break": "\r\n"},
        {"line_break": "\n", "bom": True},
        {"wrap": 15},
        {"isa_padding": "\u00a0", "decimal_mark": ","},
        {"isa_padding": ""},
    ],
)
def test_renderings_share_key_and_fingerprint(standard: str, variant: dict[str, object]) -> None:
    """Renderings of one invoice that differ only in layout are one key and one fingerprint."""
    parties = {"sender": Party("ZZ", "ACME"), "receiver": Party("ZZ", "HUB"), "control_number": "000000077"}
    plain = parse(render_invoice(INVOICE, standard=standard, **parties))[0]  # type: ignore[arg-type]
    other = parse(render_invoice(INVOICE, standard=standard, **parties, **variant))[0]  # type: ignore[arg-type]
    assert other.keyable
    assert other.key == plain.key
    assert other.fingerprint() == plain.fingerprint()


def test_renderings_with_other_separators_share_fingerprint() -> None:
    """Custom separators (and, in EDIFACT, another release character) keep the fingerprint."""
    parties = {"sender": Party("14", "S"), "receiver": Party("14", "R"), "control_number": "9"}
    for standard, seps in (
        ("X12", Separators(element="|", component="^", segment="\n")),
        ("EDIFACT", Separators(element="*", component="=", segment="~", release="!")),
    ):
        plain = parse(render_invoice(INVOICE, standard=standard, **parties))[0]  # type: ignore[arg-type]
        other = parse(render_invoice(INVOICE, standard=standard, separators=seps, **parties))[0]  # type: ignore[arg-type]
        assert other.separators.element == seps.element
        assert other.fingerprint() == plain.fingerprint()


def test_changed_invoice_value_changes_fingerprint_of_rendering() -> None:
    """A re-rendering with one changed amount keeps the key and changes the fingerprint."""
    parties = {"sender": Party("14", "S"), "receiver": Party("14", "R"), "control_number": "9"}
    for standard in ("X12", "EDIFACT"):
        plain = parse(render_invoice(INVOICE, standard=standard, **parties))[0]  # type: ignore[arg-type]
        dearer = replace(INVOICE, total=Decimal("119.01"))
        other = parse(render_invoice(dearer, standard=standard, **parties))[0]  # type: ignore[arg-type]
        assert other.key == plain.key
        assert other.fingerprint() != plain.fingerprint()
