"""An interchange whose trailers disagree with its content (SE/GE/IEA, UNT/UNE/UNZ counts and control numbers) is
parked whole and booked never: its acknowledgment rejects it, so the partner sends a corrected one under a new key,
and that one alone creates the invoice. Its good neighbours go through, and it is parked whatever the agreements."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import pytest

from edinbox import edi
from edinbox.hub import HubConfig
from edinbox.hub.demo._traffic import render
from edinbox.sources.spool import publish
from hub_ops import list_rows, stats

from .test_acknowledgments import EDIFACT, X12, agreed, received, settle
from .test_hub import doc
from .test_rejections import segments

PREFIX = "a trailer disagrees with the interchange: "
UNG = b"UNG+INVOIC+8712345678910:14+EDINBOXHUB:ZZZ+261202:0930+G1+UN+D:96A'\n"


def x12(control: str, old: bytes = b"", new: bytes = b"") -> bytes:
    """An 810 interchange of the X12 partner (GS06 = the control number's value), with `old` replaced by `new`."""
    data = render(doc(control=control, number=f"T-{control}"))
    return _changed(data, old.replace(b"@", str(int(control)).encode()), new.replace(b"@", str(int(control)).encode()))


def edifact(control: str, old: bytes = b"", new: bytes = b"", *, grouped: bool = False) -> bytes:
    """An INVOIC interchange of the EDIFACT partner (in a UNG group G1 when `grouped`), `old` replaced by `new`."""
    data = render(doc(partner=EDIFACT, control=control, number=f"T-{control}"))
    if grouped:
        data = _changed(data, b"UNH+1+", UNG + b"UNH+1+")
        data = _changed(data, f"UNZ+1+{control}'".encode(), f"UNE+1+G1'\nUNZ+1+{control}'".encode())
    return _changed(data, old.replace(b"@", control.encode()), new.replace(b"@", control.encode()))


def _changed(data: bytes, old: bytes, new: bytes) -> bytes:
    if not old:
        return data
    assert data.count(old) == 1, old
    return data.replace(old, new)


BAD_X12 = {
    "000000601": (b"SE*11*0001~", b"SE*12*0001~", "SE01 says 12 segments, transaction set 0001 (810 #1) has 11"),
    "000000602": (b"SE*11*0001~", b"SE*11*0002~", "SE02 says 0002, transaction set 0001 (810 #1) has ST02 0001"),
    "000000603": (b"GE*1*@~", b"GE*2*@~", "GE01 says 2 transaction sets, group 603 (IN) has 1"),
    "000000604": (b"GE*1*@~", b"GE*1*999~", "GE02 says 999, group 604 (IN) has GS06 604"),
    "000000605": (b"IEA*1*", b"IEA*2*", "IEA01 says 2 groups, interchange 000000605 has 1"),
    "000000606": (
        b"IEA*1*000000606",
        b"IEA*1*000000699",
        "IEA02 says 000000699, interchange 000000606 has ISA13 000000606",
    ),
}
"""Each X12 disagreement: control number -> (old, new, the sentence its reason ends with); @ is GS06."""

EXPECTED_X12 = {  # control number -> (TA1 status and note, AK5 of its set, AK9)
    "000000601": (("A", "000"), ("R", "4"), ("R", "1", "1", "0")),
    "000000602": (("A", "000"), ("R", "3"), ("R", "1", "1", "0")),
    "000000603": (("A", "000"), ("R",), ("R", "1", "1", "0", "5")),
    "000000604": (("A", "000"), ("R",), ("R", "1", "1", "0", "4")),
    "000000605": (("R", "021"), ("R",), ("R", "1", "1", "0")),
    "000000606": (("R", "001"), ("R",), ("R", "1", "1", "0")),
}

BAD_EDIFACT = {
    "IC611": (b"UNT+18+1'", b"UNT+17+1'", False, "UNT 0074 says 17 segments, message 1 (INVOIC #1) has 18"),
    "IC612": (b"UNT+18+1'", b"UNT+18+2'", False, "UNT 0062 says 2, message 1 (INVOIC #1) has UNH 0062 1"),
    "IC613": (b"UNZ+1+@'", b"UNZ+2+@'", False, "UNZ 0036 says 2 messages, interchange IC613 has 1"),
    "IC614": (b"UNZ+1+@'", b"UNZ+1+IC699'", False, "UNZ 0020 says IC699, interchange IC614 has UNB 0020 IC614"),
    "IC615": (b"UNE+1+G1'", b"UNE+2+G1'", True, "UNE 0060 says 2 messages, group G1 (INVOIC) has 1"),
    "IC616": (b"UNE+1+G1'", b"UNE+1+G9'", True, "UNE 0048 says G9, group G1 (INVOIC) has UNG 0048 G1"),
}
"""Each EDIFACT disagreement: control number -> (old, new, in a UNG group, the sentence); @ is UNB 0020."""

EXPECTED_EDIFACT = {  # control number -> the UCI action and code, UCF and UCM after the control number
    "IC611": (("4",), [], [("1", "INVOIC", "4", "29")]),
    "IC612": (("4",), [], [("1", "INVOIC", "4", "28")]),
    "IC613": (("4", "29"), [], []),
    "IC614": (("4", "28"), [], []),
    "IC615": (("4",), [("G1", "", "", "4", "29")], []),
    "IC616": (("4",), [("G1", "", "", "4", "28")], []),
}


def broken() -> dict[str, bytes]:
    """Every interchange with a disagreeing trailer, by control number."""
    found = {c: x12(c, old, new) for c, (old, new, _) in BAD_X12.items()}
    found |= {c: edifact(c, old, new, grouped=g) for c, (old, new, g, _) in BAD_EDIFACT.items()}
    return found


async def reasons(config: HubConfig) -> list[str]:
    """The reasons of the parked payloads."""
    return [row["reason"] for row in await list_rows(config, status="rejected", limit=100)]


async def test_disagreeing_trailers_park_the_interchange_with_one_rejection(
    hub_config: HubConfig, tmp_path: Path
) -> None:
    """Each kind of disagreement (SE01, SE02, GE01, GE02, IEA01, IEA02; UNT count and reference, UNZ, UNE) parks
    its interchange with its sentence as the reason and creates no invoice; each gets exactly one rejection with
    that code (TA1 R 021 / 001, AK5 R 3 / 4, AK9 R 4 / 5; CONTRL UCI 4 28 / 29, UCF 4, UCM 4), read back by our
    parser, pyx12 and pydifact; the good interchange in the same file as a bad one, and the correct ones, are
    processed and accepted; the corrected re-send under a new key books the invoice once."""
    out = tmp_path / "out"
    config = agreed(hub_config, out, ta1="always")
    bad = broken()
    good = {"000000620": x12("000000620"), "IC621": edifact("IC621"), "IC622": edifact("IC622", grouped=True)}
    lenient = x12("000000623", b"SE*11*0001~\nGE*1*623~\nIEA*1*000000623~", b"SE*011*1~\nGE*1*0623~\nIEA*1*623~")
    files = [(c, data) for c, data in bad.items() if c not in ("000000601", "IC611")]
    files += [("mixed-x12", good["000000620"] + bad["000000601"]), ("mixed-edifact", bad["IC611"] + good["IC621"])]
    files += [("grouped", good["IC622"]), ("lenient", lenient)]
    await publish(config.source, files)
    totals = await settle(config)
    assert (totals["processed"], totals["rejected"]) == (4, 12)
    counts = await stats(config)
    assert (counts["invoices"], counts["rejected_payloads"]) == (4, 12)
    assert counts["acknowledgments"]["rejections"] == 12
    parked = await reasons(config)
    expected = [s for *_, s in BAD_X12.values()] + [s for *_, s in BAD_EDIFACT.values()]
    assert sorted(parked) == sorted(PREFIX + s for s in expected)

    replies = await received(out / X12.id)
    ta1 = {r[0]: r[3:5] for r in segments(replies, "TA1")}
    assert len(segments(replies, "TA1")) == len(ta1) == 8  # one per interchange: 6 rejected, 2 accepted
    by_group: dict[str, tuple[list[tuple[str, ...]], list[tuple[str, ...]]]] = {}
    for reply in [r for r in replies if "997" in r.message_types]:  # alone, or after its TA1
        ak1 = segments([reply], "AK1")[0][1]
        assert ak1 not in by_group
        by_group[ak1] = (segments([reply], "AK5"), segments([reply], "AK9"))
    for control, (status, ak5, ak9) in EXPECTED_X12.items():
        assert ta1[control] == status, control
        assert by_group[str(int(control))] == ([ak5], [ak9]), control
    for control in ("000000620", "000000623"):  # correct, and correct under the numeric rule: accepted
        assert ta1[control] == ("A", "000")
        assert by_group[str(int(control))] == ([("A",)], [("A", "1", "1", "1")])
    x12file = pytest.importorskip("pyx12.x12file")
    for reply in replies:
        reader = x12file.X12Reader(io.StringIO(reply.raw.decode()))
        assert [s.get_seg_id() for s in reader][-1] == "IEA"
        assert list(reader.pop_errors()) == []

    contrl = await received(out / EDIFACT.id)
    answers: dict[str, list[object]] = {}
    for reply in contrl:
        (uci,) = segments([reply], "UCI")
        assert uci[0] not in answers
        answers[uci[0]] = [uci[3:], segments([reply], "UCF"), segments([reply], "UCM")]
    assert len(answers) == 8
    for control, (action, ucf, ucm) in EXPECTED_EDIFACT.items():
        assert answers[control] == [action, ucf, ucm], control
    for control in ("IC621", "IC622"):
        assert answers[control] == [("7",), [], []]
    collection = pytest.importorskip("pydifact.segmentcollection")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for reply in contrl:
            (message,) = list(collection.Interchange.from_str(reply.raw.decode("latin-1")).get_messages())
            assert message.type == "CONTRL"
            assert message.segments[0].tag == "UCI"

    corrected = [("fixed", x12("000000631").replace(b"T-000000631", b"T-000000601"))]
    await publish(config.source, corrected)  # the partner, told "rejected", re-sends under a new control number
    assert await settle(config) == {"processed": 1, "relayed": 1}  # its TA1 and 997 in one interchange
    assert (await stats(config))["invoices"] == 5


async def test_disagreeing_trailers_park_without_any_agreement(hub_config: HubConfig) -> None:
    """The rule is about the data: with no agreement that answers partners, an SE01 and a UNZ reference that
    disagree still park their interchanges (no invoice, no rejection written), beside a processed one."""
    files = [
        ("se01", x12("000000641", b"SE*11*0001~", b"SE*12*0001~")),
        ("unz", edifact("IC642", b"UNZ+1+@'", b"UNZ+1+IC699'")),
        ("good", x12("000000643")),
    ]
    await publish(hub_config.source, files)
    assert await settle(hub_config) == {"processed": 1, "rejected": 2}
    counts = await stats(hub_config)
    assert (counts["invoices"], counts["acknowledgments"]["rejections"], counts["outbox"]["sent"]) == (1, 0, 0)
    assert sorted(await reasons(hub_config)) == [
        PREFIX + "SE01 says 12 segments, transaction set 0001 (810 #1) has 11",
        PREFIX + "UNZ 0020 says IC699, interchange IC642 has UNB 0020 IC642",
    ]


def test_a_good_interchange_is_planned_as_before() -> None:
    """A correct interchange has no disagreement: the sample interchanges of the hub's tests are keyed as usual."""
    for data in (x12("000000651"), edifact("IC652"), edifact("IC653", grouped=True)):
        (interchange,) = edi.parse(data)
        assert interchange.disagreements == ()
        assert interchange.keyable
