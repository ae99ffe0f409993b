"""A value too big for the database is the message's fault, never an outage: on MariaDB, whose server reads no
statement over its max_allowed_packet (16 MiB by default), a parked payload bigger than that is kept in part, with
its reason, a copy the journal cannot keep as a conflict is parked, and their batch-mates settle in the same run."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from edinbox.hub import HubConfig, open_hub
from edinbox.hub.deliveries._items import HEAD
from edinbox.sources.spool import publish
from hub_ops import list_rows, stats

from .poison import good
from .test_poison import files, stored_payload

HUGE = 20 * 1024 * 1024
"""More than MariaDB's default max_allowed_packet, less than the hub's default max_payload (32 MiB)."""


def huge_invoice() -> bytes:
    """A valid-looking interchange of about `HUGE` bytes, parked for its IT1 quantity of `HUGE` digits."""
    return good(900000099, prefix="HUGE").replace(b"IT1*1*2*EA*", b"IT1*1*" + b"9" * HUGE + b"*EA*")


@pytest.mark.parametrize("hub_config", ["mysql"], indirect=True)
async def test_a_payload_over_max_allowed_packet_is_parked_in_part_and_its_batch_mates_settle(
    hub_config: HubConfig, spool: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One batch holding good invoices, 20 MiB that are not EDI, and a good interchange beside a 20 MiB bad one: every
    good invoice is created once, each huge payload parked once with its first 64 KiB and a reason giving its size
    and where the rest is (or that it is not kept), in one run that logs no error."""
    config = hub_config.with_overrides(batch_size=16, give_up_after="5s")
    bad = huge_invoice()
    junk = b"Z" * HUGE
    goods = [(f"good-{n}", good(n)) for n in range(1, 9)]
    await publish(config.source, [*goods[:4], ("junk", junk), ("pair", good(9) + bad), *goods[4:]])
    with caplog.at_level(logging.INFO, logger="edinbox"):
        async with open_hub(config) as hub:
            totals = dict(await hub.run(once=True))
    assert totals == {"processed": 9, "rejected": 2}
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    counts = await stats(config)
    assert (counts["invoices"], counts["processed"], counts["rejected_payloads"]) == (9, 9, 2)
    parked = await list_rows(config, status="rejected", limit=5)
    rows = {row["delivery"].split("~")[-1].removesuffix(".edi"): row for row in parked}
    assert f"the first {HEAD} of its {len(junk)} bytes are kept here" in rows["junk"]["reason"]
    assert f"{spool}/rejected" in rows["junk"]["reason"]
    assert await stored_payload(config, rows["junk"]["key"]) == junk[:HEAD]
    reason = rows["pair"]["reason"]
    assert "quantity" in reason
    assert f"the first {HEAD} of its {len(bad)} bytes are kept here, the rest is not kept" in reason
    assert "max_allowed_packet" in reason
    assert await stored_payload(config, rows["pair"]["key"]) == bad[:HEAD]
    assert len(files(spool, "archive")) == 9  # the pair's good half settled: its file is acked
    assert files(spool, "inbound") == files(spool, "processing") == []


def huge_valid(fill: bytes) -> bytes:
    """A valid interchange of about `HUGE` bytes (a note of `HUGE` times `fill`): its invoice is created."""
    data = good(900000098, prefix="HUGE").replace(b"CUR*SE*USD~\n", b"CUR*SE*USD~\nNTE*GEN*" + fill * HUGE + b"~\n")
    return data.replace(b"SE*11*0001~", b"SE*12*0001~")


@pytest.mark.parametrize("hub_config", ["mysql"], indirect=True)
async def test_a_conflicting_copy_over_max_allowed_packet_is_parked_and_its_batch_mates_settle(
    hub_config: HubConfig, spool: Path
) -> None:
    """A 20 MiB interchange is processed; its re-send with other content under the same key, which the journal cannot
    keep as a conflict, is parked with its first 64 KiB and the reason, and the good invoices of its batch are
    created once."""
    config = hub_config.with_overrides(batch_size=16, give_up_after="5s")
    await publish(config.source, [("first", huge_valid(b"A"))])
    async with open_hub(config) as hub:
        assert dict(await hub.run(once=True)) == {"processed": 1}
    other = huge_valid(b"B")
    goods = [(f"good-{n}", good(n)) for n in range(1, 7)]
    await publish(config.source, [*goods[:3], ("other", other), *goods[3:]])
    async with open_hub(config) as hub:
        totals = dict(await hub.run(once=True))
    assert totals == {"processed": 6, "rejected": 1}
    counts = await stats(config)
    assert (counts["invoices"], counts["processed"], counts["conflict"]) == (7, 7, 0)
    [row] = await list_rows(config, status="rejected", limit=5)
    assert row["reason"].startswith("it cannot be journaled: ")
    assert "max_allowed_packet" in row["reason"]
    assert f"the first {HEAD} of its {len(other)} bytes are kept here" in row["reason"]
    assert f"{spool}/rejected" in row["reason"]
    assert await stored_payload(config, row["key"]) == other[:HEAD]
    [parked] = [n for n in files(spool, "rejected") if not n.endswith(".reason")]
    assert (spool / "rejected" / parked).read_bytes() == other
