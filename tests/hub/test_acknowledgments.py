"""The hub answers partners: acknowledgments written with the interchange's transaction, relayed to the partner's
outbound destination, each with its own control number, never for an acknowledgment or a rolled-back interchange."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from edinbox import edi
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.config._model import Agreement
from edinbox.hub.config._settings import load_config
from edinbox.hub.demo._traffic import PARTNERS, Doc, render
from edinbox.hub.partners._acks import kinds
from edinbox.sources.spool import publish
from hub_ops import list_rows, show, stats
from received import drain

from .test_hub import FailingAccounting, doc

X12, GLOBEX, EDIFACT = PARTNERS[0], PARTNERS[1], PARTNERS[4]


def agreed(config: HubConfig, outbound: Path, **terms: Any) -> HubConfig:
    """`config` with one agreement for every partner: acknowledgments to `outbound/<partner id>`."""
    agreement = Agreement(outbound=f"dir://{outbound}/{{id}}", **terms)
    return config.with_overrides(partners={"*": agreement})


async def settle(config: HubConfig) -> dict[str, int]:
    """Run the hub (and its relay) until the spool is idle and the outbox drained."""
    async with open_hub(config) as hub:
        return dict(await hub.run(once=True))


async def received(folder: Path) -> list[edi.Interchange]:
    """The interchanges that arrived in a partner's outbound spool folder (each file read once, acked)."""
    delivered = await drain(f"dir://{folder}", consumer="partner", idle=0.5)
    return [interchange for _, payload in delivered for interchange in edi.parse(payload)]


async def test_x12_asking_for_a_ta1_gets_a_ta1_and_a_997(hub_config: HubConfig, tmp_path: Path) -> None:
    """An 810 with ISA14 = 1 gets a TA1 A and a 997 naming its group, together in one interchange under one control
    number; one without gets only the 997; each reply carries a control number of its own, refers to the subject's
    numbers, and parses as keyable."""
    out = tmp_path / "out"
    config = agreed(hub_config, out)
    asked = replace(doc(control="000000101", number="INV-1"), ack_requested=True)
    plain = doc(control="000000102", number="INV-2")
    await publish(config.source, [("a", render(asked)), ("b", render(plain))])
    totals = await settle(config)
    assert totals["relayed"] == 2
    replies = await received(out / X12.id)
    assert sorted(r.message_types for r in replies) == [("997",), ("TA1", "997")]
    assert len({r.control_number for r in replies}) == 2
    assert all(r.keyable and r.sender.id == "EDINBOXHUB" and r.receiver == X12.party for r in replies)
    (ta1,) = [r for r in replies if "TA1" in r.message_types]
    assert [s.elements[0][0] for s in ta1.segments if s.tag == "TA1"] == ["000000101"]
    ak1 = sorted(s.get(2) for r in replies for s in r.segments if s.tag == "AK1")
    assert ak1 == ["101", "102"]
    counts = await stats(config)
    assert counts["acknowledgments"]["TA1"] == 1
    assert counts["acknowledgments"]["997"] == 2
    assert counts["outbox"]["backlog"] == 0


async def test_a_resent_interchange_gets_a_duplicate_notice(hub_config: HubConfig, tmp_path: Path) -> None:
    """A partner that sends an interchange again gets a TA1 R 025 (X12) or a CONTRL UCI 4 26 (EDIFACT); with
    `duplicates = "silent"` it gets nothing more."""
    out = tmp_path / "out"
    config = agreed(hub_config, out)
    x12, edifact = doc(control="000000201", number="INV-3"), doc(partner=EDIFACT, control="IC7", number="INV-4")
    payloads = [("a", render(x12)), ("b", render(edifact))]
    await publish(config.source, payloads)
    await settle(config)
    await publish(config.source, payloads)
    await settle(config)
    notices = [s for r in await received(out / X12.id) for s in r.segments if s.tag == "TA1"]
    assert [(s.get(1), s.get(4), s.get(5)) for s in notices] == [("000000201", "R", "025")]
    uci = [s for r in await received(out / EDIFACT.id) for s in r.segments if s.tag == "UCI"]
    assert [(s.get(1), s.get(4), s.get(5)) for s in uci] == [("IC7", "4", "26")]
    await publish(config.source, payloads)
    await settle(agreed(hub_config, out, duplicates="silent"))
    assert await received(out / X12.id) == []
    assert (await stats(config))["acknowledgments"]["duplicate_notices"] == 2
    data = await show(config, f"{x12_source(x12)}/000000201")
    assert data is not None
    assert [(a["kind"], a["duplicate"], a["status"]) for a in data["acknowledgments"]] == [
        ("997", False, "sent"),
        ("TA1", True, "sent"),
    ]


def x12_source(d: Doc) -> str:
    """The inbox source of an X12 document of the hub's tests."""
    (interchange,) = edi.parse(render(d))
    return interchange.source


async def test_acknowledgments_are_never_answered(hub_config: HubConfig, tmp_path: Path) -> None:
    """A 997 or CONTRL from a partner, even asking for a TA1, gets nothing back."""
    out = tmp_path / "out"
    config = agreed(hub_config, out, ta1="always")
    acks = [Doc(X12, "000000301", "ack", "000000042"), Doc(EDIFACT, "IC9", "ack", "42")]
    await publish(config.source, [(str(n), render(replace(a, ack_requested=True))) for n, a in enumerate(acks)])
    totals = await settle(config)
    assert totals == {"bypassed": 2}
    assert (await stats(config))["outbox"]["sent"] == 0


async def test_999_partners_and_no_outbound(hub_config: HubConfig, tmp_path: Path) -> None:
    """A partner agreed on 999 gets a 999 (005010X231A1); a partner without an outbound destination gets nothing."""
    out = tmp_path / "out"
    config = hub_config.with_overrides(
        partners={
            f"{GLOBEX.qualifier}:{GLOBEX.id}": Agreement(outbound=f"dir://{out}/globex", acknowledgment="999"),
            f"{X12.qualifier}:{X12.id}": Agreement(),  # a partner (it gets in), with nowhere to answer it
        }
    )
    await publish(config.source, [("a", render(doc(partner=GLOBEX, control="000000401"))), ("b", render(doc()))])
    await settle(config)
    assert (await stats(config))["invoices"] == 2
    (reply,) = await received(out / "globex")
    assert reply.message_types == ("999",)
    assert [s.get(8) for s in reply.segments if s.tag == "GS"] == ["005010X231A1"]
    assert (await stats(config))["outbox"]["sent"] == 1


async def test_a_rolled_back_interchange_is_never_acknowledged(hub_config: HubConfig, tmp_path: Path) -> None:
    """A batch whose sink fails on one invoice rolls back with the acknowledgments it had written; settled alone,
    the good interchange is acknowledged once and the failing one (parked dead) never."""
    out = tmp_path / "out"
    # idle_timeout outlasts the nack's delay: the failed delivery comes back and is counted dead
    config = agreed(hub_config.with_overrides(max_attempts=1, idle_timeout=2.0), out, ta1="always")
    good, bad = doc(control="000000501", number="INV-5"), doc(control="000000502", number="POISON")
    await publish(config.source, [("a", render(good)), ("b", render(bad))])
    async with open_hub(config) as hub:
        hub.accounting = FailingAccounting(hub.accounting, poison="POISON")  # type: ignore[arg-type]
        await hub.run(once=True)
    replies = await received(out / X12.id)
    counts = await stats(config)
    assert (counts["processed"], counts["dead"]) == (1, 1)
    assert [r.message_types for r in replies] == [("TA1", "997")]  # together, in one interchange
    assert {s.get(1) for r in replies for s in r.segments if s.tag == "TA1"} == {"000000501"}
    assert counts["acknowledgments"]["keys"] == 1


def test_kinds_follow_the_agreement() -> None:
    """Which acknowledgments an agreement gives, for X12 and EDIFACT, asked or not, duplicate or not."""
    x12 = edi.received(edi.parse(render(replace(doc(), ack_requested=True)))[0])
    plain = edi.received(edi.parse(render(doc()))[0])
    edifact = edi.received(edi.parse(render(doc(partner=EDIFACT, control="IC1")))[0])
    on = Agreement(outbound="dir:///x")
    assert kinds(x12, on, duplicate=False) == ["TA1", "997"]
    assert kinds(plain, on, duplicate=False) == ["997"]
    assert kinds(plain, replace(on, ta1="always", acknowledgment="999"), duplicate=False) == ["TA1", "999"]
    assert kinds(x12, replace(on, ta1="never", acknowledgment="none"), duplicate=False) == []
    assert kinds(edifact, on, duplicate=False) == []
    assert kinds(edifact, replace(on, ta1="always"), duplicate=False) == ["CONTRL"]
    assert kinds(edifact, on, duplicate=True) == ["CONTRL"]
    assert kinds(x12, replace(on, duplicates="silent"), duplicate=True) == []
    assert kinds(x12, Agreement(), duplicate=False) == []


def test_agreements_load_from_toml(tmp_path: Path) -> None:
    """`[partners."ZZ:ACME"]` tables become agreements; "*" is everyone else's; a bad value names itself."""
    path = tmp_path / "hub.toml"
    path.write_text(
        '[partners."ZZ:ACME"]\noutbound = "amqp://h/?queue=acme"\nacknowledgment = "999"\nsender = "ZZ:HUB"\n'
        '[partners."*"]\noutbound = "dir:///out/{id}"\nduplicates = "silent"\n',
        encoding="utf-8",
    )
    config = load_config(path)
    expected = Agreement(outbound="amqp://h/?queue=acme", acknowledgment="999", sender="ZZ:HUB")
    assert config.agreement("ZZ:ACME") == expected
    assert config.agreement("01:OTHER").duplicates == "silent"
    path.write_text('[partners."ZZ:ACME"]\nacknowledgment = "998"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="acknowledgment must be one of 997, 999, none"):
        load_config(path)


def test_partner_ids_cannot_escape_the_outbound_folder() -> None:
    """`{id}` is replaced by the partner's id with anything but letters, digits, `_` and `-` made `_` (and a digest
    of the id appended), so no id climbs out of the folder."""
    from edinbox.hub.partners._acks import destination

    agreement = Agreement(outbound="dir:///srv/out/{id}")
    assert destination(agreement, edi.Party("ZZ", "../../etc")).startswith("dir:///srv/out/______etc--")
    assert "/" not in destination(agreement, edi.Party("ZZ", "../../etc")).removeprefix("dir:///srv/out/")


def test_partner_ids_each_get_their_own_outbound_folder() -> None:
    """Ids that made `_` alike (`A.B`, `A B`, `A/B`, `A_B`, empty, `_`) map to distinct names; simple ids are kept."""
    from edinbox.hub.partners._acks import partner_name

    ids = ["A.B", "A B", "A/B", "A_B", "A-B", "", "_", "A\x00B", "Ä", "A_B--0123456789abcdef"]
    names = [partner_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert [partner_name(i) for i in ("ACME", "123456789", "A_B", "A-B", "_")] == [
        "ACME",
        "123456789",
        "A_B",
        "A-B",
        "_",
    ]
    digested = partner_name("A.B")
    assert digested.startswith("A_B--")
    assert len(digested) == len("A_B--") + 16
    assert partner_name(digested) not in names  # a simple id shaped like a changed one is changed too
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", n) for n in names)


async def test_a_journal_without_its_outbox_asks_for_init(tmp_path: Path) -> None:
    """A database made before the outbox existed is a schema error naming `edinbox init`, not an outage."""
    import sqlite3

    from edinbox import SchemaError
    from edinbox.hub.database._journal import open_inbox, verify
    from hub_ops import init

    config = HubConfig(db=f"sqlite:///{tmp_path / 'old.db'}")
    await init(config)
    with sqlite3.connect(tmp_path / "old.db") as connection:
        connection.execute("DROP TABLE inbox_outbox")
    async with open_inbox(config) as inbox:
        with pytest.raises(SchemaError, match="inbox_outbox does not exist: run `edinbox init`"):
            await verify(inbox)
    await init(config)  # idempotent: it creates what is missing
    async with open_inbox(config) as inbox:
        await verify(inbox)


async def test_a_partner_folder_whose_inbound_is_a_symlink_gets_nothing_written_through_it(
    hub_config: HubConfig, tmp_path: Path
) -> None:
    """A partner's outbound spool whose inbound/ is a symlink to another folder: the relay writes nothing there and
    parks the acknowledgment with the reason naming the folder; the interchange itself is processed."""
    out, outside = tmp_path / "out", tmp_path / "outside"
    outside.mkdir()
    (out / X12.id).mkdir(parents=True)
    (out / X12.id / "inbound").symlink_to(outside, target_is_directory=True)
    config = agreed(hub_config, out)
    await publish(config.source, [("a", render(doc(control="000000301", number="INV-30")))])
    await settle(config)
    assert os.listdir(outside) == []
    counts = await stats(config)
    assert counts["processed"] == 1
    assert counts["outbox"]["parked"] == 1
    assert counts["outbox"]["backlog"] == 0
    [processed] = await list_rows(config, status="processed", limit=5)
    [row] = (await show(config, processed["key"]))["acknowledgments"]
    assert row["status"] == "parked"
    assert f"{out / X12.id / 'inbound'} is a symbolic link" in row["reason"]
