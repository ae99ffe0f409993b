"""Parked payloads are kept once per content: copies delivered together make one row counting each delivery, on
SQLite, PostgreSQL (one statement for the batch) and MariaDB."""

from __future__ import annotations

from edinbox.hub import HubConfig
from edinbox.hub.database import open_inbox
from edinbox.hub.ops import list_rows
from edinbox.sources.spool import publish

from .test_acknowledgments import settle


async def parked(config: HubConfig) -> list[tuple[str, int]]:
    """Each parked row's delivery (the spool's file name) and how many deliveries carried its payload, sorted."""
    async with open_inbox(config) as inbox:
        rows = await list_rows(inbox, status="rejected", limit=10)
    return sorted((str(row["delivery"]).rsplit("~", 1)[-1], int(row["deliveries"])) for row in rows)


async def test_copies_of_a_parked_payload_make_one_row_counting_every_delivery(hub_config: HubConfig) -> None:
    """Three copies of one garbage payload and one of another, delivered together, are two parked rows: the first
    counts three deliveries; a copy delivered later counts a fourth and adds no row."""
    junk = b"%PDF-1.4 not an interchange"
    await publish(hub_config.source, [("a", junk), ("b", b"GIF89a nor this"), ("c", junk), ("d", junk)])
    totals = await settle(hub_config)
    assert totals["rejected"] == 4
    rows = await parked(hub_config)
    assert sorted(n for _, n in rows) == [1, 3]
    await publish(hub_config.source, [("e", junk)])
    await settle(hub_config)
    assert sorted(n for _, n in await parked(hub_config)) == [1, 4]
    assert {name for name, _ in await parked(hub_config)} == {name for name, _ in rows}  # the first copies' rows
