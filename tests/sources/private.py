"""Private nats-server and redis-server instances on free ports, for tests that kill a broker under a source.

Only these instances are ever stopped; the shared servers the other tests use are never touched.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

__all__ = ["PrivateServer", "free_port"]


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
