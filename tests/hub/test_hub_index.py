"""The hub indexes the payloads it keeps after their settling transactions: `run(once=True)` leaves none waiting,
a stop set before the end leaves the rest for a search, which indexes them first, and a database outage met by an
index batch is the hub's own outage (one `dependency-down`, one `dependency-back`)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
from pathlib import Path

import pytest

from edinbox import Inbox
from edinbox._payloads import search_text
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.database import on_inbox
from edinbox.hub.demo._traffic import generate
from edinbox.hub.ops import init
from edinbox.sources.spool import publish
from servers import PrivatePostgres


def _waiting(path: Path) -> int:
    """Kept payloads not in the full-text index yet (above its mark)."""
    with sqlite3.connect(path) as db:
        mark = "(SELECT indexed_to FROM inbox_payloads_mark)"
        return int(db.execute(f"SELECT count(*) FROM inbox_payloads WHERE rowid > {mark}").fetchone()[0])


TRAFFIC = generate(60, duplicate_rate=0.0, seed=5, mixed=False)
COMMON = sorted(set.intersection(*(set(search_text(payload).split()) for _, payload in TRAFFIC.files)))[0]
"""A word every one of the interchanges holds."""


def _settle(tmp_path: Path, *, stop_first: bool) -> Path:
    """Settle 60 generated interchanges through a hub on SQLite with `run(once=True)`; with `stop_first` the stop is
    set as the run ends (SIGTERM then), before the index batches of the end. The database's path."""
    traffic = TRAFFIC
    config = HubConfig(
        db=f"sqlite:///{tmp_path / 'hub.db'}", source=f"dir://{tmp_path / 'spool'}", batch_size=20, idle_timeout=0.2
    )

    async def run() -> None:
        await on_inbox(config, lambda inbox: init(inbox, config=config))
        await publish(config.source, traffic.files)
        async with open_hub(config) as hub:
            if stop_first:
                finish = hub.indexer.finish

                async def stopped(stop: asyncio.Event) -> int:
                    stop.set()
                    return await finish(stop)

                hub.indexer.finish = stopped  # type: ignore[method-assign]
            totals = await hub.run(once=True)
        assert totals["processed"] == 60

    asyncio.run(run())
    return tmp_path / "hub.db"


def test_run_once_leaves_no_kept_payload_waiting_for_its_index(tmp_path: Path) -> None:
    """Every payload the hub kept is indexed when `run(once=True)` returns."""
    path = _settle(tmp_path, stop_first=False)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM inbox_payloads").fetchone()[0] == 60
    assert _waiting(path) == 0


def test_a_stopped_hub_leaves_the_rest_to_the_search(tmp_path: Path) -> None:
    """A stop set before the end's index batches leaves kept payloads waiting; a search indexes them first and finds
    a value inside them."""
    path = _settle(tmp_path, stop_first=True)
    assert _waiting(path) > 0
    with Inbox(f"sqlite:///{path}", consumer="accounting") as inbox:
        assert len(inbox.search(COMMON, limit=100)) == 60
    assert _waiting(path) == 0


@pytest.mark.skipif(sys.platform != "linux", reason="private PostgreSQL servers are started on Linux")
def test_an_outage_met_by_the_index_batch_is_the_hubs_one_outage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A private PostgreSQL stopped after a batch settled: the index batches met by the outage (each asks whether a
    kept payload waits: on PostgreSQL none does, they are indexed as they settle) log the hub's one `dependency-down`
    however many fail; the server back, the next index batch logs its one `dependency-back`; no line of the index's
    own."""
    caplog.set_level(logging.WARNING)
    with PrivatePostgres() as server:
        config = HubConfig(db=server.url, source=f"dir://{tmp_path / 'spool'}", batch_size=20, idle_timeout=0.2)

        async def run() -> list[int]:
            await on_inbox(config, lambda inbox: init(inbox, config=config))
            await publish(config.source, TRAFFIC.files[:20])
            async with open_hub(config) as hub:
                assert await hub.step() == 20
                server.stop()
                indexed = [await hub.indexer.step(0) for _ in range(3)]
                server.start()
                indexed.append(await hub.indexer.step(0))
                indexed.append(await hub.indexer.step(0))
                assert hub.outage.down is None
            return indexed

        assert asyncio.run(run()) == [0, 0, 0, 0, 0]
    events = [str(r.msg).split()[0] for r in caplog.records if r.name.startswith("edinbox.hub")]
    assert events.count("dependency-down") == 1, events
    assert events.count("dependency-back") == 1, events
    assert "index-behind" not in events
