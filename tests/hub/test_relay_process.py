"""The relay of `edinbox run` in a child process: killed, it is started again and nothing is lost; crashing at every
start, it is started again after growing waits while the hub settles on; stopped by a configuration error, it stops
the hub with that error in one line; it stops with the hub, even when the hub is killed; the database URL never
shows in its command line."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import time
from pathlib import Path
from urllib.parse import unquote

import pytest

from edinbox._errors import TransientError
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.config._fault import FaultPoint
from edinbox.hub.demo._traffic import PARTNERS
from edinbox.hub.relay._process import RelayProcess
from edinbox.metrics import Metrics
from edinbox.sources.spool import publish
from hub_ops import init
from servers import free_port

from .test_acknowledgments import agreed
from .test_outage import HubProcess, invoices, wait_for

_CHILD = "edinbox.hub.relay._child"


def children(parent: int) -> list[int]:
    """The live relay processes whose parent is `parent` (zombies are dead)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        alive = not fields.get("State", "").startswith(("Z", "X"))
        if alive and _CHILD in cmdline and fields.get("PPid", "").strip() == str(parent):
            found.append(int(entry.name))
    return found


def gone(pid: int) -> bool:
    """Whether `pid` names no live process (a zombie nobody reaped is dead too)."""
    try:
        state = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State:"))
    except (OSError, StopIteration):
        return True
    return state.split()[1] in ("Z", "X")


def sent_keys(db: Path) -> tuple[int, int]:
    """(rows of the outbox, rows marked sent)."""
    with sqlite3.connect(db, timeout=30) as connection:
        return connection.execute("SELECT count(*), count(sent_at) FROM inbox_outbox").fetchone()


def arrived(out: Path) -> set[str]:
    """The producer ids (outbox keys) of every file that reached a partner's outbound spool."""
    found = set()
    for partner in PARTNERS:
        folder = out / partner.id / "inbound"
        if folder.is_dir():
            found.update(unquote(name.split("~", 1)[1].removesuffix(".edi")) for name in os.listdir(folder))
    return found


async def test_a_relay_child_killed_is_started_again_and_nothing_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The relay's child killed with SIGKILL while the hub runs: one `relay-exited` line, a second child, and every
    acknowledgment of the 60 invoices (before and after the kill) marked sent and in its partner's folder."""
    spool, out, db = tmp_path / "spool", tmp_path / "out", tmp_path / "hub.db"
    config = agreed(HubConfig(db=f"sqlite:///{db}", source=f"dir://{spool}", poll_timeout=0.2), out)
    await init(config)
    await publish(config.source, invoices(30))
    caplog.set_level(logging.INFO, logger="edinbox.hub")
    async with open_hub(config) as hub:
        running = asyncio.ensure_future(hub.run())
        relay = await _relay_of(hub)
        await _until(lambda: sent_keys(db)[1] > 0, "the first child's first sends")
        first = relay.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await _until(lambda: relay.started == 2 and relay.pid is not None, "a second child")
        await publish(config.source, invoices(30, start=30))
        await _until(lambda: sent_keys(db)[0] >= 60 and sent_keys(db)[0] == sent_keys(db)[1], "every row sent")
        hub.stop.set()
        await asyncio.wait_for(running, timeout=60)
    total, sent = sent_keys(db)
    assert total == sent >= 60  # at least a 997 per invoice
    with sqlite3.connect(db) as connection:
        keys = {k for (k,) in connection.execute("SELECT key FROM inbox_outbox")}
    assert keys == arrived(out)
    assert len([r for r in caplog.records if r.getMessage().startswith("relay-exited ")]) == 1
    assert gone(first)


async def test_a_relay_child_that_dies_at_every_start_is_started_again_later_each_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The first three children die as they start (relay_start:3): three `relay-exited` lines announcing waits of 1,
    2 and 4 s, each kept; the hub settles 60 invoices meanwhile (their acknowledgments wait in the outbox); the
    fourth child sends them all; `relay_restarts` is 3 in the totals and in the metrics."""
    spool, out, db = tmp_path / "spool", tmp_path / "out", tmp_path / "hub.db"
    config = agreed(HubConfig(db=f"sqlite:///{db}", source=f"dir://{spool}", poll_timeout=0.2), out)
    await init(config)
    await publish(config.source, invoices(30))
    caplog.set_level(logging.INFO, logger="edinbox.hub")
    metrics = Metrics()
    async with open_hub(config, fault=FaultPoint("relay_start", 3), metrics=metrics) as hub:
        running = asyncio.ensure_future(hub.run())
        relay = await _relay_of(hub)
        await _until(lambda: len(_exited(caplog)) >= 2, "two children dead")
        await publish(config.source, invoices(30, start=30))
        await _until(lambda: sent_keys(db)[0] >= 60, "the hub to settle 60 invoices")
        assert relay.started < 4
        assert sent_keys(db)[1] == 0  # no child lived to send anything
        await _until(lambda: relay.started == 4, "a fourth child")
        fourth = time.time()
        await _until(lambda: sent_keys(db)[0] == sent_keys(db)[1], "every row sent")
        hub.stop.set()
        totals = await asyncio.wait_for(running, timeout=60)
    exited = _exited(caplog)
    assert [line.getMessage().split()[1:] for line in exited] == [
        ["status=-9", "restart_in_s=1.0", "restarts=1"],
        ["status=-9", "restart_in_s=2.0", "restarts=2"],
        ["status=-9", "restart_in_s=4.0", "restarts=3"],
    ]
    assert exited[1].created - exited[0].created >= 1.0
    assert exited[2].created - exited[1].created >= 2.0
    assert fourth - exited[2].created >= 4.0
    assert totals["relay_restarts"] == 3
    assert metrics.registry.get_sample_value("edinbox_relay_restarts_total", {"consumer": config.consumer}) == 3
    with sqlite3.connect(db) as connection:
        keys = {k for (k,) in connection.execute("SELECT key FROM inbox_outbox")}
    assert len(keys) >= 60
    assert keys == arrived(out)


async def test_relay_children_dying_for_longer_than_give_up_after_stop_the_hub(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every child dies as it starts (relay_start:100) and give_up_after is 2 s: once the children kept dying that
    long, the hub gives up with a TransientError saying so, as after an outage that long, instead of starting
    children a minute apart forever; each death was logged first."""
    spool, out = tmp_path / "spool", tmp_path / "out"
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    config = agreed(HubConfig(db=db, source=f"dir://{spool}", poll_timeout=0.2, give_up_after="2s"), out)
    await init(config)
    caplog.set_level(logging.INFO, logger="edinbox.hub")
    async with open_hub(config, fault=FaultPoint("relay_start", 100)) as hub:
        with pytest.raises(TransientError, match="the relay's process keeps dying"):
            await asyncio.wait_for(hub.run(), timeout=60)
    assert 2 <= len(_exited(caplog)) <= 4


def test_a_relay_child_stopped_by_a_configuration_error_stops_the_hub(tmp_path: Path) -> None:
    """The SQLite database's folder renamed while `edinbox run` works (the hub keeps its open file), then the relay
    child killed: the next child cannot open the database, a configuration error; the hub is not restarting it but
    exits 1 with that error as its last line, and no traceback."""
    spool, folder = tmp_path / "spool", tmp_path / "db"
    folder.mkdir()
    db = f"sqlite:///{folder / 'hub.db'}"
    asyncio.run(init(HubConfig(db=db, source=f"dir://{spool}")))
    (tmp_path / "hub.toml").write_text(f'[partners."*"]\noutbound = "dir://{tmp_path / "out"}"\n', encoding="utf-8")
    hub = HubProcess("--config", str(tmp_path / "hub.toml"), "--db", db, "--source", f"dir://{spool}")
    try:
        wait_for(lambda: bool(children(hub.proc.pid)), timeout=60, what="the relay child")
        (child,) = children(hub.proc.pid)
        folder.rename(tmp_path / "moved")
        os.kill(child, signal.SIGKILL)
    finally:
        code = hub.ended()
    assert code == 1
    assert hub.lines[-1] == (
        f"Error: the relay's process stopped: cannot open {db}: the folder {folder} does not exist"
    ), hub.lines
    assert len(hub.events("relay-exited")) == 1
    assert not any("Traceback" in line for line in hub.lines)
    assert not children(hub.proc.pid)


def test_a_relay_child_that_gives_up_on_an_outage_gives_the_hub_up(tmp_path: Path) -> None:
    """`edinbox run --give-up-after 2s` acknowledging to a partner whose NATS server is not there: the hub settles
    the invoice, its relay child waits out the broker for 2 s, gives up and is not started again; the hub exits 2 with
    the broker's error in one line, no traceback, and leaves no child behind."""
    spool, db = tmp_path / "spool", f"sqlite:///{tmp_path / 'hub.db'}"
    asyncio.run(init(HubConfig(db=db, source=f"dir://{spool}")))
    asyncio.run(publish(f"dir://{spool}", invoices(1)))
    nowhere = f"nats://127.0.0.1:{free_port()}?stream=acks&subject=acks"
    (tmp_path / "hub.toml").write_text(f'[partners."*"]\noutbound = "{nowhere}"\n', encoding="utf-8")
    hub = HubProcess(
        "--config", str(tmp_path / "hub.toml"), "--db", db, "--source", f"dir://{spool}", "--give-up-after", "2s"
    )
    code = hub.ended()
    assert code == 2, hub.lines
    assert hub.lines[-1].startswith("Error: gave up after 2s: the relay's process stopped: "), hub.lines
    assert len(hub.events("settled")) == 1
    assert not hub.events("relay-exited")
    assert not any("Traceback" in line for line in hub.lines)
    assert not children(hub.proc.pid)


async def test_a_stopped_run_leaves_no_relay_child(tmp_path: Path) -> None:
    """After `run` returns (stopped), its relay child has exited and been reaped."""
    config = agreed(HubConfig(db=f"sqlite:///{tmp_path / 'hub.db'}", source=f"dir://{tmp_path / 'spool'}"), tmp_path)
    await init(config)
    async with open_hub(config) as hub:
        running = asyncio.ensure_future(hub.run())
        relay = await _relay_of(hub)
        await _until(lambda: relay.pid is not None, "the child")
        pid = relay.pid
        assert pid is not None
        hub.stop.set()
        await asyncio.wait_for(running, timeout=60)
    assert gone(pid)
    assert not children(os.getpid())


def test_a_killed_hub_takes_its_relay_child_along(tmp_path: Path) -> None:
    """`edinbox run` acknowledging to a partner, killed with SIGKILL: its relay child sees the end of its stdin and
    exits within seconds; its command line never held the database URL."""
    spool, db = tmp_path / "spool", f"sqlite:///{tmp_path / 'hub.db'}"
    asyncio.run(init(HubConfig(db=db, source=f"dir://{spool}")))
    (tmp_path / "hub.toml").write_text(f'[partners."*"]\noutbound = "dir://{tmp_path / "out"}"\n', encoding="utf-8")
    hub = HubProcess("--config", str(tmp_path / "hub.toml"), "--db", db, "--source", f"dir://{spool}")
    child = 0
    try:
        wait_for(lambda: bool(children(hub.proc.pid)), timeout=60, what="the relay child")
        (child,) = children(hub.proc.pid)
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace")
        assert str(tmp_path) not in cmdline
        assert "sqlite" not in cmdline
        hub.proc.kill()
        hub.proc.wait(timeout=60)
        wait_for(lambda: gone(child), timeout=30, what="the relay child to exit")
    finally:
        if hub.proc.poll() is None:
            hub.proc.kill()
            hub.proc.wait(timeout=60)
        if child and not gone(child):
            os.kill(child, signal.SIGKILL)


def _exited(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The `relay-exited` records so far."""
    return [r for r in caplog.records if r.getMessage().startswith("relay-exited ")]


async def _relay_of(hub: object) -> RelayProcess:
    """The hub's relay child once it runs."""
    found: list[RelayProcess] = []

    def started() -> bool:
        relay = getattr(hub, "_relay_beside", None)
        if isinstance(relay, RelayProcess):
            found.append(relay)
        return bool(found)

    await _until(started, "the relay beside the hub")
    return found[0]


async def _until(condition: object, what: str, *, timeout: float = 60) -> None:
    """Poll `condition` (a callable) on the loop until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
