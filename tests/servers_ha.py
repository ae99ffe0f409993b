"""A private PostgreSQL primary and its streaming standby, for failover tests: a test that fails a server over
starts its own pair on free ports, and fails over only that.

with PrivatePostgresPair(synchronous=True) as pair:  # initdb, pg_basebackup -R, both started (as postgres when root)
    pair.url                 # postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres?target_session_attrs=...
    pair.primary.url         # each server's own URL (a PrivatePostgres: start(), stop(), running())
    pair.wait_streaming()    # until the standby streams (sync_state 'sync' when synchronous)
    pair.failover()          # pg_ctl stop -m immediate on the primary, then pg_ctl promote on the standby
    pair.failover_command()  # the same as one shell command line (`edinbox chaos --restart-db-command`)

Synchronous: the primary runs with `synchronous_standby_names = '*'` and `synchronous_commit = on` (a commit
returns once the standby has flushed it); the standby with no synchronous standby of its own, so once promoted
its commits do not wait for one that does not exist (what Patroni's synchronous_mode, non-strict, does).

Both servers run with `fsync = off`, like every private server of the tests: the primary is "lost" by
`pg_ctl stop -m immediate`, which kills the server processes, not the machine, so what they wrote to the operating
system stays; the standby's copy of a commit is what the sync-loss proof is about, and that is in its memory and
page cache when the primary acknowledges (remote flush), which an immediate stop of the other server does not touch.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import psycopg
import pytest

from servers import PrivatePostgres

__all__ = ["PrivatePostgresPair"]

_COMMON = {"fsync": "off", "shared_buffers": "16MB", "max_wal_senders": "4", "wal_level": "replica"}


class PrivatePostgresPair:
    """A throw-away primary and a streaming standby made from it with pg_basebackup, on two free ports."""

    def __init__(self, *, synchronous: bool = True) -> None:
        """Create the primary's cluster (not started); the standby is made from it on `__enter__`."""
        self.synchronous = synchronous
        primary = {**_COMMON, "synchronous_standby_names": "'*'" if synchronous else "''"}
        self.primary = PrivatePostgres(settings={**primary, "synchronous_commit": "on"})
        self.root = Path(tempfile.mkdtemp(prefix="edinbox-pg-standby-"))
        self.standby: PrivatePostgres | None = None

    @property
    def url(self) -> str:
        """The multi-host URL of the pair: libpq tries both servers and keeps the one that takes writes."""
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self._standby.port}"
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write&connect_timeout=2"

    @property
    def _standby(self) -> PrivatePostgres:
        if self.standby is None:
            raise RuntimeError("the pair is not started")
        return self.standby

    def __enter__(self) -> PrivatePostgresPair:
        """Start the primary, copy it to the standby (pg_basebackup, streaming WAL, standby.signal) and start that."""
        self.primary.start()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        backup = self.primary._command(
            "pg_basebackup",
            *("-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres"),
            *("-D", str(self.root / "data"), "-X", "stream", "-R", "--no-sync", "-c", "fast"),
        )
        subprocess.run(backup, capture_output=True, text=True, check=True, timeout=120)
        standby = {**_COMMON, "synchronous_standby_names": "''", "hot_standby": "on"}
        self.standby = PrivatePostgres(self.root, settings=standby)
        self.standby.start()
        self.wait_streaming()
        return self

    def wait_streaming(self, within: float = 30.0) -> None:
        """Wait until the primary sees the standby streaming (and, for a synchronous pair, as its sync standby)."""
        wanted = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + within
        with psycopg.connect(self.primary.url, autocommit=True) as conn:
            while True:
                row = conn.execute("SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'").fetchone()
                if row is not None and row[0] == wanted:
                    return
                if time.monotonic() > deadline:
                    pytest.fail(f"the standby is not streaming ({wanted}) after {within} s: {row}")
                time.sleep(0.05)

    def _failover_commands(self) -> list[list[str]]:
        stop = self.primary._command("pg_ctl", "-D", str(self.primary.data), "-m", "immediate", "-w", "stop")
        promote = self._standby._command("pg_ctl", "-D", str(self._standby.data), "-w", "promote")
        return [stop, promote]

    def failover(self) -> None:
        """Lose the primary (`pg_ctl stop -m immediate`: its processes killed, no shutdown checkpoint, as a crash)
        and promote the standby; returns once the standby takes writes."""
        for command in self._failover_commands():
            subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)

    def failover_command(self) -> str:
        """`failover()` as one shell command line."""
        return " && ".join(shlex.join(command) for command in self._failover_commands())

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Stop whichever server runs and delete both clusters."""
        try:
            self.primary.__exit__(kind, exc, tb)
        finally:
            if self.standby is not None and self.standby.running():
                self.standby.stop()
            shutil.rmtree(self.root, ignore_errors=True)
