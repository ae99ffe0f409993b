"""Private servers for fault tests: a test that stops a server starts its own, on a free port, and stops only that.

with PrivatePostgres() as pg:        # initdb + pg_ctl from `pg_config --bindir`, as the postgres user
    url = pg.url                     # postgresql://postgres@127.0.0.1:PORT/postgres (trust)
    pg.stop()                        # pg_ctl stop -m fast: every connection is cut
    pg.start()                       # the same data directory, the same port
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

__all__ = ["PrivatePostgres", "PrivateRedis", "free_port"]


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bindir() -> Path:
    done = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True)
    return Path(done.stdout.strip())


class PrivatePostgres:
    """A throw-away PostgreSQL cluster in a temporary folder, run as the postgres user when the tests run as root."""

    def __init__(self) -> None:
        """Create (not start) the cluster: a temporary folder owned by postgres, initdb with trust authentication."""
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="edinbox-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._bin = _bindir()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._postgres("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")

    @property
    def url(self) -> str:
        """The URL of the `postgres` database as the `postgres` superuser."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _postgres(self, program: str, *args: str) -> None:
        command = [str(self._bin / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._postgres("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self) -> None:
        """Stop the server at once (`-m fast`: sessions are cut, open transactions roll back)."""
        self._postgres("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def running(self) -> bool:
        """True while the server's postmaster runs."""
        return (self.data / "postmaster.pid").exists()

    def __enter__(self) -> PrivatePostgres:
        """Start the server."""
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Stop the server if it runs, and delete its folder."""
        try:
            if self.running():
                self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """A throw-away redis-server on a free port whose data (append-only file) survives a stop and start."""

    def __init__(self) -> None:
        """Choose the port and the folder; `start()` runs the server."""
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="edinbox-redis-"))
        self.pidfile = self.root / "redis.pid"

    @property
    def url(self) -> str:
        """`redis://127.0.0.1:PORT/0`."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it answers."""
        subprocess.run(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root),
             "--appendonly", "yes", "--save", "", "--daemonize", "yes", "--pidfile", str(self.pidfile),
             "--logfile", str(self.root / "redis.log")],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server (SIGTERM, it saves its append-only file) and wait until it is gone."""
        pid = int(self.pidfile.read_text())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while self.running(pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server {pid} did not stop")
            time.sleep(0.05)

    @staticmethod
    def running(pid: int) -> bool:
        """True while process `pid` exists."""
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    def __enter__(self) -> PrivateRedis:
        """Start the server."""
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Stop the server if it runs, and delete its folder."""
        try:
            if self.pidfile.exists() and self.running(int(self.pidfile.read_text())):
                self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
