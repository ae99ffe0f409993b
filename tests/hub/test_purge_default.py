"""`edinbox run` purges by default: rows older than the 30-day retention go without any flag, `--purge-every off`
keeps them, and `edinbox doctor` warns while the journal holds them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edinbox.hub import HubConfig
from hub.test_outage import HubProcess, wait_for
from hub.test_purge_run import OLD, backdate, journal_rows, seed
from hub_ops import init


@pytest.fixture
def journal(tmp_path: Path) -> HubConfig:
    """A SQLite journal with OLD processed rows settled 40 days ago, one dead row as old, and ten recent rows."""
    config = HubConfig(db=f"sqlite:///{tmp_path / 'hub.db'}", source=f"dir://{tmp_path / 'spool'}", consumer="hub")
    asyncio.run(init(config))
    asyncio.run(seed(config))
    backdate(config, "old-", 38)
    backdate(config, "dead-", 38)
    return config


def run_hub(config: HubConfig, *flags: str) -> HubProcess:
    """`edinbox run` on the journal and its spool, with no setting but `flags`."""
    return HubProcess("--db", config.db, "--source", config.source, "--consumer", config.consumer, *flags)


def doctor(config: HubConfig) -> dict[str, dict[str, str]]:
    """`edinbox doctor --json`'s checks by name."""
    done = subprocess.run(
        [sys.executable, "-m", "edinbox.cli", "doctor", "--db", config.db, "--consumer", config.consumer, "--json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return {row["check"]: row for row in json.loads(done.stdout)}


def test_a_fresh_run_purges_rows_older_than_the_retention(journal: HubConfig) -> None:
    """A `run` with no purge flag deletes the processed rows settled 40 days ago at its start (one `purged` line)
    and keeps the recent rows and the dead one; doctor's warning about them is gone after."""
    assert asyncio.run(journal_rows(journal)) == (OLD, 1, 10)
    hub = run_hub(journal)
    try:
        wait_for(lambda: bool(hub.events("purged")), timeout=60, what="the purge at start")
    finally:
        code = hub.stop()
    assert code == 0, "\n".join(hub.lines)
    assert f"rows={OLD}" in hub.events("purged")[0]
    assert asyncio.run(journal_rows(journal)) == (0, 1, 10)
    assert doctor(journal)["purge"]["status"] == "ok"


def test_purge_every_off_keeps_them_and_doctor_warns(journal: HubConfig) -> None:
    """`run --purge-every off` deletes nothing and logs no purge; doctor warns about the rows older than the
    retention, naming how many."""
    hub = run_hub(journal, "--purge-every", "off")
    try:
        wait_for(lambda: bool(hub.events("started")), timeout=60, what="the hub's start")
        time.sleep(3)  # the default purge runs at start: it would have logged by now
    finally:
        code = hub.stop()
    assert code == 0, "\n".join(hub.lines)
    assert not hub.events("purged")
    assert asyncio.run(journal_rows(journal)) == (OLD, 1, 10)
    check = doctor(journal)["purge"]
    assert check["status"] == "warn"
    assert f"{OLD} settled rows are older than the retention 30d" in check["detail"]
