"""The relay beside the hub, in a process of its own: `edinbox run` keeps the relay's file and socket work out of the
hub's interpreter.

Why a process: the relay's sends are system calls (a spool file's create, write, fsync, rename; a broker's socket),
and each one made by a thread of the hub's process hands the interpreter's lock back and forth with the hub's event
loop, a dozen times per acknowledgment file (18,400 context switches per 1,000 deliveries against 5,300 without
acknowledgments; writing on the loop's thread instead blocks the hub through the fsyncs, no faster). A child process
has an interpreter of its own, on the other core (bench.outbox: acknowledgments relayed by run cost 17-21 % of the
hub's throughput instead of 29 %); what it costs: a second Python process (about 40 MB, 0.4 s of CPU for its
imports), its passes contend with the hub's commits for the database (SQLite's single writer), and the totals of a
child killed by a signal are lost (its rows are not). A hub that acknowledges nothing relays in its own process.

The child (`python -m edinbox.hub.relay._child`) reads its settings as the first line of its stdin, never from
argv, so the database URL and its password never show in `ps`; it relays as `edinbox relay` does, and each further
line on its stdin wakes it (the hub writes one after each batch it acknowledged: SQLite and MariaDB cannot notify).
The end of its stdin stops it (after the pass in hand): so it stops with the hub, and also when the hub dies, even
by SIGKILL. It runs in a session of its own (a terminal's Ctrl-C reaches the hub alone, which then stops it), logs
to the hub's stderr in the hub's format, and prints its totals as one JSON line on its stdout when it stops. A child
that dies is started again (a `relay-exited` line with the wait before the next start, counted in the hub's totals
as `relay_restarts` and in `edinbox_relay_restarts_total`): a second later, then after twice the last wait for each
child that dies within a minute of its start, up to a minute; its rows were committed and are sent by the next one
(those it sent but had not marked are sent again under the same keys, as after any relay's crash); the totals of a
killed child are lost, the rows are not. The hub goes on settling deliveries meanwhile, unless children keep dying
(each within a minute of its start) for longer than `give_up_after`: the hub then gives up, as on an outage that
long (`edinbox run` exits 2). A child stopped by a
configuration error (a ConfigurationError or SchemaError: its settings, its database) is not started again: it
exits with status 78 (sysexits' EX_CONFIG, never an uncaught exception's 1) after printing the error as one JSON
line, and the hub raises that error, which stops it as its own configuration errors do (`edinbox run` exits 1).
Nor is a child whose relay gave up on an outage longer than `give_up_after` (exit status 75, EX_TEMPFAIL, the
outage's error on its last line): the hub gives up with it, as it does on its own outages (`edinbox run` exits 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edinbox._errors import ConfigurationError, InboxError, SchemaError, SourceError, StoreError, TransientError
from edinbox._urls import database_url
from edinbox.hub.config import LOGGER, FaultPoint, HubConfig, configure, log_event, rendering_json
from edinbox.hub.database import open_inbox
from edinbox.hub.relay._relay import beside
from edinbox.loop import unless_stopped

if TYPE_CHECKING:
    from edinbox.metrics import Metrics

__all__ = ["RelayProcess", "apart", "child"]

_RESTART = 1.0
"""Seconds before a child that died is started again, when the one before it did not die within `_STEADY`."""
_RESTART_MAX = 60.0
"""The longest wait before a start: the wait doubles for each child that dies within `_STEADY` of its start."""
_STEADY = 60.0
"""Seconds after which a child that dies is no longer part of a run of crashes: the next wait is `_RESTART` again."""
EXIT_CONFIGURATION = 78
"""The child's exit status after a configuration error (sysexits' EX_CONFIG): not started again."""
EXIT_GAVE_UP = 75
"""The child's exit status after an outage longer than `give_up_after` (sysexits' EX_TEMPFAIL): not started
again; the hub gives up with it."""
_ERRORS: dict[str, type[InboxError]] = {
    kind.__name__: kind for kind in (ConfigurationError, SchemaError, StoreError, SourceError, TransientError)
}
"""The errors a child reports instead of dying, by name."""
_SETTINGS = ("db", "consumer", "table", "max_attempts", "horizon", "poll_timeout", "give_up_after")
"""The settings the child needs (its journal, its idle wait, its patience with outages)."""


def apart(config: HubConfig) -> bool:
    """Whether `config`'s relay can run in a process of its own: not for a database in the hub's memory."""
    return not database_url(config.db).in_memory


class RelayProcess:
    """Runs the relay in a child process until `stop` is set, starting it again if it dies; `totals` adds up what
    the children sent and parked."""

    def __init__(
        self,
        config: HubConfig,
        *,
        stop: asyncio.Event,
        fault: FaultPoint | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """Relay `config`'s outbox; `fault` after_send:N is armed in the first child only (a fault point kills its
        process once), relay_start:N in each of the first N children; `metrics` counts the restarts."""
        self.config = config
        self.stop = stop
        self.fault = fault if fault is not None and fault.point in ("after_send", "relay_start") else None
        self.metrics = metrics
        self.totals: Counter[str] = Counter()
        """What the children sent and parked (`sent`, `parked`), and how many were started again (`restarts`)."""
        self.started = 0
        """How many children were started so far."""
        self.pid: int | None = None
        """The running child's process id."""
        self._stdin: asyncio.StreamWriter | None = None
        self.logger = logging.getLogger(LOGGER)

    async def run(self) -> Counter[str]:
        """Start the child, wait for `stop` (then end its stdin and collect its totals) or its death (then start
        another after a wait that grows while children keep dying soon after their start); raise the configuration
        error that stopped a child, and a TransientError once children kept dying longer than `give_up_after`."""
        wait = _RESTART
        patience = self.config.give_up_after
        dying_since: float | None = None  # since when children keep dying, each within _STEADY of its start
        while not self.stop.is_set():
            began = time.monotonic()
            code = await self._one()
            if self.stop.is_set():  # it stopped with the hub
                break
            died = time.monotonic()
            if died - began >= _STEADY:  # a child that lived: a run of deaths starts with its own
                wait = _RESTART
                dying_since = died
            elif dying_since is None:
                dying_since = began
            self.totals["restarts"] += 1
            if self.metrics is not None:
                self.metrics.relay_restarted(consumer=self.config.consumer)
            fields = {"status": code, "restart_in_s": wait, "restarts": self.totals["restarts"]}
            log_event(self.logger, logging.WARNING, "relay-exited", fields)
            dying = time.monotonic() - dying_since
            if patience is not None and dying > patience.total_seconds():
                raise TransientError(f"the relay's process keeps dying: for {dying:.0f} s, the last with status {code}")
            await unless_stopped(asyncio.sleep(wait), self.stop)
            wait = min(wait * 2, _RESTART_MAX)
        return self.totals

    async def _one(self) -> int:
        """One child's life; its exit status."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "edinbox.hub.relay._child",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=_environment(),
        )
        if proc.stdin is None or proc.stdout is None:  # pragma: no cover - both were asked for as pipes
            raise RuntimeError("the relay's process has no pipes")
        self.started += 1
        self.pid = proc.pid
        fault = self._armed()
        try:
            proc.stdin.write(json.dumps(self._settings(fault)).encode() + b"\n")
            self._stdin = proc.stdin
            died = asyncio.ensure_future(proc.wait())
            try:
                await unless_stopped(asyncio.shield(died), self.stop)
            finally:
                self._stdin = None
                _end(proc.stdin)
                out = await proc.stdout.read()
                code = await died
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise
        finally:
            self.pid = None
        last = (out.decode(errors="replace").splitlines() or [""])[-1]
        if code in (EXIT_CONFIGURATION, EXIT_GAVE_UP):
            raise _error(last, code)
        with contextlib.suppress(ValueError):
            if last:
                self.totals.update({k: int(v) for k, v in json.loads(last).items()})
        return code

    def _armed(self) -> FaultPoint | None:
        """The fault point of the child being started: after_send:N for the first child only, a fresh relay_start:1
        for each of the first N children when relay_start:N."""
        fault = self.fault
        if fault is None or fault.point != "relay_start":
            self.fault = None
            return fault
        return FaultPoint("relay_start", 1) if self.started <= fault.after else None

    def _settings(self, fault: FaultPoint | None) -> dict[str, Any]:
        root = logging.getLogger()
        credentials = self.config.credentials
        return {
            # the URLs that give the outbox's rows their passwords, the partners' outbound ones included
            "config": {**self.config.model_dump(include=set(_SETTINGS)), "destinations": " ".join(credentials)},
            "urls": [u for u in (self.config.db, self.config.source, self.config.accounting, *credentials) if u],
            "level": root.getEffectiveLevel() if root.handlers else None,
            "json": rendering_json(),
            "fault": [fault.point, fault.after] if fault is not None else None,
        }

    def wake(self) -> None:
        """Have the child run its next pass now: a batch's acknowledgments are committed."""
        if self._stdin is not None and not self._stdin.is_closing():
            with contextlib.suppress(OSError, RuntimeError):
                self._stdin.write(b"\n")


def _error(line: str, code: int) -> InboxError:
    """The error a child reported as its last line (`{"error": ..., "message": ...}`) before exiting with `code`."""
    try:
        report = json.loads(line)
        kind, message = _ERRORS[report["error"]], str(report["message"])
    except (ValueError, KeyError, TypeError):
        kind = ConfigurationError if code == EXIT_CONFIGURATION else TransientError
        message = f"exit status {code} without a report"
    return kind(f"the relay's process stopped: {message}")


def _end(stdin: asyncio.StreamWriter) -> None:
    """Close the child's stdin: the end of it stops the child."""
    with contextlib.suppress(OSError, RuntimeError):
        stdin.close()


def _environment() -> dict[str, str]:
    """The hub's environment for the child, with this copy of edinbox first on its path (it runs the hub's code);
    no fault point: the child takes its settings from its stdin only."""
    env = {k: v for k, v in os.environ.items() if k != "EDINBOX_FAULT"}
    here = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [env.get("PYTHONPATH")])])
    return env


async def _child() -> tuple[int, dict[str, Any]]:
    """The child's life: read the settings, relay until the end of stdin; return the exit status and the report (the
    totals, or the error of a relay that gave up on an outage longer than `give_up_after`)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    settings = json.loads(await reader.readline())
    if settings["level"] is not None:
        configure(settings["urls"], level=settings["level"], json=settings["json"])
    fault = FaultPoint(*settings["fault"]) if settings["fault"] else None
    if fault is not None:
        fault.started()
    config = HubConfig(**settings["config"])
    stop = asyncio.Event()
    async with open_inbox(config) as inbox:
        relay = beside(inbox, config, config.give_up_after, stop=stop, fault=fault)

        async def listen() -> None:
            while await reader.read(4096):
                relay.wake()
            stop.set()

        listener = asyncio.ensure_future(listen())
        try:
            totals = await relay.run()
        except TransientError as exc:  # the relay waits out an outage, unless it lasts longer than give_up_after
            return EXIT_GAVE_UP, _report(exc)
        finally:
            listener.cancel()
    return 0, dict(totals)


def _report(exc: InboxError) -> dict[str, str]:
    """An error as the child's last line reports it: its class name and its message on one line."""
    return {"error": type(exc).__name__, "message": " ".join(str(exc).split())}


def child() -> None:
    """The child's program (`python -m edinbox.hub.relay._child`): relay, then print the totals for the hub (which
    may be gone: nothing is printed then) and exit at once: everything it opened is closed by then, and the
    interpreter's teardown (60 ms), which the hub's `run --once` waits for, would add nothing. A configuration
    error is printed instead, as `{"error": class name, "message": one line}`, and the exit status is 78; so is the
    outage the relay gave up on, with the exit status 75."""
    try:
        status, report = asyncio.run(_child())
    except (ConfigurationError, SchemaError) as exc:
        status, report = EXIT_CONFIGURATION, _report(exc)
    with contextlib.suppress(OSError):
        os.write(sys.stdout.fileno(), json.dumps(report).encode() + b"\n")
    logging.shutdown()
    sys.stderr.flush()
    os._exit(status)
