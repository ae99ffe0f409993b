"""The spool on a full disk: parking a file (its `.reason` written, the hub's reject) fails with ENOSPC mid-run.
The hub waits it out, and once space is back every file it could not park is parked, once, with its reason."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from edinbox.hub.config._model import HubConfig
from edinbox.sources.spool import publish
from hub_ops import init

from .poison import bad_date
from .test_outage import HubProcess, invoices, spool_empty, wait_for

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0, reason="mounts a small tmpfs (root on Linux)"
)


@pytest.fixture
def small_spool(tmp_path: Path) -> Iterator[Path]:
    """A spool folder on a tmpfs of 1 MiB of its own, unmounted afterwards."""
    path = tmp_path / "spool"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> None:
    """Write zeros to `path` until its file system is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    finally:
        os.close(fd)


def failed(hub: HubProcess, name: str) -> bool:
    """Whether the hub logged that parking the file `name` (as it appears in the line) found no room."""
    parking = ("cannot park", "event=cannot-park")
    return any(any(p in line for p in parking) and name in line and "No space left" in line for line in hub.lines)


def parked(spool: Path) -> dict[str, str]:
    """The files in rejected/ with the first line of their `.reason`."""
    folder = spool / "rejected"
    return {
        name: (folder / f"{name}.reason").read_text().splitlines()[0]
        for name in os.listdir(folder)
        if not name.endswith(".reason") and (folder / f"{name}.reason").exists()
    }


def test_files_that_could_not_be_parked_on_a_full_disk_are_parked_once_space_is_back(
    small_spool: Path, tmp_path: Path
) -> None:
    """A poison interchange (the hub's reject) and a file with a newline in its name (parked by the spool itself)
    between 20 good invoices, the disk full: each good invoice is created once, the hub stays up, and once the disk
    has room again both bad files leave processing/ for rejected/, each once with its reason."""
    db = tmp_path / "hub.db"
    asyncio.run(init(HubConfig(db=f"sqlite:///{db}")))
    source = f"dir://{small_spool}"
    asyncio.run(publish(source, [*invoices(10), ("poison", bad_date()), *invoices(10, start=10)]))
    (small_spool / "inbound" / "two\nlines.edi").write_bytes(b"ISA newline")
    fill(small_spool / "filler")
    hub = HubProcess("--db", f"sqlite:///{db}", "--source", f"{source}?claim_timeout=1", "--batch-size", "4")
    try:
        wait_for(lambda: len(hub.events("settled")) >= 21, timeout=60, what="every file seen once")
        wait_for(lambda: failed(hub, "poison.edi in rejected/"), timeout=30, what="the hub's reject to fail")
        two_lines = 'file="two\\\\x0alines.edi"'  # the name as the spool shows it, quoted in the logfmt line
        wait_for(lambda: failed(hub, two_lines), timeout=30, what="the spool's own parking to fail")
        assert parked(small_spool) == {}  # nothing could be parked: no room for a reason
        (small_spool / "filler").unlink()
        wait_for(lambda: spool_empty(small_spool), timeout=30, what="the stranded claims to be settled")
        wait_for(lambda: len(parked(small_spool)) == 2, timeout=30, what="both bad files parked")
        assert hub.proc.poll() is None
        assert hub.stop() == 0
    finally:
        if hub.proc.poll() is None:
            hub.proc.kill()
    reasons = sorted(parked(small_spool).values())
    assert "not a date" in reasons[0]
    assert reasons[1].startswith("the file name contains control characters")
    archived = sorted(name.split("#")[0] for name in os.listdir(small_spool / "archive"))
    assert len(archived) == len(set(archived)) == 20
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices").fetchone() == (
            20,
            20,
        )
    assert not [line for line in hub.lines if "Traceback" in line or " level=error " in line], "\n".join(hub.lines)


def test_a_reject_that_finds_no_room_does_not_hold_back_its_batch_mates(small_spool: Path, tmp_path: Path) -> None:
    """A poison interchange first in a batch of four, the disk full: its reject fails, but the three invoices after
    it are archived at once (the rejects are handed back last), so they are not handed out again as duplicates."""
    db = tmp_path / "hub.db"
    asyncio.run(init(HubConfig(db=f"sqlite:///{db}")))
    source = f"dir://{small_spool}"
    asyncio.run(publish(source, [("poison", bad_date()), *invoices(3)]))
    fill(small_spool / "filler")
    hub = HubProcess("--db", f"sqlite:///{db}", "--source", f"{source}?claim_timeout=1", "--batch-size", "4")
    try:
        wait_for(lambda: failed(hub, "poison.edi in rejected/"), timeout=30, what="the hub's reject to fail")
        wait_for(lambda: len(os.listdir(small_spool / "archive")) == 3, timeout=10, what="the invoices archived")
        (small_spool / "filler").unlink()
        wait_for(lambda: len(parked(small_spool)) == 1, timeout=30, what="the poison parked")
        assert hub.stop() == 0
    finally:
        if hub.proc.poll() is None:
            hub.proc.kill()
    outcomes = [line.split(" outcome=")[1].split()[0] for line in hub.events("settled")]
    assert outcomes.count("processed") == 3
    assert "duplicate" not in outcomes
