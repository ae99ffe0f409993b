"""Dropping files into a partner's SFTP folder: each written under a temporary name, then renamed into place.

The file's name comes from its producer id (`<quoted id>.edi`, dots escaped as the spool does), and its temporary
name from that (`.<name>.part`, a dot name: the convention for an upload in progress), so a relay that sends a row
again after a failure writes the same two names: the rename replaces the file with the same content, and a partner
never sees a half-written file or two copies side by side. A partner who already took the first copy gets a second
one, as from any at-least-once sender: its EDI control number tells them apart.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, unquote

from edinbox._errors import ConfigurationError, SourceError
from edinbox.sources._base import Outgoing, Publisher
from edinbox.sources._failures import quietly
from edinbox.sources._options import split_url
from edinbox.sources._sftp_connect import SftpAddress, asyncssh, connect, sftp_failing

__all__ = ["SOURCE_ONLY", "SftpPublisher", "drop_name", "remote_folder", "truthy"]

_AT_ONCE = 16
"""Files written concurrently on the session."""

SOURCE_ONLY = (
    "settle",
    "dotfile_timeout",
    "claim_timeout",
    "poll",
    "archive",
    "rejected",
    "delete",
    "max_payload",
    "open_timeout",
)
"""Options of the source that a publisher to the same folder accepts and does not use."""


def remote_folder(name: str, value: Any) -> bytes:
    """An absolute remote folder."""
    text = unquote(str(value)).rstrip("/")
    if not text.startswith("/"):
        raise ValueError(f"{name} must be an absolute remote folder (starting with /)")
    return text.encode()


def truthy(name: str, value: Any) -> bool:
    """`true`/`false` (also 1/0, yes/no)."""
    text = str(value).lower()
    if text in ("1", "true", "yes"):
        return True
    if text in ("0", "false", "no"):
        return False
    raise ValueError(f"{name} must be true or false")


def drop_name(message_id: str) -> bytes:
    """The remote file name of a payload sent with this producer id: the same for every send of it."""
    return (quote(message_id, safe="").replace(".", "%2E")[:200] + ".edi").encode()


def _chunks(messages: Sequence[Outgoing]) -> list[list[Outgoing]]:
    """`messages` in order, in groups of at most `_AT_ONCE` with no file name twice in a group (a second send of one
    id within a batch goes in the next group, after the first is in place)."""
    chunks: list[list[Outgoing]] = []
    names: set[bytes] = set()
    for message in messages:
        name = drop_name(message.message_id)
        if not chunks or len(chunks[-1]) >= _AT_ONCE or name in names:
            chunks.append([])
            names = set()
        chunks[-1].append(message)
        names.add(name)
    return chunks


class SftpPublisher(Publisher):
    """Writes files into a remote folder over SFTP, each named after its producer id; headers are refused: a file
    carries its payload and its name only."""

    def __init__(self, url: str) -> None:
        """Send into the folder `sftp://user@host[:port]/folder[?known_hosts=&key=&connect_timeout=]` names."""
        parts, opts = split_url(url, schemes=("sftp",), overrides={})
        self.address = SftpAddress.from_parts(url, parts, opts)
        for name in SOURCE_ONLY:  # the source's URL names the same folder: its reading options are allowed here
            opts.take(name, lambda _, value: value, None)
        opts.finish()
        self.url = self.address.where
        self._conn: asyncssh.SSHClientConnection | None = None
        self._client: asyncssh.SFTPClient | None = None

    async def open(self) -> None:
        """Connect (ConfigurationError for a host key or login the server refuses, SourceError when it is down)."""
        self._conn, self._client = await connect(self.address)

    async def send(self, messages: Sequence[Outgoing]) -> None:
        """Write each payload to `.<name>.part`, flush it where the server can, then rename it to `<name>`."""
        for message in messages:
            if message.headers:
                raise ConfigurationError(f"{message.message_id}: an SFTP folder (sftp://) carries no headers")
        client = self._client
        if client is None:
            raise SourceError(f"cannot send to {self.url}: the publisher is not open")
        for chunk in _chunks(messages):
            names = [drop_name(m.message_id) for m in chunk]
            with sftp_failing(f"sending to {self.url}"):
                # the files written concurrently (each waits on the network), then renamed in order: the partner
                # sees them appear in the order they were sent, each whole
                writes = (self._write(client, n, m.payload) for n, m in zip(names, chunk, strict=True))
                failed = [e for e in await asyncio.gather(*writes, return_exceptions=True) if e is not None]
                if failed:
                    raise failed[0]
                for name in names:
                    await self._rename(client, name)

    def _scratch(self, name: bytes) -> bytes:
        return self.address.folder + b"/." + name + b".part"

    async def _write(self, client: asyncssh.SFTPClient, name: bytes, payload: bytes) -> None:
        """Write `payload` to the temporary name of `name`, flushed to disk where the server can."""
        async with client.open(self._scratch(name), "wb") as file:
            await file.write(payload)
            with contextlib.suppress(asyncssh.SFTPOpUnsupported):  # OpenSSH's fsync@openssh.com
                await file.fsync()

    async def _rename(self, client: asyncssh.SFTPClient, name: bytes) -> None:
        """Rename the temporary file into place, replacing a copy an earlier send left."""
        target = self.address.folder + b"/" + name
        try:
            await client.posix_rename(self._scratch(name), target)  # OpenSSH's posix-rename@openssh.com replaces
        except asyncssh.SFTPOpUnsupported:  # a plain SFTP rename never replaces: remove an earlier copy first
            if await client.exists(target):
                await client.remove(target)
            await client.rename(self._scratch(name), target)

    async def aclose(self) -> None:
        """Close the connection; never raises."""
        conn, self._conn, self._client = self._conn, None, None
        if conn is not None:
            conn.close()
            await quietly(f"closing {self.url}", conn.wait_closed)
