"""The private database servers (PostgreSQL, MariaDB) and the brokers killed and started again (NATS, Redis)."""

from __future__ import annotations

import os
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


class PrivateDatabase:
    """A database of its own on a private PostgreSQL or MariaDB server that several tests share (a module's, say):
    `url` names this database only, while `stop()` and `start()` act on the whole server, as a fault test wants.
    Creating it starts the server when an earlier test left it down; `drop()` removes the database."""

    def __init__(self, server: PrivatePostgres | PrivateMariaDB, name: str) -> None:
        """Create the database `name` (a fresh identifier) on `server`, starting the server first if it is down."""
        self.server = server
        self.name = name
        if not server.running():
            server.start()
        self._admin(f"CREATE DATABASE {name}")

    @property
    def url(self) -> str:
        """The URL of this database, as the server's URL writes it (its superuser, no password)."""
        base, _, _ = self.server.url.rpartition("/")
        return f"{base}/{self.name}"

    @property
    def port(self) -> int:
        """The server's port."""
        return self.server.port

    def stop(self) -> None:
        """Stop the server (every database on it)."""
        self.server.stop()

    def start(self) -> None:
        """Start the server again."""
        self.server.start()

    def running(self) -> bool:
        """True while the server runs."""
        return self.server.running()

    def restart_command(self) -> str:
        """The server's restart command line."""
        return self.server.restart_command()

    def drop(self) -> None:
        """Drop the database (when the server runs: a stopped server is deleted whole with its module)."""
        if self.server.running():
            self._admin(f"DROP DATABASE IF EXISTS {self.name}")

    def _admin(self, statement: str) -> None:
        if isinstance(self.server, PrivateMariaDB):
            import pymysql

            connection = pymysql.connect(host="127.0.0.1", port=self.server.port, user="root", autocommit=True)
            try:
                with connection.cursor() as cursor:
                    cursor.execute(statement)
            finally:
                connection.close()
            return
        import psycopg

        with psycopg.connect(self.server.url, autocommit=True) as connection:
            if statement.startswith("DROP"):  # sessions a test left behind (a killed hub's) must not block it
                statement += " WITH (FORCE)"
            connection.execute(statement.encode())


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


if __name__ == "__main__" and sys.argv[1:2] == ["restart-mariadb"]:
    server = PrivateMariaDB(root=Path(sys.argv[2]), port=int(sys.argv[3]))
    server.stop()
    server.start()
