"""Private servers for fault tests: a test that stops a server starts its own, on a free port, and stops only that.

with PrivatePostgres() as pg:        # initdb + pg_ctl from `pg_config --bindir`, as the postgres user
    url = pg.url                     # postgresql://postgres@127.0.0.1:PORT/postgres (trust)
    pg.stop()                        # pg_ctl stop -m fast: every connection is cut
    pg.start()                       # the same data directory, the same port
    pg.restart_command()             # the same as one shell command line (for `edinbox chaos`)

PrivatePostgres(folder, settings={"shared_buffers": "2GB"}) keeps its cluster in `folder` (reused when it is there
already, left in place by `__exit__`) and runs it with those settings instead of the tests' `fsync=off`.

with PrivateMariaDB() as db:         # mariadb-install-db + mariadbd (--user=mysql when root), database `test`
    url = db.url                     # mysql://root@127.0.0.1:PORT/test (no password)
    db.stop()                        # SIGTERM: a clean shutdown, every connection cut, open transactions rolled back
    db.start()                       # the same data directory, the same port
    db.restart_command()             # the same as one shell command line (for `edinbox chaos`)

PrivateServer("nats" | "redis", folder) is a broker killed with SIGKILL and started again on its port and data.

with PrivateRabbitMQ() as rabbit:    # rabbitmq-server as a node of its own (rabbit-test-PORT@localhost), no plugins
    url = rabbit.url                 # amqp://guest:guest@127.0.0.1:PORT/
    rabbit.stop()                    # SIGTERM: a clean shutdown that cuts every connection
    rabbit.start()                   # the same node, data and port
    rabbit.kill()                    # SIGKILL to its process group (a quorum queue may then stay leaderless)
    rabbit.close_connections()       # the broker closes every client connection (CONNECTION_FORCED), runs on

with PrivateSSH() as ssh:            # Debian's /usr/sbin/sshd, its config, host key and authorized_keys in a temp dir
    ssh.url("/data")                 # sftp://USER@127.0.0.1:PORT/ROOT/data?known_hosts=...&key=... (a folder it made)
    ssh.folder("data")               # that folder on the local disk, owned by the login user
    ssh.kill()                       # SIGKILL to it and its sessions: down, every connection cut; start() again
    ssh.pause()                      # SIGSTOP: it accepts connections and answers nothing until ssh.resume()
As root, sshd runs as `nobody` (an unprivileged server logs in only its own user, whose file permissions hold).
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import pytest

__all__ = ["PrivateMariaDB", "PrivatePostgres", "PrivateRabbitMQ", "PrivateSSH", "PrivateServer", "free_port"]


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


_MARIADB_OPTIONS = [
    "--no-defaults",  # nothing from /etc/mysql: the shared server's configuration stays its own
    "--innodb-log-file-size=4M",
    "--innodb-buffer-pool-size=32M",
    "--innodb-flush-log-at-trx-commit=2",  # commits reach the OS, not the disk: fast, and a clean stop keeps them
    "--skip-log-bin",
    "--performance-schema=OFF",
]


class PrivateMariaDB:
    """A throw-away MariaDB server in a temporary folder (data, socket, pid file), as the mysql user when root."""

    def __init__(self, *, root: Path | None = None, port: int | None = None, options: Sequence[str] = ()) -> None:
        """Create (not start) the server's data directory with mariadb-install-db; given `root` and `port`, use the
        server already installed there (the restart command does). `options` are server options that override the
        defaults (a benchmark's durability and buffer sizes)."""
        self._options = [*_MARIADB_OPTIONS, *options]
        self._server = _program("mariadbd")
        install = _program("mariadb-install-db")
        self.port = port or free_port()
        self.root = root or Path(tempfile.mkdtemp(prefix="edinbox-mariadb-"))
        self.data = self.root / "data"
        self.pid_file = self.root / "mariadbd.pid"
        self.log = self.root / "server.log"
        self._user = ["--user=mysql"] if os.geteuid() == 0 else []
        if root is None:
            if os.geteuid() == 0:
                shutil.chown(self.root, "mysql", "mysql")
            command = [install, *self._options, *self._user, f"--datadir={self.data}"]
            command += ["--auth-root-authentication-method=normal", "--skip-test-db"]
            for _ in range(2):  # a rare failure under heavy load, cause unknown: its output is shown if it repeats
                shutil.rmtree(self.data, ignore_errors=True)
                done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
                if done.returncode == 0:
                    break
            if done.returncode != 0:  # say why: the exit status alone left a rare failure under load unexplained
                output = (done.stdout + done.stderr).strip().splitlines()[-15:]
                shutil.rmtree(self.root, ignore_errors=True)  # no __exit__ will: the server was never made
                pytest.fail(f"mariadb-install-db failed ({done.returncode}):\n" + "\n".join(output))
        self._created = root is not None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL of the `test` database as root (no password)."""
        return f"mysql://root@127.0.0.1:{self.port}/test"

    def restart_command(self) -> str:
        """A shell command line that restarts the server (a clean stop, then the same options and data)."""
        command = [sys.executable, str(Path(__file__).resolve()), "restart-mariadb", str(self.root), str(self.port)]
        return shlex.join(command)

    def _pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if Path(f"/proc/{pid}").exists() else None

    def start(self) -> None:
        """Start the server (detached from this process group) and wait until it accepts connections."""
        command = [self._server, *self._options, *self._user, f"--datadir={self.data}"]
        command += [f"--port={self.port}", "--bind-address=127.0.0.1", f"--socket={self.root / 'mariadbd.sock'}"]
        command += [f"--pid-file={self.pid_file}", f"--log-error={self.log}"]
        self._process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        import pymysql

        deadline = time.monotonic() + 60
        while True:
            try:
                connection = pymysql.connect(host="127.0.0.1", port=self.port, user="root", autocommit=True)
                break
            except pymysql.MySQLError:
                if time.monotonic() > deadline:
                    pytest.fail(f"MariaDB did not start on port {self.port}: see {self.log}")
                time.sleep(0.05)
        try:
            if not self._created:
                with connection.cursor() as cursor:
                    cursor.execute("CREATE DATABASE IF NOT EXISTS test")
                self._created = True
        finally:
            connection.close()

    def stop(self) -> None:
        """Stop the server (SIGTERM: sessions are cut, open transactions roll back) and wait until it is gone."""
        pid = self._pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        if self._process is not None and self._process.pid == pid:
            self._process.wait(timeout=60)
            return
        deadline = time.monotonic() + 60
        while _alive(pid):  # started by another process (a restart command): not ours to wait for
            if time.monotonic() > deadline:
                pytest.fail(f"MariaDB (pid {pid}) did not stop within a minute")
            time.sleep(0.02)

    def running(self) -> bool:
        """True while the server's process runs."""
        pid = self._pid()
        return pid is not None and _alive(pid)

    def __enter__(self) -> PrivateMariaDB:
        """Start the server."""
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Stop the server if it runs, and delete its folder."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _program(name: str) -> str:
    """The path of a MariaDB server program (mariadbd lives in /usr/sbin, often not on a user's PATH)."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
    if found is None:
        pytest.fail(f"{name} is not installed (apt-get install mariadb-server)")
    return found


def _alive(pid: int) -> bool:
    """True while process `pid` runs (an exited one not reaped yet by its parent is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


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


if __name__ == "__main__" and sys.argv[1:2] == ["restart-mariadb"]:
    server = PrivateMariaDB(root=Path(sys.argv[2]), port=int(sys.argv[3]))
    server.stop()
    server.start()


_SSHD = Path("/usr/sbin/sshd")


def _descendants(parent: int) -> list[int]:
    """The processes descending from `parent` (from /proc's parent links)."""
    parents: dict[int, int] = {}
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ValueError):
            text = status.read_text()
            parents[int(status.parent.name)] = int(text.split("\nPPid:\t", 1)[1].split("\n", 1)[0])
    found, wanted = [], {parent}
    for _ in range(10):  # sshd's sessions: [priv] -> user@notty -> internal-sftp
        wanted = {pid for pid, ppid in parents.items() if ppid in wanted}
        found.extend(wanted)
    return found


class PrivateSSH:
    """An OpenSSH server of its own on a free port: `internal-sftp`, key login only, its host key, client key,
    authorized_keys and known_hosts in a temporary folder. It runs unprivileged: as the calling user, or as `nobody`
    when that is root (root reads every file, so a permission test needs another user)."""

    def __init__(self) -> None:
        """Prepare (not start) the server: keys and configuration in a fresh temporary folder."""
        if not _SSHD.exists():
            pytest.fail("sshd is not installed (apt-get install openssh-server)")
        import pwd

        self.root = Path(tempfile.mkdtemp(prefix="edinbox-ssh-"))
        self.root.chmod(0o755)
        self.port = free_port()
        as_root = os.getuid() == 0
        self.user = pwd.getpwnam("nobody") if as_root else pwd.getpwuid(os.getuid())
        for name in ("hostkey", "userkey"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / name)], check=True)
        shutil.copy(self.root / "userkey.pub", self.root / "authorized_keys")
        host_key = (self.root / "hostkey.pub").read_text().split()[:2]
        (self.root / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {' '.join(host_key)}\n")
        # PAM, not sshd's own check, decides who may log in: that check takes a password-less account such as
        # nobody (or a CI user) for a locked one
        (self.root / "sshd_config").write_text(
            f"ListenAddress 127.0.0.1\nHostKey {self.root / 'hostkey'}\n"
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}\nPidFile {self.root / 'sshd.pid'}\n"
            f"StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            f"UsePAM {'yes' if as_root else 'no'}\nAllowUsers {self.user.pw_name}\n"
            "Subsystem sftp internal-sftp\nLogLevel ERROR\n"
        )
        self._chown(self.root)
        for name in ("hostkey", "userkey"):
            (self.root / name).chmod(0o600)
        os.chown(self.root / "userkey", os.getuid(), os.getgid())  # the client's key: the test process reads it
        self._process: subprocess.Popen[bytes] | None = None

    def _chown(self, path: Path) -> None:
        if os.getuid() == 0:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)
            for child in path.rglob("*"):
                os.chown(child, self.user.pw_uid, self.user.pw_gid, follow_symlinks=False)

    def folder(self, name: str) -> Path:
        """The local path of the remote folder `name` (created, owned by the login user)."""
        path = self.root / name
        if not path.exists():
            path.mkdir(parents=True)
            self._chown(path)
        return path

    def url(self, name: str, **options: str) -> str:
        """The `sftp://` URL of the folder `name` (created), with the known_hosts and key files as options."""
        query = {"known_hosts": str(self.root / "known_hosts"), "key": str(self.root / "userkey"), **options}
        pairs = "&".join(f"{k}={v}" for k, v in query.items())
        return f"sftp://{self.user.pw_name}@127.0.0.1:{self.port}{self.folder(name)}?{pairs}"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        command = [str(_SSHD), "-D", "-e", "-f", str(self.root / "sshd_config"), "-p", str(self.port)]
        command += ["-h", str(self.root / "hostkey")]
        ids = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []} if os.getuid() == 0 else {}
        log = (self.root / "sshd.log").open("ab")
        self._process = subprocess.Popen(  # type: ignore[call-overload]
            command, stdout=log, stderr=log, **ids
        )
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"sshd did not start on port {self.port}: {(self.root / 'sshd.log').read_text()[-2000:]}")

    def pause(self) -> None:
        """SIGSTOP the listening server: a new connection is accepted by the kernel and then hears nothing (a server
        that does not answer); sessions already open go on."""
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the listening server: connections waiting on it get their answer."""
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the server and every session it forked (each in a session of its own): every connection is cut."""
        if self._process is not None:
            for pid in [self._process.pid, *_descendants(self._process.pid)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._process.wait(timeout=10)
        self._process = None

    def __enter__(self) -> PrivateSSH:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)
