"""An interchange whose invoice cannot be read is data at fault: parked alone, its batch-mates settle."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from edinbox import edi
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.deliveries._items import message_types
from edinbox.hub.demo._traffic import PARTNERS, Doc, render
from edinbox.sources.spool import publish
from hub_ops import list_rows, show, stats

X12, EDIFACT = PARTNERS[0], PARTNERS[4]
LINES = ((2, Decimal("6.50")), (3, Decimal("10.00")))


async def settle(config: HubConfig) -> dict[str, int]:
    """Run the hub in this process until the spool is idle; return its totals."""
    async with open_hub(config) as hub:
        return dict(await hub.run(once=True))


def invoice(partner: Any, control: str, number: str) -> bytes:
    """An invoice interchange with two lines, as the partner writes it."""
    return render(Doc(partner, control, "invoice", number, lines=LINES))


async def test_unreadable_invoices_are_parked_and_their_batch_mates_settle(hub_config: HubConfig, spool: Path) -> None:
    """A 500,000-digit quantity, an impossible date and a missing DTM+137 each park their interchange as rejected
    with the parser's sentence; the good interchanges of the same batch and the same file are processed."""
    huge = invoice(X12, "000002001", "U-1").replace(b"IT1*1*2*", b"IT1*1*" + b"9" * 500_000 + b"*", 1)
    dated = invoice(X12, "000002002", "U-2")
    at = dated.index(b"BIG*") + 4
    bad_date = dated[:at] + b"20261399" + dated[at + 8 :]  # BIG01 CCYYMMDD: month 13, day 99
    no_date = invoice(EDIFACT, "000002003", "U-3").replace(b"DTM+137:", b"DTM+9:", 1)
    good = invoice(X12, "000002004", "G-1")
    pair = invoice(EDIFACT, "000002005", "G-2") + no_date.replace(b"000002003", b"000002006")
    await publish(
        hub_config.source,
        [("huge", huge), ("date", bad_date), ("nodtm", no_date), ("good", good), ("pair", pair)],
    )
    totals = await settle(hub_config)
    assert totals == {"processed": 2, "rejected": 4}
    counts = await stats(hub_config)
    assert (counts["invoices"], counts["rejected"], counts["journal_rows"]) == (2, 4, 2)
    parked = await list_rows(hub_config, status="rejected", limit=10)
    reasons = [(await show(hub_config, row["key"]) or {}).get("reason", "") for row in parked]
    text = " ".join(reasons)
    assert "an invoice cannot be read" in text
    assert "at most 35" in text
    assert "'20261399' is not a date" in text
    assert "has no document date (DTM+137)" in text


def test_ta1_type_comes_from_the_parser() -> None:
    """The hub routes an interchange by the types the parser reports: a TA1 is one; an empty interchange has none
    (the hub no longer guesses TA1 for it)."""
    head = invoice(X12, "000002010", "T-1").split(b"GS*")[0]
    alone = edi.parse(head + b"TA1*000000050*200229*1200*A*000~\nIEA*0*000002010~\n")[0]
    assert message_types(alone) == ("TA1",)
    empty = edi.parse(head + b"IEA*0*000002010~\n")[0]
    assert message_types(empty) == ()
