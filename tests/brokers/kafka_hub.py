"""What the Kafka fault tests check of a hub process (`edinbox run` in a subprocess): its exit on SIGTERM, its
outage lines, and its SQLite journal's rows."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

from hub.test_outage import HubProcess

__all__ = ["created_once", "one_outage", "rows", "terminated"]


def terminated(hub: HubProcess, *, within: float = 5) -> None:
    """Send SIGTERM to the hub; assert it exits 0 within `within` seconds (killed after a guard of 60 s)."""
    hub.proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    try:
        code = hub.proc.wait(timeout=60)
    finally:
        took = time.monotonic() - started
        if hub.proc.poll() is None:
            hub.proc.kill()
        hub._reader.join(timeout=10)
    assert code == 0, "\n".join(hub.lines)
    assert took < within, f"exited {took:.1f} s after SIGTERM"


def one_outage(hub: HubProcess) -> None:
    """Assert the hub logged one outage of its source, down then back, and no error or traceback."""
    downs, backs = hub.events("dependency-down"), hub.events("dependency-back")
    assert len(downs) == len(backs) == 1, "\n".join(hub.lines)
    assert "dependency=source" in downs[0]
    assert "dependency=source" in backs[0]
    assert not [line for line in hub.lines if " level=error " in line or "Traceback" in line], "\n".join(hub.lines)


def rows(db: Path, statement: str) -> list[tuple[object, ...]]:
    """All rows of one statement on the hub's SQLite journal."""
    with sqlite3.connect(db, timeout=30) as connection:
        return connection.execute(statement).fetchall()


def created_once(db: Path) -> None:
    """Assert every invoice the journal says was processed was created once (the ones left unsettled not at all)."""
    settled = rows(db, "SELECT count(*) FROM inbox WHERE status = 'processed'")[0][0]
    assert rows(db, "SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices") == [(settled, settled)]
