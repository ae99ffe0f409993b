"""The partner registry: with agreements configured, an interchange from a sender without one (or to a receiver
that is not ours) is parked alone with its reason, answered when the hub says so (TA1 R 006 / 009, CONTRL UCI 4
23), booked nowhere, counted, logged once per partner per hour and exported as a metric; `accept` lets it in."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from edinbox import edi
from edinbox.hub import HubConfig
from edinbox.hub.config._model import Agreement
from edinbox.hub.demo._traffic import render
from edinbox.hub.partners._acks import kinds
from edinbox.hub.partners._registry import WINDOW, Refusal, forget, noticed, report_to
from edinbox.metrics import Metrics
from edinbox.sources.spool import publish
from hub_ops import doctor, list_rows, stats

from .test_acknowledgments import EDIFACT, X12, received, settle
from .test_hub import doc
from .test_rejections import segments

OTHER = replace(X12, id="OTHER")
"""An X12 partner the hub has no agreement with (ZZ:OTHER)."""
STRANGER = replace(EDIFACT, id="4099999000009")
"""An EDIFACT partner the hub has no agreement with."""


def key(partner: Any) -> str:
    """How agreements name a generated partner."""
    return f"{partner.qualifier}:{partner.id}"


def registry(config: HubConfig, out: Path, **hub: Any) -> HubConfig:
    """`config` with agreements for X12 and EDIFACT (acknowledgments to `out/<id>`) and answers to unknown
    partners in `out/unknown/<id>`."""
    agreement = Agreement(outbound=f"dir://{out}/{{id}}")
    terms = {"unknown_outbound": f"dir://{out}/unknown/{{id}}", **hub}
    return config.with_overrides(partners={key(X12): agreement, key(EDIFACT): agreement}, **terms)


def rejected_files(config: HubConfig) -> list[str]:
    """The payloads the spool keeps in its rejected folder."""
    folder = Path(config.source.removeprefix("dir://")) / "rejected"
    return sorted(n for n in os.listdir(folder) if not n.endswith(".reason")) if folder.exists() else []


SQLITE = pytest.mark.parametrize("hub_config", ["sqlite"], indirect=True)
"""The tests of settings and of the process's log: the database plays no part beyond holding the counts."""


@pytest.mark.parametrize("hub_config", ["sqlite", "postgresql"], indirect=True)
async def test_unknown_partners_are_parked_alone_and_answered(hub_config: HubConfig, tmp_path: Path) -> None:
    """Among good invoices, an 810 from ZZ:OTHER and an INVOIC from an unknown EDIFACT sender, both asking for an
    acknowledgment, are parked with their reason and counted, as is ZZ:OTHER's interchange beside a good one in one
    delivery; ZZ:OTHER gets a TA1 R 006 (only for the one that asked), the EDIFACT one a CONTRL UCI 4 23, the known
    partners their usual answers, and only the known partners' invoices are booked."""
    out = tmp_path / "out"
    config = registry(hub_config, out)
    good = [doc(control="000000801", number="G-1"), doc(partner=EDIFACT, control="IC801", number="G-2")]
    bad = [
        replace(doc(partner=OTHER, control="000000802", number="U-1"), ack_requested=True),
        replace(doc(partner=STRANGER, control="IC802", number="U-2"), ack_requested=True),
    ]
    # one delivery holds a good interchange and an unknown partner's: the good one is booked, the other parked alone
    mixed = render(doc(control="000000803", number="G-3")) + render(doc(partner=OTHER, control="000000804"))
    files = [("a", render(good[0])), ("b", render(bad[0])), ("c", render(good[1])), ("d", render(bad[1]))]
    await publish(config.source, [*files, ("e", mixed)])
    await settle(config)
    counts = await stats(config)
    assert (counts["invoices"], counts["processed"], counts["rejected"]) == (3, 3, 3)
    assert counts["unknown_partners"] == 3
    assert counts["received"] == 6
    assert counts["rejected_payloads"] == 3
    assert len(rejected_files(config)) == 2  # the mixed delivery is archived: its parked part is in the table
    ta1 = await received(out / "unknown" / OTHER.id)
    assert segments(ta1, "TA1") == [("000000802", "261202", "0930", "R", "006")]
    assert [r.message_types for r in ta1] == [("TA1",)]
    contrl = await received(out / "unknown" / STRANGER.id)
    assert segments(contrl, "UCI") == [("IC802", STRANGER.id, "EDINBOXHUB", "4", "23")]
    assert [r.message_types for r in await received(out / X12.id)] == [("997",), ("997",)]
    reasons = sorted(row["reason"] for row in await list_rows(config, status="rejected", limit=10))
    assert reasons == sorted([f"unknown partner {key(OTHER)}"] * 2 + [f"unknown partner {key(STRANGER)}"])


@SQLITE
async def test_fifty_interchanges_make_one_log_line_and_fifty_counts(
    hub_config: HubConfig, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Fifty interchanges from one unknown partner are all parked and counted (counter and metric, labelled
    `other`, not by the partner's id), and logged once; no answer goes out when the hub sets no unknown_outbound."""
    out = tmp_path / "out"
    config = registry(hub_config, out, unknown_outbound="")
    metrics = Metrics(partners=config.partners)
    forget()
    report_to(metrics)
    caplog.set_level(logging.WARNING, logger="edinbox.hub")
    try:
        await publish(
            config.source,
            [(f"u{n}", render(doc(partner=OTHER, control=f"{900 + n:09d}", number=f"U-{n}"))) for n in range(50)]
            + [("good", render(doc(control="000000999", number="G-9")))],
        )
        await settle(config)
    finally:
        report_to(None)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("unknown-partner")]
    assert len(lines) == 1
    assert f"party={key(OTHER)}" in lines[0]
    assert "refused=1" in lines[0]
    counts = await stats(config)
    assert (counts["unknown_partners"], counts["rejected"], counts["invoices"]) == (50, 50, 1)
    value = metrics.registry.get_sample_value(
        "edinbox_unknown_partners_total", {"consumer": config.consumer, "partner": "other", "side": "sender"}
    )
    assert value == 50
    assert "OTHER" not in metrics.exposition().decode()
    assert not (out / "unknown").exists()


def test_the_log_window_is_per_party_and_says_how_many(caplog: pytest.LogCaptureFixture) -> None:
    """Within an hour a party is logged once; the next line, an hour later, says how many were refused since; another
    party has a window of its own."""
    forget()
    caplog.set_level(logging.WARNING, logger="edinbox.hub")
    one = Refusal("unknown partner ZZ:ONE", "ZZ:ONE", "ZZ:ONE", "sender", "006")
    two = Refusal("unknown partner ZZ:TWO", "ZZ:TWO", "ZZ:TWO", "sender", "006")
    for n in range(5):
        noticed("accounting", one, now=1000.0 + n)
    noticed("accounting", two, now=1001.0)
    noticed("accounting", one, now=1000.0 + WINDOW)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("unknown-partner")]
    assert [("ZZ:ONE" in line, line.split("refused=")[1].split()[0]) for line in lines] == [
        (True, "1"),
        (False, "1"),
        (True, "5"),
    ]


@SQLITE
async def test_accept_books_an_unknown_partner(hub_config: HubConfig, tmp_path: Path) -> None:
    """With `unknown_partners = "accept"`, ZZ:OTHER's invoice is booked and nothing is parked or counted as unknown."""
    config = registry(hub_config, tmp_path / "out", unknown_partners="accept")
    await publish(config.source, [("a", render(doc(partner=OTHER, control="000000811", number="A-1")))])
    await settle(config)
    counts = await stats(config)
    assert (counts["invoices"], counts["rejected"], counts["unknown_partners"]) == (1, 0, 0)


@SQLITE
async def test_a_receiver_that_is_not_ours(hub_config: HubConfig, tmp_path: Path) -> None:
    """With `parties` set, interchanges from known partners addressed to ZZ:ELSEWHERE / ZZZ:ELSEWHERE are parked
    ("receiver ... is not this hub") and answered under the partner's agreement with a TA1 R 009 only, or a CONTRL
    UCI 4 7; one to us is booked."""
    out = tmp_path / "out"
    config = registry(hub_config, out, parties="ZZ:EDINBOXHUB, ZZZ:EDINBOXHUB")
    ours = render(doc(control="000000821", number="R-1"))
    data = render(replace(doc(control="000000822", number="R-2"), ack_requested=True))
    elsewhere = data.replace(b"EDINBOXHUB     ", b"ELSEWHERE      ", 1)  # ISA08, fixed width
    edifact = render(replace(doc(partner=EDIFACT, control="IC822", number="R-3"), ack_requested=True))
    edifact_elsewhere = edifact.replace(b"EDINBOXHUB", b"ELSEWHERE", 1)  # UNB S003
    assert elsewhere != data
    assert edifact_elsewhere != edifact
    await publish(config.source, [("a", ours), ("b", elsewhere), ("c", edifact_elsewhere)])
    await settle(config)
    counts = await stats(config)
    assert (counts["invoices"], counts["rejected"], counts["unknown_partners"]) == (1, 2, 2)
    replies = await received(out / X12.id)
    assert segments(replies, "TA1") == [("000000822", "261202", "0930", "R", "009")]
    assert sorted(r.message_types[0] for r in replies) == ["997", "TA1"]  # the 997 answers the booked one
    contrl = await received(out / EDIFACT.id)
    assert segments(contrl, "UCI") == [("IC822", EDIFACT.id, "ELSEWHERE", "4", "7")]
    reasons = sorted(p.read_text().splitlines()[0] for p in (Path(config.source[6:]) / "rejected").glob("*.reason"))
    assert reasons == ["receiver ZZ:ELSEWHERE is not this hub", "receiver ZZZ:ELSEWHERE is not this hub"]


@SQLITE
async def test_doctor_warns_when_everyone_gets_in(hub_config: HubConfig, tmp_path: Path) -> None:
    """`doctor` warns with no agreement, with a "*" agreement and with `accept`, and says who gets in otherwise."""

    async def partners(config: HubConfig) -> tuple[str, str]:
        (check,) = [c for c in await doctor(config) if c.name == "partners"]
        return check.status, check.detail

    assert (await partners(hub_config))[0] == "warn"
    star = hub_config.with_overrides(partners={"*": Agreement()})
    assert (await partners(star)) == (
        "warn",
        'a [partners."*"] agreement lets every sender in: unknown partners are booked',
    )
    known = registry(hub_config, tmp_path / "out")
    assert (await partners(known))[0] == "ok"
    accept = known.with_overrides(unknown_partners="accept")
    assert (await partners(accept))[0] == "warn"


def test_a_refusal_is_answered_at_the_envelope_only_and_when_asked() -> None:
    """A refused interchange gets its TA1 (or CONTRL) when asked or under `ta1 = "always"`, never a 997, and nothing
    when it did not ask."""
    (interchange,) = edi.parse(render(doc(partner=OTHER, control="000000831")))
    subject = replace(edi.received(interchange, rejected=True), error=edi.party_error("X12", sender=True))
    agreement = Agreement(outbound="dir:///nowhere")
    assert kinds(subject, agreement, duplicate=False) == []
    assert kinds(replace(subject, requested=True), agreement, duplicate=False) == ["TA1"]
    assert kinds(subject, replace(agreement, ta1="always"), duplicate=False) == ["TA1"]
    (ta1,) = edi.replies(replace(subject, requested=True), "TA1")
    assert [s.get(4) + s.get(5) for s in ta1.segments] == ["R006"]
