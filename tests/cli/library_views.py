"""What an operator sees of a journal the library made: the `edinbox` commands and the console's data layer, checked
the same way for each framework's journal (a plain aio-pika consumer, FastStream, Django)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from click.testing import CliRunner

from edinbox.cli import main
from edinbox.console import _data
from edinbox.hub.config._model import HubConfig
from edinbox.hub.database._journal import open_inbox
from outbox.test_relay_brokers import drain

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"


def cli_json(*args: str) -> Any:
    """Run an `edinbox` command with `--json` in-process; its parsed output (the command must succeed)."""
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def console_view(config: HubConfig) -> dict[str, Any]:
    """The console's data layer on the journal: its dashboard, a search, the audit."""
    async with open_inbox(config) as inbox:
        dashboard = await _data.dashboard(config, inbox)
        rows, _ = await _data.search(inbox, _data.Query())
        by_invoice, _ = await _data.search(inbox, _data.Query(invoice="INV-1"))
        audit = await _data.audit_rows(inbox)
    return {"dashboard": dashboard, "rows": rows, "by_invoice": by_invoice, "audit": audit}


def check_views(
    config: HubConfig, *, key: str, queue: str, published: list[tuple[str, bytes]], processed: int | None = None
) -> None:
    """doctor, stats, show and relay work on the journal `config` names, which has no hub tables and holds
    `processed` rows (default: one per published message); the relay sends `published` (message id, payload) to
    `queue` once each, and the console's data layer reads the journal."""
    processed = len(published) if processed is None else processed
    db = ["--db", config.db, "--table", config.table, "--consumer", config.consumer]
    checks = {c["check"]: c for c in cli_json("doctor", *db)}
    assert all(c["status"] == "ok" for c in checks.values()), checks
    assert checks["hub"]["detail"].startswith("library journal, no hub tables")
    stats = cli_json("stats", *db)
    assert stats["hub"] is False
    assert stats["journal"]["processed"] == processed
    assert stats["outbox"]["backlog"] == len(published)
    assert cli_json("show", key, *db)["status"] == "processed"
    view = asyncio.run(console_view(config))
    assert view["dashboard"]["totals"]["journal"]["processed"] == processed
    assert key in {r.key for r in view["rows"]}
    assert view["by_invoice"] == []  # no hub, no invoices to search by
    assert view["audit"] == []
    assert cli_json("relay", *db, "--once", "--destinations", RABBITMQ) == {"sent": len(published), "parked": 0}
    assert cli_json("relay", *db, "--once", "--destinations", RABBITMQ) == {"sent": 0, "parked": 0}
    got = asyncio.run(drain(f"{RABBITMQ}?queue={queue}", len(published), within=20))
    assert sorted((d.message_id or "", d.payload) for d in got) == sorted(published)
    assert cli_json("stats", *db)["outbox"]["sent"] == len(published)
