"""Private servers for fault tests: a test that stops a server starts its own, on a free port, and stops only that.

with PrivatePostgres() as pg:        # initdb + pg_ctl from `pg_config --bindir`, as the postgres user
    url = pg.url                     # postgresql://postgres@127.0.0.1:PORT/postgres (trust)
    pg.stop()                        # pg_ctl stop -m fast: every connection is cut
    pg.start()                       # the same data directory, the same port
    pg.restart_command()             # the same as one shell command line (for `edinbox chaos`)

PrivatePostgres(folder, settings={"shared_buffers": "2GB"}) keeps its cluster in `folder` (reused when it is there
already, left in place by `__exit__`) and runs it with those settings instead of the tests' `fsync=off`.

PrivateServer("nats" | "redis", folder) is a broker killed with SIGKILL and started again on its port and data.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import pytest

__all__ = ["PrivatePostgres", "PrivateServer", "free_port"]


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

    def __init__(self, folder: Path | None = None, *, settings: Mapping[str, str] | None = None) -> None:
        """Create (not start) the cluster: a folder owned by postgres (a temporary one unless `folder` is given,
        whose cluster is reused when it has one), initdb with trust authentication. `settings` replace the tests'
        `fsync=off` as the server's `-c` options."""
        self.port = free_port()
        self.keep = folder is not None
        self.root = folder if folder is not None else Path(tempfile.mkdtemp(prefix="edinbox-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.settings = dict(settings) if settings is not None else {"fsync": "off"}
        self._bin = _bindir()
        if (self.data / "PG_VERSION").exists():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._postgres("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")

    @property
    def url(self) -> str:
        """The URL of the `postgres` database as the `postgres` superuser."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _command(self, program: str, *args: str) -> list[str]:
        command = [str(self._bin / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return command

    def _postgres(self, program: str, *args: str) -> None:
        subprocess.run(self._command(program, *args), capture_output=True, text=True, check=True, timeout=120)

    def restart_command(self) -> str:
        """A shell command line that restarts the server (`pg_ctl restart -m fast`: sessions cut, same options)."""
        return shlex.join(
            self._command("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", "fast", "-w", "restart")
        )

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        settings = {"listen_addresses": "127.0.0.1", **self.settings}
        options = f"-p {self.port} -k {self.root} " + " ".join(f"-c {name}={value}" for name, value in settings.items())
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
        """Stop the server if it runs, and delete its folder (unless the folder was given)."""
        try:
            if self.running():
                self.stop()
        finally:
            if not self.keep:
                self.remove()

    def remove(self) -> None:
        """Delete the stopped cluster's folder."""
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateServer:
    """One broker process started by the test: killed with SIGKILL and started again on the same port and data."""

    def __init__(self, kind: str, folder: Path, *, password: str | None = None) -> None:
        """Prepare (not start) a `nats` or `redis` server keeping its data in `folder`."""
        binary = {"nats": "nats-server", "redis": "redis-server"}[kind]
        if shutil.which(binary) is None:
            pytest.fail(f"{binary} is not installed")
        self.kind, self.folder, self.port = kind, folder, free_port()
        self._password = password
        self._process: subprocess.Popen[bytes] | None = None

    def _command(self) -> list[str]:
        if self.kind == "nats":
            command = ["nats-server", "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.folder)]
            return command + (["--user", "u", "--pass", self._password] if self._password else [])
        # the append-only file (fsync at every write) keeps entries across a SIGKILL, as a production server would
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        command += ["--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.folder)]
        return command + (["--requirepass", self._password] if self._password else [])

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._process = subprocess.Popen(self._command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    time.sleep(0.2 if self.kind == "nats" else 0.05)  # JetStream finishes starting after the listen
                    return
            except OSError:
                time.sleep(0.05)
        self.kill()
        pytest.fail(f"{self.kind} did not start on port {self.port}")

    def wipe(self) -> None:
        """Delete everything the stopped server kept on disk: the next start is an empty server."""
        assert self._process is None, "kill the server first"
        for path in self.folder.iterdir():
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()

    def kill(self) -> None:
        """SIGKILL the server (no clean shutdown) and wait for it to be gone."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(timeout=10)
        self._process = None
