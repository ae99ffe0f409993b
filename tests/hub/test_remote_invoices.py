"""Local views of remote effects: with the HTTP accounting sink (lease mode), the hub keeps a row per invoice the real
accounting service holds, with the service's id, so `stats`, `show` and the console's invoice search tell the truth.

The hub runs in this process on SQLite, PostgreSQL and MariaDB (one fresh schema each) against
`edinbox.hub.demo.accounting_service` on a free port. An invoice the service already held (409, sent again in a new
interchange) is kept with the id the service answered, once.
"""

from __future__ import annotations

from pathlib import Path

from edinbox.console._data import Query, search
from edinbox.hub import HubConfig
from edinbox.hub.database._journal import open_inbox
from edinbox.hub.deliveries._open import open_hub
from edinbox.hub.demo.accounting_service import AccountingService
from edinbox.hub.sinks._http import HttpAccounting
from edinbox.sources.spool import publish
from hub.test_outage import invoices
from hub_ops import show, stats


async def test_stats_show_and_search_see_the_invoices_the_service_holds(hub_config: HubConfig, tmp_path: Path) -> None:
    """Three interchanges and a resend of the first one's invoice under a new key go to the accounting service: the
    service holds 3 invoices; `stats` counts 3, `show` lists each interchange's invoice with the service's id, and
    the console finds an interchange by its invoice number."""
    config = hub_config.with_overrides(lease="30s")
    traffic = invoices(3)
    resent = ("resend", invoices(1)[0][1].replace(b"000000000", b"000000777"))  # same invoice, new control number
    await publish(config.source, [*traffic, resent])
    with AccountingService(tmp_path / "accounting.db") as service:
        async with open_hub(config, accounting=HttpAccounting(service.url)) as hub:
            await hub.run(once=True)
        held = {i["number"]: str(i["id"]) for i in service.invoices()}
    assert sorted(held) == ["OUT-0", "OUT-1", "OUT-2"]
    assert (await stats(config))["invoices"] == 3
    async with open_inbox(config) as inbox:
        found, _ = await search(inbox, Query(invoice="OUT-1"))
        rows, _ = await search(inbox, Query())
    assert len(found) == 1
    for row in rows:
        shown = await show(config, row.key)
        assert shown is not None
        assert [(i["number"], i["remote_id"]) for i in shown["invoices"]] in (
            [("OUT-0", held["OUT-0"])],
            [("OUT-1", held["OUT-1"])],
            [("OUT-2", held["OUT-2"])],
            [],  # the resend: the service answered 409 with OUT-0's id, the row kept is the first one's
        ), shown
    assert len(rows) == 4
