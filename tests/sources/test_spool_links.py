"""The spool trusts no path: a subfolder swapped for a symlink is refused (at open, or at the next listing while it
runs), never followed; a hard-linked file is parked unread; the publisher writes through no symlinked folder."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edinbox import ConfigurationError, SourceError
from edinbox._message import Outgoing
from edinbox.sources import reach
from edinbox.sources._spool_files import SpoolPublisher
from edinbox.sources.spool import FOLDERS, SpoolSource, publish

SECRET = b"a file outside the spool that must never be read or moved"


def _outside(tmp_path: Path) -> Path:
    """A folder outside the spool holding one file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.edi").write_bytes(SECRET)
    return outside


def _swap(spool: Path, name: str, target: Path) -> None:
    """Replace the spool's subfolder `name` by a symlink to `target` (the old folder moved aside)."""
    folder = spool / name
    if folder.exists():
        folder.rename(spool / f"{name}.old")
    folder.symlink_to(target, target_is_directory=True)


@pytest.mark.parametrize("name", FOLDERS)
async def test_a_subfolder_that_is_a_symlink_is_refused_at_open(tmp_path: Path, name: str) -> None:
    """Each subfolder of the spool swapped for a symlink makes open a ConfigurationError naming it; the link's
    target is left as it was."""
    spool, outside = tmp_path / "spool", _outside(tmp_path)
    await publish(f"dir://{spool}", [("m", b"ISA")])
    (spool / "processing").mkdir(exist_ok=True)
    _swap(spool, name, outside)
    with pytest.raises(ConfigurationError, match=f"{spool / name} is a symbolic link"):
        async with SpoolSource(spool, consumer="c"):
            pass
    assert os.listdir(outside) == ["victim.edi"]
    assert (outside / "victim.edi").read_bytes() == SECRET


async def test_doctor_names_a_symlinked_subfolder_and_changes_nothing(tmp_path: Path) -> None:
    """`reach` (what doctor runs for the source) fails on a spool whose rejected/ is a symlink, naming it, and creates
    nothing; a sound spool passes."""
    spool, outside = tmp_path / "spool", _outside(tmp_path)
    async with SpoolSource(spool, consumer="c"):
        pass
    assert await reach(f"dir://{spool}", consumer="c") is None
    _swap(spool, "rejected", outside)
    before = sorted(os.listdir(spool))
    with pytest.raises(ConfigurationError, match=f"{spool / 'rejected'} is a symbolic link"):
        await reach(f"dir://{spool}", consumer="c")
    assert sorted(os.listdir(spool)) == before
    assert os.listdir(outside) == ["victim.edi"]


async def test_a_rejected_folder_swapped_while_running_is_never_written_through(tmp_path: Path) -> None:
    """rejected/ swapped for a symlink after open: a reject still lands in the folder the source opened (the moved
    one), nothing is written into the link's target, and the next listing stops the source with a
    ConfigurationError naming the folder."""
    spool, outside = tmp_path / "spool", _outside(tmp_path)
    await publish(f"dir://{spool}", [("chosen-name", b"attacker's content")])
    async with SpoolSource(spool, consumer="c") as source:
        [delivery] = await source.receive(max_messages=1, timeout=2)
        _swap(spool, "rejected", outside)
        await source.reject(delivery, reason="not EDI")
        with pytest.raises(ConfigurationError, match=f"{spool / 'rejected'} is a symbolic link"):
            await source.receive(max_messages=1, timeout=0.2)
    assert os.listdir(outside) == ["victim.edi"]
    parked = sorted(os.listdir(spool / "rejected.old"))
    assert len(parked) == 2
    assert parked[1] == f"{parked[0]}.reason"


async def test_an_inbound_folder_swapped_while_running_moves_nothing_from_its_target(tmp_path: Path) -> None:
    """inbound/ swapped for a symlink to another folder after open: the files there are neither claimed nor read;
    the source stops with a ConfigurationError at its next listing."""
    spool, outside = tmp_path / "spool", _outside(tmp_path)
    async with SpoolSource(spool, consumer="c") as source:
        assert await source.receive(max_messages=1, timeout=0.1) == []
        _swap(spool, "inbound", outside)
        await asyncio.sleep(0.06)  # past the poll interval: the next receive lists again
        with pytest.raises(ConfigurationError, match=f"{spool / 'inbound'} is a symbolic link"):
            await source.receive(max_messages=1, timeout=0.2)
    assert os.listdir(outside) == ["victim.edi"]
    assert (outside / "victim.edi").read_bytes() == SECRET


async def test_an_inbound_folder_replaced_by_a_real_folder_is_opened_again(tmp_path: Path) -> None:
    """inbound/ replaced by another real folder while the source runs: the source opens the new one (a folder, no
    link) and delivers its files."""
    spool = tmp_path / "spool"
    async with SpoolSource(spool, consumer="c") as source:
        assert await source.receive(max_messages=1, timeout=0.1) == []
        (spool / "inbound").rename(spool / "inbound.old")
        (spool / "inbound").mkdir()
        await publish(f"dir://{spool}", [("fresh", b"x")])
        [delivery] = await source.receive(max_messages=1, timeout=2)
        await source.ack(delivery)
    assert delivery.key == "fresh"


async def test_a_hard_linked_file_is_parked_unread(tmp_path: Path) -> None:
    """A file in inbound/ with a second hard link (its other name outside the spool) is parked with the reason, its
    bytes never read into the delivery, and the outside name keeps its content."""
    spool, outside = tmp_path / "spool", _outside(tmp_path)
    async with SpoolSource(spool, consumer="c") as source:
        os.link(outside / "victim.edi", spool / "inbound" / "linked.edi")
        await publish(f"dir://{spool}", [("plain", b"ISA plain")])
        got = await source.receive(max_messages=5, timeout=2)
        for d in got:
            await (source.reject(d, reason=d.reason) if d.reason else source.ack(d))
    refused = [d for d in got if d.reason]
    assert [d.key for d in got if not d.reason] == ["plain"]
    [parked] = refused
    assert "2 hard links" in (parked.reason or "")
    assert parked.payload == b""
    assert (outside / "victim.edi").read_bytes() == SECRET
    assert (spool / "rejected" / "linked.edi.reason").read_text().startswith("a file with 2 hard links")


async def test_a_symlink_in_processing_is_never_taken_for_a_dead_claim(tmp_path: Path) -> None:
    """A symlink in processing/ named like a dead process's claim folder, pointing at another folder: recovery moves
    none of that folder's files into inbound/."""
    spool, outside = tmp_path / "spool", _outside(tmp_path)
    async with SpoolSource(spool, consumer="c"):
        pass
    (spool / "processing" / f"c@{os.uname().nodename}@999999999@deadbeef").symlink_to(outside)
    async with SpoolSource(spool, consumer="c") as source:
        assert source.recover() == 0
        assert await source.receive(max_messages=1, timeout=0.1) == []
    assert os.listdir(outside) == ["victim.edi"]


@pytest.mark.parametrize("name", ["inbound", "tmp"])
async def test_the_publisher_writes_through_no_symlinked_folder(tmp_path: Path, name: str) -> None:
    """A destination spool whose inbound/ or tmp/ is a symlink: the send is a ConfigurationError naming it (the
    relay parks the rows with that reason) and nothing is written into the link's target."""
    spool, outside = tmp_path / "spool", _outside(tmp_path)
    spool.mkdir()
    _swap(spool, name, outside)
    publisher = SpoolPublisher(f"dir://{spool}")
    await publisher.open()
    try:
        with pytest.raises(ConfigurationError, match=f"{spool / name} is a symbolic link"):
            await publisher.send([Outgoing("ack-1", b"ISA answer")])
    finally:
        await publisher.aclose()
    assert os.listdir(outside) == ["victim.edi"]


def _edinbox(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the `edinbox` command in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "edinbox.cli", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_doctor_fails_and_run_exits_1_on_a_symlinked_subfolder(tmp_path: Path) -> None:
    """With rejected/ a symlink, `doctor` reports the source as failed naming the folder (exit 1) and `run` exits 1
    with one `Error:` line, having written nothing into the link's target."""
    spool, outside = tmp_path / "spool", _outside(tmp_path)
    db, source = f"sqlite:///{tmp_path / 'hub.db'}", f"dir://{spool}"
    assert _edinbox("init", "--db", db, "--source", source).returncode == 0
    asyncio.run(publish(source, [("junk", b"not EDI: the hub would park it in rejected/")]))
    _swap(spool, "rejected", outside)
    doctor = _edinbox("doctor", "--db", db, "--source", source, "--json")
    assert doctor.returncode == 1
    [check] = [c for c in json.loads(doctor.stdout) if c["check"] == "source"]
    assert check["status"] == "fail"
    assert f"{spool / 'rejected'} is a symbolic link" in check["detail"]
    run = _edinbox("run", "--db", db, "--source", source, "--once", "--idle-timeout", "0.2")
    assert run.returncode == 1
    assert [line for line in run.stderr.splitlines() if line.startswith("Error:")] == [run.stderr.strip()]
    assert f"{spool / 'rejected'} is a symbolic link" in run.stderr
    assert os.listdir(outside) == ["victim.edi"]
    assert len(os.listdir(spool / "inbound")) == 1


async def test_settling_after_close_touches_nothing(tmp_path: Path) -> None:
    """A delivery nacked or refreshed after its source closed is a SourceError and touches nothing, even when the
    closed claim folder's descriptor number now names another folder holding a file of the claim's name."""
    spool, decoy = tmp_path / "spool", tmp_path / "decoy"
    await publish(f"dir://{spool}", [("m", b"ISA")])
    source = SpoolSource(spool, consumer="c")
    await source.open()
    [delivery] = await source.receive(max_messages=1, timeout=2)
    name = delivery.coordinates.removeprefix("dir:")
    decoy.mkdir()
    (decoy / name).write_bytes(b"decoy")
    os.utime(decoy / name, (1_000_000, 1_000_000))
    await source.aclose()
    opened = []
    try:
        while len(opened) < 32 and delivery.handle.folder not in opened:  # type: ignore[union-attr]
            opened.append(os.open(decoy, os.O_RDONLY | os.O_DIRECTORY))
        assert delivery.handle.folder in opened  # type: ignore[union-attr]
        for settle in (source.nack(delivery, delay=5), source.in_progress(delivery), source.ack(delivery)):
            with pytest.raises(SourceError):
                await settle
    finally:
        for fd in opened:
            os.close(fd)
    assert (decoy / name).stat().st_mtime == 1_000_000
    assert os.listdir(decoy) == [name]
