"""The hub processes of a chaos run: started, killed, replaced and always stopped, their output in one log.

Each hub's output goes through a pipe to a thread that copies it, line by line, to the run's log (`hubs.log`) and
notes when the hub says its source is open (its `started` line): the drain waits for quiet only while every
running hub has said so, since a replacement hub on a loaded machine may take seconds to start and would take
the deliveries its predecessor left only then.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from edinbox._errors import InboxError
from edinbox.hub.config import HubConfig

__all__ = ["Hubs"]

_ARMED = 0.5
"""Share of hub processes armed with the fault point (they kill themselves after a commit, before its ack)."""
_GRACE = 30.0
"""Seconds a stopped hub has to finish its batch before it is killed."""
_STARTED = (b" event=started ", b'"event":"started"')
"""How a hub's `started` line reads, in the logfmt and JSON formats."""


class Hubs:
    """The `edinbox run` processes of one chaos run: started, killed, replaced, and always stopped."""

    def __init__(self, config: HubConfig, *, log: IO[bytes], rng: random.Random, file: Path | None) -> None:
        self.log, self.rng = log, rng
        self.file = ["--config", str(file)] if file else []
        """A settings file for what the environment cannot carry (the AS2 partners)."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
        # settings travel in the environment, so no password shows in a process listing
        settings = {"db": config.db, "source": config.source, "table": config.table, "consumer": config.consumer}
        self.env = {**base, **{f"EDINBOX_{k.upper()}": v for k, v in settings.items()}}
        self.env["EDINBOX_BATCH_SIZE"] = str(config.batch_size)
        self.running: list[subprocess.Popen[bytes]] = []
        self.killed: set[int] = set()
        self.started: set[int] = set()
        """Pids of the hubs that logged their `started` line."""
        self._copies: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, *, armed: bool) -> None:
        """Start one hub; an armed one kills itself after one of its first ten commits, before the ack."""
        env = dict(self.env)
        if armed and self.rng.random() < _ARMED:
            env["EDINBOX_FAULT"] = f"after_commit:{self.rng.randint(1, 10)}"
        command = [sys.executable, "-m", "edinbox.cli", "run", *self.file]
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        copy = threading.Thread(target=self._copy, args=(proc,), name=f"hub-{proc.pid}-log", daemon=True)
        copy.start()
        self._copies.append(copy)
        self.running.append(proc)

    def _copy(self, proc: subprocess.Popen[bytes]) -> None:
        """Copy the hub's output to the log, line by line, until it exits; note its `started` line."""
        output = proc.stdout
        if output is None:  # started without a pipe: nothing to copy
            return
        with output:
            for line in output:
                if any(mark in line for mark in _STARTED):
                    self.started.add(proc.pid)
                with self._lock:
                    if self.log.closed:  # the run ended while a hub's relay child still wrote: nothing to keep
                        return
                    self.log.write(line)
                    self.log.flush()

    def ready(self) -> bool:
        """Whether every hub still running said its source is open."""
        return all(proc.pid in self.started for proc in self.running if proc.poll() is None)

    def replace(self, *, armed: bool) -> int:
        """Start a hub for each one that died; return how many died on their own (the fault point)."""
        crashed = 0
        for proc in [p for p in self.running if p.poll() is not None]:
            self.running.remove(proc)
            if proc.returncode != -signal.SIGKILL:
                raise InboxError(f"a hub exited with status {proc.returncode}: see {self.log.name}")
            crashed += proc.pid not in self.killed
            self.start(armed=armed)
        return crashed

    def kill_one(self) -> None:
        """SIGKILL a random running hub."""
        alive = [p for p in self.running if p.poll() is None]
        if alive:
            victim = self.rng.choice(alive)
            self.killed.add(victim.pid)
            victim.kill()

    def stop(self) -> None:
        """SIGTERM every hub, give it `_GRACE` seconds to finish its batch, then SIGKILL what is left; wait until
        the log has all their output."""
        for proc in self.running:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + _GRACE
        for proc in self.running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        deadline = time.monotonic() + 10  # a relay child ends at its hub's end, after the pass in hand
        for copy in self._copies:
            copy.join(timeout=max(0.1, deadline - time.monotonic()))

    def size(self) -> int:
        """The hubs' log size: it stays the same while they have nothing to settle."""
        with self._lock:
            self.log.flush()
            return os.fstat(self.log.fileno()).st_size
