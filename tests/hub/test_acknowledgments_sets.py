"""Acknowledgments per transaction set: an interchange of several invoices (several ST..SE in one GS, several
UNH..UNT) is booked whole or parked whole, and its 997 / 999 / CONTRL answers each set (AK2 + AK5 / IK5, UCM)."""

from __future__ import annotations

from pathlib import Path

from edinbox import edi
from edinbox.hub import HubConfig
from edinbox.hub.config._model import Agreement
from edinbox.hub.demo._traffic import Doc, hub_party
from edinbox.sources.spool import publish
from hub_ops import show, stats

from .test_acknowledgments import EDIFACT, GLOBEX, X12, received, settle
from .test_hub import doc
from .test_rejections import segments


def interchange(docs: list[Doc], *, bad: int | None = None) -> tuple[bytes, str]:
    """The invoices of `docs` (one partner) as one interchange asking for an acknowledgment, one message each (X12:
    ST..SE in one GS); `bad` spoils that invoice (X12: an impossible BIG01 date; EDIFACT: no DTM+137). Also returns
    the interchange's inbox key."""
    first = docs[0]
    partner = first.partner
    data = edi.render_interchange(
        [d.document() for d in docs],
        standard=partner.standard,
        sender=partner.party,
        receiver=hub_party(partner.standard),
        control_number=first.control,
        prepared_at=first.prepared,
        ack_requested=True,
    )
    if bad is not None:
        tag, spoiled = (b"BIG*", b"20261399") if partner.standard == "X12" else (b"DTM+137:", b"DTM+9:")
        at = -1
        for _ in range(bad + 1):
            at = data.index(tag, at + 1)
        if partner.standard == "X12":  # BIG01 is the 8 digits after the tag
            data = data[: at + len(tag)] + spoiled + data[at + len(tag) + 8 :]
        else:
            data = data[:at] + spoiled + data[at + len(tag) :]
    (parsed,) = edi.parse(data)
    return data, f"{parsed.source}/{parsed.control_number}"


def invoices(partner: object, control: str, prefix: str) -> list[Doc]:
    """Three invoices of `partner` for one interchange with control number `control`."""
    return [doc(partner=partner, control=control, number=f"{prefix}-{n}") for n in (1, 2, 3)]


def sets(replies: list[edi.Interchange], group: str) -> list[tuple[str, ...]]:
    """The AK1 .. AK9 segments of the 997 / 999 that answers the functional group `group` (GS06)."""
    (reply,) = [r for r in replies if any(ak1[:2] == ("IN", group) for ak1 in segments([r], "AK1"))]
    return [
        (s.tag, *(e[0] if e else "" for e in s.elements))
        for s in reply.segments
        if s.tag in ("AK2", "AK5", "IK5", "AK9")
    ]


async def test_one_bad_set_parks_its_interchange_and_each_set_is_answered(
    hub_config: HubConfig, tmp_path: Path
) -> None:
    """Beside three-invoice interchanges that are booked whole (997 AK5 A for each set, AK9 A 3 3 3; CONTRL UCI 7
    with no UCM), three-invoice interchanges with one bad invoice (the middle 810, the last 810 of a 999 partner,
    the first INVOIC) book none of their invoices; the 997 rejects every set and gives code 5 to the bad one only
    (AK9 R 3 3 0), the 999 gives IK5 R 5 to every set, the TA1 accepts the envelope, and the CONTRL is UCI 4 with
    one UCM 4 12, for the bad message."""
    out = tmp_path / "out"
    outbound = f"dir://{out}/{{id}}"
    config = hub_config.with_overrides(
        partners={
            "*": Agreement(outbound=outbound),
            f"{GLOBEX.qualifier}:{GLOBEX.id}": Agreement(outbound=outbound, acknowledgment="999"),
        }
    )
    good_x12, good_key = interchange(invoices(X12, "000000301", "G"))
    bad_x12, bad_key = interchange(invoices(X12, "000000302", "B"), bad=1)
    bad_999, _ = interchange(invoices(GLOBEX, "000000303", "C"), bad=2)
    good_edifact, _ = interchange(invoices(EDIFACT, "IC301", "E"))
    bad_edifact, _ = interchange(invoices(EDIFACT, "IC302", "F"), bad=0)
    payloads = [good_x12, bad_x12, bad_999, good_edifact, bad_edifact]
    await publish(config.source, [(f"f{n}", p) for n, p in enumerate(payloads)])
    totals = await settle(config)
    assert (totals["processed"], totals["rejected"]) == (2, 3)
    assert (await stats(config))["invoices"] == 6

    good, bad = await show(config, good_key), await show(config, bad_key)
    assert good is not None
    assert bad is not None
    assert sorted(i["number"] for i in good["invoices"]) == ["G-1", "G-2", "G-3"]
    assert (bad["status"], bad["invoices"]) == ("parked", [])

    replies = await received(out / X12.id)
    assert sorted(segments(replies, "TA1")) == [
        ("000000301", "261202", "0930", "A", "000"),
        ("000000302", "261202", "0930", "A", "000"),
    ]
    ok = [("AK2", "810", f"000{n}") for n in (1, 2, 3)]
    assert sets(replies, "301") == [x for ak2 in ok for x in (ak2, ("AK5", "A"))] + [("AK9", "A", "3", "3", "3")]
    assert sets(replies, "302") == [
        ok[0],
        ("AK5", "R"),
        ok[1],
        ("AK5", "R", "5"),
        ok[2],
        ("AK5", "R"),
        ("AK9", "R", "3", "3", "0"),
    ]
    (reply_999,) = [r for r in await received(out / GLOBEX.id) if "999" in r.message_types]
    assert [s for s in sets([reply_999], "303") if s[0] == "IK5"] == [("IK5", "R", "5")] * 3
    assert sets([reply_999], "303")[-1] == ("AK9", "R", "3", "3", "0")

    by_subject = {segments([r], "UCI")[0][0]: r for r in await received(out / EDIFACT.id)}
    assert sorted(by_subject) == ["IC301", "IC302"]
    assert segments([by_subject["IC301"]], "UCI") == [("IC301", EDIFACT.id, "EDINBOXHUB", "7")]
    assert segments([by_subject["IC301"]], "UCM") == []
    assert segments([by_subject["IC302"]], "UCI") == [("IC302", EDIFACT.id, "EDINBOXHUB", "4")]
    assert segments([by_subject["IC302"]], "UCM") == [("1", "INVOIC", "4", "12")]
