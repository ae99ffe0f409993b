"""Two hubs on one SQLite file, with a third connection in the way: the write lock is contended, never deadlocked.

Two `edinbox run` processes share one spool and one SQLite database while the test itself takes the write lock
for half a second again and again, and runs TRUNCATE checkpoints that wait behind an old reader (holding out every
writer meanwhile). Busy is waited for: neither hub exits, nothing is charged, every invoice is created once.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

from edinbox.hub.config._model import HubConfig
from edinbox.sources.spool import publish
from hub.test_outage import HubProcess, invoices, spool_empty, wait_for
from hub_ops import init

COUNT = 300


def get_in_the_way(path: Path, *, until: threading.Event) -> int:
    """Until `until` is set: hold the write lock for 0.5 s, then run a TRUNCATE checkpoint behind a reader that
    holds its snapshot for 0.5 s, over and over; how many rounds ran."""
    rounds = 0
    writer = sqlite3.connect(path, isolation_level=None, timeout=30)
    reader = sqlite3.connect(path, isolation_level=None, timeout=30)
    checkpointer = sqlite3.connect(path, isolation_level=None, timeout=0.5)
    try:
        while not until.wait(0.2):
            writer.execute("BEGIN IMMEDIATE")
            time.sleep(0.5)
            writer.execute("COMMIT")
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM inbox").fetchone()
            checkpointer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            reader.execute("COMMIT")
            rounds += 1
    finally:
        for connection in (writer, reader, checkpointer):
            connection.close()
    return rounds


def test_two_hubs_and_a_lock_holder_on_one_sqlite_file_settle_everything_once(tmp_path: Path) -> None:
    """Two hubs settle 300 invoices from one spool into one SQLite file while another connection holds the write
    lock and runs checkpoints behind a reader: both stay up, every invoice is created once, and every journal row is
    processed at attempt 1 (busy cost no attempt)."""
    path = tmp_path / "hub.db"
    db = f"sqlite:///{path}"
    asyncio.run(init(HubConfig(db=db)))
    spool = tmp_path / "spool"
    spool.mkdir()
    source = f"dir://{spool}"
    asyncio.run(publish(source, invoices(COUNT // 3)))
    hubs = [HubProcess("--db", db, "--source", source, "--batch-size", "5") for _ in range(2)]
    stop = threading.Event()
    rounds: list[int] = []
    blocker = threading.Thread(target=lambda: rounds.append(get_in_the_way(path, until=stop)))
    blocker.start()
    try:
        for wave in range(1, 3):  # traffic keeps coming while the lock is contended
            time.sleep(1)
            asyncio.run(publish(source, invoices(COUNT // 3, start=wave * COUNT // 3)))
        wait_for(lambda: spool_empty(spool), timeout=60, what="the hubs to settle everything")
        assert all(hub.proc.poll() is None for hub in hubs)  # neither exited on its own
    finally:
        stop.set()
        blocker.join()
        codes = [hub.stop() for hub in hubs]
    assert codes == [0, 0]
    assert rounds[0] >= 2
    with sqlite3.connect(path, timeout=30) as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices").fetchone() == (
            COUNT,
            COUNT,
        )
        rows = conn.execute("SELECT status, attempts, count(*) FROM inbox GROUP BY status, attempts").fetchall()
    assert rows == [("processed", 1, COUNT)]
    assert all(hub.events("settled") for hub in hubs)  # both took part
    assert not [hub.events("dependency-down") for hub in hubs if hub.events("dependency-down")]  # waited, no outage
    lines = [line for hub in hubs for line in hub.lines]
    assert not [line for line in lines if "Traceback" in line or " level=error " in line], "\n".join(lines)
