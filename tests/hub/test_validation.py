"""The hub validates per agreement: `validate = "report"` accepts with errors listed in the 997, "strict" parks the
interchange with its first error in words and every finding in its rejection, "off" checks nothing; overlays and bad
terms are configuration; a TA1 and its 997 are one outgoing interchange."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from edinbox import ConfigurationError, edi
from edinbox.hub import HubConfig, load_config, open_hub
from edinbox.hub.config import Route
from edinbox.hub.config._model import Agreement
from edinbox.hub.deliveries._items import Item, plan
from edinbox.hub.demo._traffic import render
from edinbox.hub.ops._ops import render_shown
from edinbox.hub.partners._acks import Pending, _together
from edinbox.sources import Delivery
from edinbox.sources.spool import publish
from hub_ops import show, stats
from received import drain

from .test_hub import X12, doc

PARTY = "ZZ:ACME"
GOOD = (
    b"ISA*00*          *00*          *ZZ*ACME           *ZZ*HUB            *261130*1205*U*00401*000000905*1*P*>~"
    b"GS*IN*ACME*HUB*20261130*1205*905*X*004010~ST*810*0001~BIG*20261130*INV-905*****DI~CUR*SE*EUR~"
    b"N1*SE*ACME GMBH*92*4000001000005~N1*BY*HUB AG*92*4000002000002~IT1*1*2*EA*50.00**VP*W-1~TDS*10000~CTT*1~"
    b"SE*9*0001~GE*1*905~IEA*1*000000905~"
)
BAD_CODE = GOOD.replace(b"*****DI~", b"*****QQ~")


def planned(payload: bytes, **terms: Any) -> Item:
    """The one item the hub plans for `payload` under an agreement for ACME with `terms`."""
    agreement = Agreement(outbound="dir:///tmp/out", **terms)
    delivery = Delivery(payload, message_id="m1", coordinates="q#1", source="amqp:q")
    (item,) = plan(delivery, HubConfig(partners={PARTY: agreement}))
    return item


def ack(item: Item, kind: str = "997") -> bytes:
    """The acknowledgment `kind` the hub would send for a planned item."""
    assert item.received is not None
    found = item.received
    return edi.render_reply(edi.replies(found, kind), found, sender=found.receiver, control_number="7", when=WHEN)


WHEN = datetime(2026, 12, 3)


def test_report_accepts_with_the_errors_listed() -> None:
    """Under "report" a bad BIG07 code is booked (inbox route, its invoice read) and its 997 says AK4 7 and AK5 E."""
    item = planned(BAD_CODE, validate="report")
    assert item.route == "inbox"
    assert len(item.invoices) == 1
    assert b"AK3*BIG*2**8~AK4*7*640*7*QQ~AK5*E*5~AK9*E*1*1*1~" in ack(item)


def test_strict_parks_with_the_first_error_and_rejects_with_every_finding() -> None:
    """Under "strict" the same interchange is parked, its reason naming the error, and its 997 rejects the set with
    the AK3/AK4 of each finding; a clean one goes through; "off" checks nothing."""
    item = planned(BAD_CODE.replace(b"BIG*20261130", b"BIG*20261332"), validate="strict")
    assert item.route == Route.REJECT
    assert "it breaks its implementation guide: 2 errors; the first in 810 0001: BIG01 (373)" in item.reason
    assert "invalid date '20261332'" in item.reason
    assert b"AK3*BIG*2**8~AK4*1*373*8*20261332~AK4*7*640*7*QQ~AK5*R*5~AK9*R*1*1*0~" in ack(item)
    assert planned(GOOD, validate="strict").route == "inbox"
    assert b"AK5*A~" in ack(planned(BAD_CODE))


def test_an_overlay_requires_a_po_number() -> None:
    """An agreement requiring BIG04 (the PO number) rejects an invoice without one under "strict", its reason naming
    the element; a missing segment is named as such."""
    item = planned(GOOD, validate="strict", require="BIG04")
    assert item.route == Route.REJECT
    assert item.reason.endswith("1 error; the first in 810 0001: BIG04 (324) in segment 2: missing")
    assert b"AK3*BIG*2**8~AK4*4*324*1~AK5*R*5~" in ack(item)
    item = planned(GOOD.replace(b"TDS*10000~", b"").replace(b"SE*9*", b"SE*8*"), validate="strict")
    assert item.reason.endswith("the first in 810 0001: TDS (segment 7): mandatory segment missing")


def test_the_terms_are_checked_and_read_from_toml(tmp_path: Path) -> None:
    """A bad `validate` value or overlay is a configuration error naming it; the TOML agreement carries them."""
    with pytest.raises(ConfigurationError, match="validate must be one of off, report, strict"):
        Agreement(validate="loose")
    with pytest.raises(ConfigurationError, match="require: 'PO-number'"):
        Agreement(require="PO-number")
    path = tmp_path / "hub.toml"
    path.write_text(f'[partners."{PARTY}"]\nvalidate = "strict"\nrequire = "BIG04, RFF+ON"\nallow = "REF*20"\n')
    agreement = load_config(path).agreement(PARTY)
    assert agreement.validate == "strict"
    assert agreement.overlay == edi.Overlay.parse("BIG04 RFF+ON", "REF*20")


def test_a_ta1_and_its_997_go_out_together() -> None:
    """The TA1 and 997 pending for one interchange make one outgoing interchange; a duplicate notice or another
    interchange's reply goes alone."""
    found = planned(GOOD).received
    assert found is not None
    key = ("X12:ZZ:ACME>ZZ:HUB", "000000905")
    pending = [
        Pending(found, kind, duplicate, k, found.receiver, "dir:///tmp/out")
        for kind, duplicate, k in (
            ("TA1", False, key),
            ("997", False, key),
            ("TA1", True, key),
            ("997", False, ("x", "1")),
        )
    ]
    assert [[p.kind for p in group] for group in _together(pending)] == [["TA1", "997"], ["TA1"], ["997"]]


@pytest.mark.parametrize("hub_config", ["sqlite"], indirect=True)
async def test_the_hub_books_and_reports_or_parks_and_rejects(hub_config: HubConfig, tmp_path: Path) -> None:
    """A running hub under "report" books an 810 with a bad BIG07 and sends one interchange holding its TA1 and a 997
    with AK4 7 and AK5 E; under "strict" the next such 810 is parked and its 997 rejects it with the same AK4."""
    out = tmp_path / "out"
    agreement = Agreement(outbound=f"dir://{out}/{{id}}", validate="report")
    config = hub_config.with_overrides(partners={"*": agreement})
    bad = [render(replace(doc(control=f"00000090{n}", number=f"V-{n}"), ack_requested=True)) for n in (1, 2)]
    bad = [data.replace(b"*****DI~", b"*****QQ~") for data in bad]
    for data, mode in zip(bad, ("report", "strict"), strict=True):
        await publish(config.source, [(mode, data)])
        strict = config.with_overrides(partners={"*": replace(agreement, validate=mode)})
        async with open_hub(strict) as hub:
            await hub.run(once=True)
    delivered = await drain(f"dir://{out / X12.id}", consumer="partner", idle=0.5)
    replies = {i.segments[1].get(1): i for _, payload in delivered for i in edi.parse(payload)}
    assert [r.message_types for r in replies.values()] == [("TA1", "997")] * 2
    texts = {key.split("*")[0]: r.raw for key, r in replies.items()}
    assert b"AK4*7*640*7*QQ~AK5*E*5~AK9*E*1*1*1~" in texts["000000901"]
    assert b"AK4*7*640*7*QQ~AK5*R*5~AK9*R*1*1*0~" in texts["000000902"]
    counts = await stats(config)
    assert (counts["processed"], counts["rejected"], counts["invoices"]) == (1, 1, 1)
    shown = await show(config, f"X12:{X12.qualifier}:{X12.id}>ZZ:EDINBOXHUB/000000902")
    assert shown is not None
    assert [a["kind"] for a in shown["acknowledgments"]] == ["TA1+997"]


@pytest.mark.parametrize("hub_config", ["sqlite", "postgresql", "mysql"], indirect=True)
async def test_what_validation_found_is_kept_with_the_key(hub_config: HubConfig) -> None:
    """The findings of a validated interchange are kept in the transaction that settles it: `show` gives "validated"
    with the error count and each finding (its message, segment, element, code and value), for a booked one
    ("report"), a parked one ("strict") and a clean one (no errors); an interchange not validated has none."""
    agreement = Agreement(validate="report")
    sent = [render(doc(control=f"00000091{n}", number=f"W-{n}")) for n in range(4)]
    sent[0] = sent[0].replace(b"*****DI~", b"*****QQ~")
    sent[1] = sent[1].replace(b"*****DI~", b"*****QQ~")
    for data, mode in zip(sent, ("report", "strict", "report", "off"), strict=True):
        await publish(hub_config.source, [(mode, data)])
        config = hub_config.with_overrides(partners={"*": replace(agreement, validate=mode)})
        async with open_hub(config) as hub:
            await hub.run(once=True)
    key = f"X12:{X12.qualifier}:{X12.id}>ZZ:EDINBOXHUB/00000091"
    shown = [await show(hub_config, f"{key}{n}") for n in range(4)]
    assert None not in shown
    booked, parked, clean, unchecked = (one or {} for one in shown)
    assert (booked["status"], parked["status"]) == ("processed", "parked")
    expected = {
        "message": "0001",
        "type": "810",
        "position": 2,
        "segment": "BIG",
        "loop": "",
        "element": 7,
        "component": 0,
        "reference": "640",
        "code": "7",
        "segment_code": "8",
        "value": "QQ",
    }
    for one in (booked, parked):
        assert one["validated"]["errors"] == 1
        assert one["validated"]["findings"] == [expected]
    assert clean["validated"]["errors"] == 0
    assert clean["validated"]["findings"] == []
    assert "validated" not in unchecked
    text = render_shown(booked)
    assert "validated: 1 error\n  810 0001: BIG07 (640) in segment 2: invalid code value 'QQ'" in text
