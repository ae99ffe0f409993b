"""Remote file work for the SFTP source: names checked without following links, a parked file's reason written
whole before it is renamed into place, a file's first bytes, and which SFTP errors are about one file only."""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime

from edinbox.sources._sftp_connect import asyncssh
from edinbox.sources._spool_files import HEAD

__all__ = ["as_bytes", "exists", "file_problem", "free_name", "read_head", "write_reason"]


async def exists(client: asyncssh.SFTPClient, path: bytes) -> bool:
    """True when `path` names anything (a link too: it is not followed)."""
    try:
        await client.lstat(path)
    except asyncssh.SFTPNoSuchFile:
        return False
    return True


async def free_name(client: asyncssh.SFTPClient, folder: bytes, name: bytes) -> bytes:
    """`name`, or `name.<random>` when `folder` already holds a file (or reason) of that name."""
    if await exists(client, folder + b"/" + name) or await exists(client, folder + b"/" + name + b".reason"):
        return name + b"." + uuid.uuid4().hex[:8].encode()
    return name


async def write_reason(client: asyncssh.SFTPClient, parked: bytes, reason: str, *, consumer: str) -> None:
    """Write `<parked>.reason` (why, when, by which consumer): first under a dot name beside it, then renamed, so a
    parked file never has a half-written reason."""
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    text = f"{reason.replace(chr(10), ' ')}\nrejected-at: {stamp}\nconsumer: {consumer}\n"
    folder = parked.rpartition(b"/")[0]
    scratch = folder + b"/." + uuid.uuid4().hex.encode()
    async with client.open(scratch, "wb") as file:
        await file.write(text.encode(errors="backslashreplace"))
    await client.rename(scratch, parked + b".reason")


async def read_head(client: asyncssh.SFTPClient, path: bytes) -> bytes:
    """The first `HEAD` bytes of a file too big to read whole; nothing when it cannot be read."""
    with contextlib.suppress(asyncssh.SFTPError):
        async with client.open(path, "rb") as file:
            return as_bytes(await file.read(HEAD, 0))
    return b""


def file_problem(exc: BaseException | None) -> str | None:
    """What an SFTP error says about one file ("gone" when it no longer exists); None for a connection failure."""
    if isinstance(exc, asyncssh.SFTPNoSuchFile):
        return "gone"
    if isinstance(exc, asyncssh.SFTPConnectionLost | asyncssh.SFTPNoConnection):
        return None
    if isinstance(exc, asyncssh.SFTPError):
        return exc.reason or type(exc).__name__
    return None


def as_bytes(data: bytes | str) -> bytes:
    """What a file opened in binary mode read (asyncssh types it as either)."""
    return data if isinstance(data, bytes) else data.encode()
