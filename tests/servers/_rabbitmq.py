"""A private RabbitMQ node."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import pytest

from ._databases import free_port

_RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")
"""Where Debian keeps the scripts that run a node as the calling user (/usr/sbin's wrappers switch to `rabbitmq`)."""


def _low_free_port(low: int = 20000, high: int = 55000, *, tries: int = 200) -> int:
    """A free port from `low` to `high` (below 55000 by default: RabbitMQ derives other ports from its distribution
    port by adding to it), tried at random at most `tries` times; RuntimeError naming the range when none was free."""
    for _ in range(tries):
        port = random.randint(low, high)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port on 127.0.0.1 from {low} to {high} after {tries} random tries")


class PrivateRabbitMQ:
    """A RabbitMQ node of its own (`rabbit-test-<port>@localhost`), its data, logs, configuration and Erlang cookie
    in a temporary folder, no plugins; run as the calling user."""

    def __init__(self) -> None:
        """Prepare (not start) the node: a folder with an empty plugin list and a configuration of its own."""
        program = _RABBITMQ_BIN / "rabbitmq-server"
        if not program.exists():
            pytest.fail("rabbitmq-server is not installed (apt-get install rabbitmq-server)")
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="edinbox-rabbitmq-"))
        self.node = f"rabbit-test-{self.port}@localhost"
        self.log = self.root / "server.log"
        (self.root / "enabled_plugins").write_text("[].\n")  # no management plugin: no port 15672 to collide on
        (self.root / "rabbitmq-env.conf").write_text("")  # not /etc/rabbitmq's: that names the shared node
        (self.root / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\ndisk_free_limit.absolute = 1MB\n"
        )
        self.env = {
            **os.environ,
            "HOME": str(self.root),  # the node's Erlang cookie is created here, the user's own is left alone
            "RABBITMQ_CONF_ENV_FILE": str(self.root / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(self.root / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.root / "enabled_plugins"),
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(_low_free_port()),
            "RABBITMQ_MNESIA_BASE": str(self.root / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.root / "log"),
            "RABBITMQ_PID_FILE": str(self.root / "rabbitmq.pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }
        self._program = str(program)
        self._process: subprocess.Popen[bytes] | None = None
        self.blocked = False
        """Whether `block_publishers` raised the memory alarm and nothing cleared it since (an `unblock_publishers`,
        or a stop or kill: the alarm's watermark is not kept across a restart)."""

    @property
    def url(self) -> str:
        """The node's AMQP URL as guest (allowed from loopback)."""
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    def start(self) -> None:
        """Start the node (a process group of its own) and wait until it speaks AMQP on its port."""
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [self._program], env=self.env, cwd=self.root, stdout=log, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + 180  # a node boots in about 10 s on a quiet machine
        while not self._speaks_amqp():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"RabbitMQ did not start on port {self.port}: see {self.log}")
            time.sleep(0.2)

    @property
    def running(self) -> bool:
        """Whether the node was started and has not been stopped or killed since (nor died)."""
        return self._process is not None and self._process.poll() is None

    def _speaks_amqp(self) -> bool:
        """True when the port answers the AMQP 0-9-1 protocol header with a frame (Connection.Start)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                sock.sendall(b"AMQP\x00\x00\x09\x01")
                return sock.recv(1) == b"\x01"
        except OSError:
            return False

    def close_connections(self) -> int:
        """Have the broker close every client connection (`rabbitmqctl close_connection`: CONNECTION_FORCED, the
        node runs on) and wait until none of them is listed any more, so the broker has requeued their unacked
        deliveries before the caller goes on; how many it closed."""
        pids = self._connections()
        for pid in pids:
            command = [*self._ctl(), "close_connection", pid, "a fault test"]
            subprocess.run(command, env=self.env, capture_output=True, check=True)
        # a client that cannot answer the broker's Connection.Close (its loop blocked in a fault point) stays listed
        # until the broker's own closing timeout, 30 s: wait longer than that
        deadline = time.monotonic() + 90
        while set(pids) & set(self._connections()):
            if time.monotonic() > deadline:
                pytest.fail(f"RabbitMQ did not close connections {pids} within 90 s")
            time.sleep(0.1)
        return len(pids)

    def accepted(self) -> int:
        """How many client connections the node has accepted since it was made (its log's `accepting AMQP connection`
        lines, this class's own probes of the port included): a test waits for a count instead of sleeping."""
        return sum(
            log.read_text(errors="replace").count("accepting AMQP connection")
            for log in (self.root / "log").glob("*.log")
        )

    def lose_queue(self, name: str) -> None:
        """Delete queue `name` while no client is connected, as a node that forgot it in a crash would: the listeners
        suspended, every client connection closed, the queue deleted, the listeners resumed. A consumer of it is never
        told (no `basic.cancel`): it finds the queue gone only when it reconnects."""
        self._run("suspend_listeners")
        try:
            self.close_connections()
            self._run("delete_queue", name)
        finally:
            self._run("resume_listeners")

    def block_publishers(self) -> None:
        """Raise a memory alarm (`set_vm_memory_high_watermark 0`): the node blocks each connection that publishes
        (`connection.blocked`, then it stops reading it) and confirms nothing more on it until `unblock_publishers`;
        consumers and declarations go on."""
        self._run("set_vm_memory_high_watermark", "0")
        self.blocked = True

    def unblock_publishers(self) -> None:
        """Clear the memory alarm (the watermark back to the default, 0.4): blocked connections are read again."""
        self._run("set_vm_memory_high_watermark", "0.4")
        self.blocked = False

    def _run(self, *command: str) -> None:
        subprocess.run([*self._ctl(), *command], env=self.env, capture_output=True, check=True)

    def _ctl(self) -> list[str]:
        return [str(_RABBITMQ_BIN / "rabbitmqctl"), "-n", self.node]

    def _connections(self) -> list[str]:
        """The Erlang pids of the node's client connections."""
        listed = subprocess.run(
            [*self._ctl(), "list_connections", "pid", "--silent"],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return [line.strip() for line in listed.stdout.splitlines() if line.strip().startswith("<")]

    def stop(self) -> None:
        """Stop the node (SIGTERM to its process group: a clean shutdown, every connection cut) and wait for it."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the node's process group and wait for it to be gone. RabbitMQ 3.10 may then bring a quorum queue
        back without a leader for minutes: fault tests stop the node instead. It may also forget a queue declared
        shortly before, with every message in it (confirmed or not): Mnesia logs the declaration's commit record at
        once but its `committed` decision later, and the restarted node presumes a commit whose decision is missing
        from its log aborted. A test that kills the node stops and starts it cleanly once its queues are declared."""
        self._signal(signal.SIGKILL)

    def queues(self) -> dict[str, tuple[int, int, int]]:
        """Each queue's (messages ready, messages unacknowledged, consumers), as `rabbitmqctl list_queues` shows."""
        listed = subprocess.run(
            [*self._ctl(), "list_queues", "name", "messages_ready", "messages_unacknowledged", "consumers", "--silent"],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        rows = [line.split("\t") for line in listed.stdout.splitlines()]
        return {row[0]: (int(row[1]), int(row[2]), int(row[3])) for row in rows if len(row) == 4 and row[1].isdigit()}

    def _signal(self, number: int) -> None:
        process, self._process = self._process, None
        self.blocked = False  # a node started again reads its watermark from its configuration
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, number)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)

    def __enter__(self) -> PrivateRabbitMQ:
        """Start the node."""
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Kill the node and delete its folder."""
        try:
            self.kill()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
