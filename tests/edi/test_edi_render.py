"""The writer beyond invoices: acknowledgments, cut trailers, and the mixes X12 cannot carry."""

from __future__ import annotations

from datetime import datetime

import pytest
from edi_fixtures import ACME, HUB, INVOICE

from edinbox.edi import Acknowledgment, Party, Separators, parse, render_interchange

WHEN = datetime(2026, 12, 2, 9, 30)
ACK = Acknowledgment("000000905", sender=HUB, receiver=ACME)


@pytest.mark.parametrize(("standard", "kind", "group"), [("X12", "997", "FA"), ("EDIFACT", "CONTRL", None)])
def test_acknowledgment_is_a_keyable_interchange_of_its_type(standard: str, kind: str, group: str | None) -> None:
    """An acknowledgment renders as a complete 997 (group FA) or CONTRL that parses without problems."""
    seps = Separators("|", "^", "!", release="?") if standard == "EDIFACT" else None
    data = render_interchange(
        [ACK],
        standard=standard,
        sender=ACME,
        receiver=HUB,
        control_number="000000042",
        prepared_at=WHEN,
        separators=seps,
    )
    [ic] = parse(data)
    assert ic.keyable
    assert not ic.problems
    assert [m.type for m in ic.messages] == [kind]
    assert ic.invoices() == []
    if group:
        assert [g.type for g in ic.groups] == [group]


def test_contrl_names_the_acknowledged_interchange_escaped() -> None:
    """The UCI segment carries the acknowledged control number and parties, release characters included."""
    ack = Acknowledgment("IC+1", sender=Party("ZZZ", "O'NEILL"), receiver=ACME)
    data = render_interchange(
        [ack], standard="EDIFACT", sender=ACME, receiver=HUB, control_number="7", prepared_at=WHEN
    )
    assert b"UCI+IC?+1+O?'NEILL:ZZZ+ACME:ZZ+7'" in data
    [ic] = parse(data)
    uci = next(s for s in ic.messages[0].segments if s.tag == "UCI")
    assert (uci.get(1), uci.get(2), uci.get(3)) == ("IC+1", "O'NEILL", "ACME")


@pytest.mark.parametrize("standard", ["X12", "EDIFACT"])
def test_without_trailer_the_interchange_is_read_but_never_keyed(standard: str) -> None:
    """trailer=False leaves out IEA / UNZ, and the parser reports the interchange as not keyable."""
    data = render_interchange(
        [INVOICE], standard=standard, sender=ACME, receiver=HUB, control_number="5", trailer=False
    )
    assert not data.rstrip().endswith((b"IEA*1*000000005~", b"UNZ+1+5'"))
    [ic] = parse(data)
    assert not ic.keyable


def test_x12_refuses_invoices_and_acknowledgments_in_one_interchange() -> None:
    """One X12 functional group carries one kind of transaction set, so a mix is a ValueError."""
    with pytest.raises(ValueError, match="one functional group"):
        render_interchange([INVOICE, ACK], standard="X12", sender=ACME, receiver=HUB, control_number="5")


def test_acknowledgments_alone_need_prepared_at() -> None:
    """Without an invoice to date it, the writer asks for prepared_at instead of inventing a date."""
    with pytest.raises(ValueError, match="prepared_at"):
        render_interchange([ACK], standard="EDIFACT", sender=ACME, receiver=HUB, control_number="5")
