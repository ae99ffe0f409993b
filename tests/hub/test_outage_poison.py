"""Poison in the traffic of a hub whose broker (a private NATS or Redis server) is killed mid-run and restarted:
the hub stays up, each good invoice is created once, and each poison message is parked once with its reason."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from edinbox.hub.config._model import HubConfig
from hub_ops import init
from servers import PrivateServer
from sources.test_outages import publish_until_accepted, url_of

from .poison import bad_date, not_edi
from .test_outage import HubProcess, invoices, wait_for

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="private brokers are started on Linux")


def rows(db: Path, statement: str) -> list[tuple[object, ...]]:
    """All rows of one statement on the hub's SQLite journal."""
    with sqlite3.connect(db, timeout=30) as connection:
        return connection.execute(statement).fetchall()


@pytest.mark.parametrize("kind", ["nats", "redis"])
def test_poison_is_parked_once_when_the_broker_is_killed_mid_run(kind: str, unique_name: str, tmp_path: Path) -> None:
    """60 invoices with 2 poison messages among them; the broker SIGKILLed after the first batches and started
    again on the same data: 60 invoices once each, 60 processed rows of one attempt, 2 rejected rows each with its
    reason, and the hub never exits."""
    db = tmp_path / "hub.db"
    asyncio.run(init(HubConfig(db=f"sqlite:///{db}")))
    (tmp_path / kind).mkdir()
    server = PrivateServer(kind, tmp_path / kind)
    server.start()
    try:
        url = url_of(server, unique_name)
        traffic = invoices(60)
        traffic[5:5] = [("poison-date", bad_date())]
        traffic[40:40] = [("poison-png", not_edi())]
        asyncio.run(publish_until_accepted(url, traffic))
        hub = HubProcess("--db", f"sqlite:///{db}", "--source", url, "--batch-size", "2")
        try:
            wait_for(lambda: len(hub.events("settled")) >= 10, timeout=60, what="the first batches")
            server.kill()
            wait_for(lambda: bool(hub.events("dependency-down")), timeout=30, what="the dependency-down line")
            time.sleep(1)
            server.start()
            wait_for(
                lambda: (
                    rows(db, "SELECT count(*) FROM edinbox_hub_invoices") == [(60,)]
                    and len(rows(db, "SELECT * FROM edinbox_hub_rejected")) == 2
                ),
                timeout=90,
                what="every message settled",
            )
            assert hub.proc.poll() is None
            assert hub.stop() == 0
        finally:
            if hub.proc.poll() is None:
                hub.proc.kill()
    finally:
        server.kill()
    assert rows(db, "SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices") == [(60, 60)]
    assert rows(db, "SELECT status, attempts, count(*) FROM inbox GROUP BY status, attempts") == [("processed", 1, 60)]
    reasons = sorted(str(reason) for (reason,) in rows(db, "SELECT reason FROM edinbox_hub_rejected"))
    assert "not a date" in reasons[0]
    assert "not a valid EDI interchange" in reasons[1]
    assert not [line for line in hub.lines if "Traceback" in line or " level=error " in line], "\n".join(hub.lines)
