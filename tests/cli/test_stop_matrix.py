"""SIGTERM stops every long-running command within a bounded time in each of its states, and a second signal at once.

One module fixture starts every cell's process at once (`edinbox run`, `relay`, `console` and `chaos`), some on a
private PostgreSQL that is then stopped, so they wait out an outage; the others idle or relay to a broker that is
down. Each test then signals one cell and measures how long its process takes to exit. One more `run` holds a lease
on an invoice a slow HTTP accounting service is still answering when it is signalled. The idle `run` on each source
is tests/hub/test_stop.py's matrix.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from edinbox import Inbox
from edinbox.hub.config._model import HubConfig
from edinbox.sources.spool import publish
from hub.test_outage import invoices
from hub_ops import init
from servers import PrivatePostgres, free_port

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="signals as a process manager sends them")

BOUND = 10.0
"""Seconds a command may take to exit after SIGTERM, whatever it is doing."""
AT_ONCE = 3.0
"""Seconds a second signal may take to end a command (a loaded machine's margin)."""
SLOW = 3.0
"""Seconds the slow accounting service takes to answer each invoice."""


@dataclass
class Command:
    """An `edinbox` command in a subprocess, its output lines (stdout and stderr together) collected as they come."""

    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        """Start the process."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")} | self.env
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "edinbox.cli", *self.args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def said(self, text: str) -> bool:
        """Whether a line so far contains `text`."""
        return any(text in line for line in self.lines)

    def signalled(self, *signals: signal.Signals) -> tuple[int, float]:
        """Send `signals` one after the other; the exit status and the seconds it took (killed after a guard)."""
        began = time.monotonic()
        for sig in signals:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        took = time.monotonic() - began
        self._reader.join(timeout=10)
        return code, took

    def output(self) -> str:
        """Every line so far, for an assertion's message."""
        return "\n".join(self.lines[-60:])


def wait_for(check: Callable[[], bool], *, timeout: float, what: str) -> None:
    """Poll `check` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def answers(url: str, status: int) -> bool:
    """Whether `url` answers `status` now."""
    try:
        return httpx.get(url, timeout=5).status_code == status
    except httpx.HTTPError:
        return False


class SlowAccounting(ThreadingHTTPServer):
    """An accounting API that takes SLOW seconds to answer each POST with 201 and a new id; `asked` is set by the
    first request."""

    daemon_threads = True

    def __init__(self) -> None:
        """Listen on a free loopback port."""
        self.asked = threading.Event()
        self.count = 0
        super().__init__(("127.0.0.1", 0), _SlowHandler)

    @property
    def url(self) -> str:
        """The POST URL of invoices."""
        return f"http://127.0.0.1:{self.server_address[1]}/invoices"


class _SlowHandler(BaseHTTPRequestHandler):
    server: SlowAccounting

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.asked.set()
        time.sleep(SLOW)
        self.server.count += 1
        body = json.dumps({"id": self.server.count}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _console(db: str, port: int) -> Command:
    """`edinbox console` on `db` and `port`."""
    return Command(("console", "--db", db, "--port", str(port)))


def _chaos(db: str, folder: Path) -> Command:
    """`edinbox chaos` on a spool of its own and `db`, waiting (its hub running) until signalled."""
    return Command(
        (
            "chaos",
            "--source",
            f"dir://{folder / 'spool'}",
            "--db",
            db,
            "--messages",
            "50",
            "--duplicates",
            "0",
            "--hubs",
            "1",
            "--kill-every",
            "0",
            "--drain-idle",
            "600",
            "--timeout",
            "600",
            "--dir",
            str(folder / "work"),
        )
    )


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Command]]:
    """Every cell's process, started at once, brought to its state: the private PostgreSQL is stopped once the
    processes on it are up, and stays down."""
    root = tmp_path_factory.mktemp("stop")
    with PrivatePostgres() as pg:
        down = pg.url
        pg_spool = root / "pg-spool"
        asyncio.run(init(HubConfig(db=down, source=f"dir://{pg_spool}")))
        asyncio.run(publish(f"dir://{pg_spool}", invoices(400)))
        lite = f"sqlite:///{root / 'hub.db'}"
        asyncio.run(init(HubConfig(db=lite)))
        relayed = f"sqlite:///{root / 'relay.db'}"
        nowhere = f"nats://127.0.0.1:{free_port()}?stream=acks&subject=acks.out&open_timeout=1"
        with Inbox(relayed, consumer="hub") as inbox:
            inbox.create_schema()
            inbox.transaction(lambda tx: tx.publish(nowhere, b"997", key="ack-1"))
        ports = {name: free_port() for name in ("console-idle", "console-db-down", "console-twice")}
        commands = {
            "run-db-down": Command(("run", "--db", down, "--source", f"dir://{pg_spool}", "--batch-size", "1")),
            "relay-idle": Command(("relay", "--db", lite)),
            "relay-db-down": Command(("relay", "--db", down)),
            "relay-broker-down": Command(("relay", "--db", relayed)),
            "relay-twice": Command(("relay", "--db", lite)),
            "console-idle": _console(lite, ports["console-idle"]),
            "console-db-down": _console(down, ports["console-db-down"]),
            "console-twice": _console(lite, ports["console-twice"]),
            "chaos-running": _chaos(f"sqlite:///{root / 'chaos.db'}", root / "chaos"),
            "chaos-db-down": _chaos(down, root / "chaos-pg"),
            "chaos-twice": _chaos(f"sqlite:///{root / 'chaos-twice.db'}", root / "chaos-twice"),
        }
        try:
            for name, port in ports.items():
                wait_for(lambda p=port: answers(f"http://127.0.0.1:{p}/", 200), timeout=60, what=f"{name} to serve")
            for name in ("chaos-running", "chaos-db-down", "chaos-twice"):
                wait_for(lambda n=name: commands[n].said("published"), timeout=60, what=f"{name} to publish")
            wait_for(lambda: commands["run-db-down"].said("event=settled "), timeout=60, what="run-db-down to settle")
            pg.stop()
            commands["console-waiting"] = _console(down, free_port())  # started during the outage: it waits
            for name in ("run-db-down", "relay-db-down", "relay-broker-down", "console-waiting"):
                wait_for(lambda n=name: commands[n].said("dependency-down"), timeout=60, what=f"{name}'s outage")
            wait_for(lambda: answers(f"http://127.0.0.1:{ports['console-db-down']}/", 503), timeout=60, what="503")
            for name, command in commands.items():
                assert command.proc.poll() is None, f"{name} exited early:\n{command.output()}"
            yield commands
        finally:
            for command in commands.values():  # chaos stops its hubs on SIGTERM
                if command.proc.poll() is None:
                    command.proc.terminate()
            for command in commands.values():
                try:
                    command.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    command.proc.kill()
                    command.proc.wait()


STATES = {
    "run-db-down": 0,
    "relay-idle": 0,
    "relay-db-down": 0,
    "relay-broker-down": 0,
    "console-idle": 0,
    "console-db-down": 0,
    "console-waiting": 0,
    "chaos-running": 1,
    "chaos-db-down": 1,
}
"""Each cell signalled once, and the status its command exits with (chaos: 1, a run that proved nothing)."""


@pytest.mark.parametrize("cell", list(STATES))
def test_sigterm_stops_within_its_bound(cells: dict[str, Command], cell: str) -> None:
    """One SIGTERM ends the cell's command within BOUND seconds, with its status, and no traceback."""
    command = cells[cell]
    code, took = command.signalled(signal.SIGTERM)
    assert took < BOUND, f"{cell} exited {took:.1f} s after SIGTERM:\n{command.output()}"
    assert code == STATES[cell], command.output()
    assert not command.said("Traceback"), command.output()


def test_sigterm_in_a_lease_finishes_the_invoice_in_hand(tmp_path: Path) -> None:
    """`run` stopped while the slow accounting service answers exits 0 within BOUND seconds: the invoice whose POST
    was under way is processed, the batch's others are not begun (they go back to the spool)."""
    db, spool = f"sqlite:///{tmp_path / 'hub.db'}", f"dir://{tmp_path / 'spool'}"
    asyncio.run(init(HubConfig(db=db, source=spool)))
    asyncio.run(publish(spool, invoices(5)))
    with SlowAccounting() as sink:
        threading.Thread(target=sink.serve_forever, daemon=True).start()
        command = Command(("run", "--db", db, "--source", spool, "--accounting", sink.url, "--lease", "60s"))
        wait_for(sink.asked.is_set, timeout=60, what="the hub's first POST to the slow accounting service")
        code, took = command.signalled(signal.SIGTERM)
        sink.shutdown()
    assert took < BOUND, f"exited {took:.1f} s after SIGTERM:\n{command.output()}"
    assert code == 0, command.output()
    assert sink.count == 1
    stopped = [line for line in command.lines if "event=stopped " in f"{line} "]
    assert stopped, command.output()
    assert "processed=1 " in f"{stopped[-1]} ", command.output()


_AT_ONCE = {128 + signal.SIGINT, 128 + signal.SIGTERM}
AGAIN = {"relay": _AT_ONCE, "console": _AT_ONCE, "chaos": {1}}
"""The statuses each command may exit with on a second signal: 128 + the second one's number, and when both are
pending at once the kernel delivers the lower number (SIGINT) first, so the second is then SIGTERM (chaos: 1, as on
Ctrl-C: a run that proved nothing)."""


@pytest.mark.parametrize("command", list(AGAIN))
def test_a_second_signal_stops_at_once(cells: dict[str, Command], command: str) -> None:
    """SIGTERM and then SIGINT (two kinds: the kernel merges a second pending SIGTERM into the first) end the
    command at once."""
    process = cells[f"{command}-twice"]
    code, took = process.signalled(signal.SIGTERM, signal.SIGINT)
    assert took < AT_ONCE, f"{command} exited {took:.1f} s after its second signal:\n{process.output()}"
    assert code in AGAIN[command], f"{command} exited {code}:\n{process.output()}"
