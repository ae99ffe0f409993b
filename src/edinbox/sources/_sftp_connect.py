"""An SFTP address read from its URL, and the one way to connect to it: the server's key checked against a
known_hosts file (never skipped), the client's key file, and every asyncssh failure mapped to our errors.

`sftp://user[:password]@host[:port]/absolute/folder?known_hosts=FILE&key=FILE&connect_timeout=S`: `known_hosts`
defaults to `~/.ssh/known_hosts`, `key` to the user's default keys (`~/.ssh/id_*`). A known_hosts file that is
missing or has no key for the host (as `[host]:port` when the port is not 22) is a ConfigurationError before any
connection is tried, as is a server key that does not match it and a user or key the server refuses; a server that
cannot be reached, or a connection lost, is a SourceError (transient: the source connects again with backoff).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, unquote

from edinbox._errors import ConfigurationError, InboxError, SourceError
from edinbox._urls import mask
from edinbox.sources._failures import reason
from edinbox.sources._options import SourceOptions, positive_float

with warnings.catch_warnings():  # asyncssh imports cryptography's DSA names, which print a deprecation warning
    warnings.simplefilter("ignore")
    import asyncssh

__all__ = ["SftpAddress", "asyncssh", "connect", "sftp_failing", "shown"]

_CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class SftpAddress:
    """Where a remote folder is and how to log in: host, port, user, the folder, known_hosts and key files."""

    host: str
    port: int
    username: str
    folder: bytes
    known_hosts: Path
    key: Path | None
    connect_timeout: float
    password: str | None = field(default=None, repr=False)

    @property
    def where(self) -> str:
        """`sftp://user@host:port/folder` for messages (never the password)."""
        return f"sftp://{self.username}@{self.host}:{self.port}{shown(self.folder)}"

    @classmethod
    def from_parts(cls, url: str, parts: SplitResult, opts: SourceOptions) -> SftpAddress:
        """Read the address and the `known_hosts`, `key` and `connect_timeout` options (taken from `opts`)."""
        if not parts.hostname:
            raise opts.error("an sftp:// URL needs a host: sftp://user@host[:port]/folder")
        if not parts.username:
            raise opts.error("an sftp:// URL needs a user: sftp://user@host[:port]/folder")
        folder = unquote(parts.path).rstrip("/")
        if not folder.startswith("/"):
            raise opts.error("an sftp:// URL needs an absolute folder: sftp://user@host[:port]/folder")
        known_hosts = opts.take("known_hosts", _file, Path("~/.ssh/known_hosts").expanduser())
        key = opts.take("key", _file, None)
        timeout = opts.take("connect_timeout", positive_float, _CONNECT_TIMEOUT)
        return cls(
            host=parts.hostname,
            port=parts.port or 22,
            username=unquote(parts.username),
            folder=folder.encode(),
            known_hosts=known_hosts,
            key=key,
            connect_timeout=timeout,
            password=unquote(parts.password) if parts.password else None,
        )

    def check_known_hosts(self) -> None:
        """Refuse (ConfigurationError) a known_hosts file that cannot be read or holds no key for this server."""
        try:
            known = asyncssh.read_known_hosts(str(self.known_hosts))
        except (OSError, ValueError) as exc:
            problem = f"cannot read known_hosts {self.known_hosts}: {reason(exc)}"
            raise ConfigurationError(f"{self.where}: {problem}") from None
        keys, authorities = known.match(self.host, "", self.port)[:2]
        if not keys and not authorities:
            name = self.host if self.port == 22 else f"[{self.host}]:{self.port}"
            raise ConfigurationError(
                f"{self.where}: known_hosts {self.known_hosts} has no key for {name}: add the server's key after "
                "checking its fingerprint (the host key is always checked)"
            )


def _file(name: str, value: Any) -> Path:
    """A local file path (`~` expanded)."""
    text = str(value)
    if not text:
        raise ValueError(f"{name} must name a file")
    return Path(text).expanduser()


def shown(name: bytes) -> str:
    """A remote name for messages: undecodable bytes escaped, control characters shown as escapes."""
    text = name.decode(errors="backslashreplace")
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


def _refused(exc: BaseException) -> str:
    """The ConfigurationError reason for what waiting cannot fix; empty for a transient failure."""
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return f"the server's host key does not match known_hosts ({reason(exc)})"
    if isinstance(exc, asyncssh.PermissionDenied):
        return "the server refused the user, key or password"
    if isinstance(exc, asyncssh.KeyImportError | asyncssh.KeyEncryptionError):
        return f"the key file cannot be used: {reason(exc)}"
    return ""


@contextlib.contextmanager
def sftp_failing(what: str) -> Iterator[None]:
    """Map an SSH or SFTP failure inside to ConfigurationError (host key, login, key file) or SourceError."""
    try:
        yield
    except InboxError:
        raise
    except Exception as exc:
        if refused := _refused(exc):
            raise ConfigurationError(mask(f"{what} failed: {refused}")) from None
        raise SourceError(mask(f"{what} failed: {reason(exc)}")) from exc


async def connect(address: SftpAddress) -> tuple[asyncssh.SSHClientConnection, asyncssh.SFTPClient]:
    """Log in and start an SFTP session whose paths are bytes (a name that is not UTF-8 is still a name)."""
    address.check_known_hosts()
    if address.key is not None and not address.key.is_file():
        raise ConfigurationError(f"{address.where}: the key file {address.key} does not exist")
    options: dict[str, Any] = {
        "username": address.username,
        "known_hosts": str(address.known_hosts),
        "connect_timeout": address.connect_timeout,
        "login_timeout": address.connect_timeout,
        "keepalive_interval": 15,
        "keepalive_count_max": 3,
        "agent_path": None,
    }
    if address.key is not None:
        options["client_keys"] = [str(address.key)]
    if address.password is not None:
        options["password"] = address.password
    with sftp_failing(f"connecting to {address.where}"):
        conn = await asyncssh.connect(address.host, address.port, **options)
        try:
            client = await conn.start_sftp_client(path_encoding=None)
        except BaseException:
            conn.abort()
            raise
    return conn, client
