"""A private OpenSSH server (SFTP)."""

from __future__ import annotations

import contextlib
import os
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
