"""Re-drive: the payload an operator needs back (a dead or requeued journal row, a rejected payload), re-published.

`replay` reads the stored payload and publishes it with the same publisher as `edinbox publish` (one path), to the
hub's source unless told otherwise, under its original key: an EDI payload under its interchange key (the producer
id `edinbox publish` gives it), anything else under the key it was journaled with (a journal row) or the name it
came in under (a spool file's producer id or file name; a broker's coordinates). The usual loop is
`requeue KEY` then `replay KEY`; for a rejected payload, fix the cause (a route, `--non-edi`, `--max-payload`), then
`replay rejected/N` and `forget rejected/N`.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from edinbox._async_inbox import AsyncInbox
from edinbox._core import Status
from edinbox._errors import ConfigurationError
from edinbox._records import Record
from edinbox._urls import mask
from edinbox.hub.database import has_hub
from edinbox.hub.deliveries import HEAD
from edinbox.hub.ops._publish import send, split_payload

__all__ = [
    "Stored",
    "forget_rejected",
    "join_key",
    "rejected_id",
    "rejected_row",
    "replay",
    "split_key",
    "stored",
    "stored_payload",
]

REJECTED = "rejected"
"""The first part of a parked payload's key: `rejected/N`."""


@dataclass(frozen=True, slots=True)
class Stored:
    """A stored payload and the producer id it goes out under again."""

    key: str
    message_id: str
    payload: bytes
    whole: bool
    """False when only the first bytes were kept (the source keeps the whole payload, see `where`)."""
    where: str = ""


def _escaped(char: str) -> bool:
    """True for a character a printed key percent-encodes: `%`, `/`, spaces, line breaks, control and format
    characters (a bidirectional override would reorder the line on a terminal)."""
    return char in "%/" or unicodedata.category(char) in _ESCAPED


_ESCAPED = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})


def _encode(part: str) -> str:
    if not any(_escaped(c) for c in part):
        return part
    return "".join(quote(c, safe="", errors="surrogatepass") if _escaped(c) else c for c in part)


def join_key(source: str, message_id: str) -> str:
    """The key `list` prints and `show`, `requeue`, `forget` and `replay` take: `SOURCE/MESSAGE_ID`, with a `%` or
    `/` inside either part, and spaces and control characters, percent-encoded (`%2F` for `/`), so it has exactly one
    `/`, fits on one line and can be pasted as one argument. A key of plain characters is printed as it is."""
    return f"{_encode(source)}/{_encode(message_id)}"


def split_key(key: str) -> tuple[str, str]:
    """The (source, message id) of a key as `join_key` prints it: split at its only `/`, each part percent-decoded.

    ConfigurationError for a key without a `/`, with an empty message id, or with more than one `/` (which `/`
    separates the parts would be a guess: a `/` inside a part is written `%2F`, as `list` prints it).
    """
    source, sep, message_id = key.partition("/")
    if not sep or not message_id:
        raise ConfigurationError(f"{key!r} is not a key: expected SOURCE/MESSAGE_ID, e.g. X12:ZZ:ACME>ZZ:HUB/000000905")
    if "/" in message_id:
        raise ConfigurationError(
            f"{key!r} holds more than one '/': write a '/' inside the source or the message id as %2F, as `edinbox "
            "list` prints the key"
        )
    try:
        return unquote(source, errors="surrogatepass"), unquote(message_id, errors="surrogatepass")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"{key!r}: a percent-encoded byte sequence is not UTF-8") from exc


def rejected_id(key: str) -> int | None:
    """The id N of a `rejected/N` key, None for a journal key; ConfigurationError for `rejected/<not a number>`."""
    first, sep, rest = key.partition("/")
    if first != REJECTED or not sep:
        return None
    if not (rest.isascii() and rest.isdigit() and len(rest) <= 19 and int(rest) < 2**63):  # a database BIGINT
        raise ConfigurationError(f"{key!r}: a parked payload's key is rejected/<number> (below 2**63)")
    return int(rest)


async def rejected_row(inbox: AsyncInbox, *, consumer: str, number: int) -> tuple[Any, ...] | None:
    """The parked payload `rejected/<number>` of `consumer` (id, delivery, reason, deliveries, rejected_at,
    payload), or None (also on a library journal, which has no parked payloads)."""
    if not await has_hub(inbox):
        return None
    params = {"consumer": consumer, "id": number}
    rows = await inbox.read(lambda tx: tx.unit.fetch("hub_rejected_row", params))
    return tuple(rows[0]) if rows else None


def stored_payload(record: Record) -> bytes | None:
    """The payload a journal row keeps: the parked one (dead), else the conflicting copy (conflict, requeued)."""
    return record.payload if record.payload is not None else record.conflict_payload


async def stored(inbox: AsyncInbox, key: str) -> Stored | None:
    """The payload stored under `key` (`SOURCE/MESSAGE_ID` or `rejected/N`), or None when there is no such row.

    ConfigurationError when the row keeps no payload, or when replaying it now would change nothing (a dead or
    conflict row not requeued yet).
    """
    number = rejected_id(key)
    if number is not None:
        row = await rejected_row(inbox, consumer=inbox.consumer, number=number)
        if row is None:
            return None
        delivery, reason, parked = row[1], row[2], bytes(row[5])
        whole = not (len(parked) == HEAD and "bytes are kept here" in reason)
        return Stored(key, _delivery_id(delivery, parked), parked, whole, where=reason)
    source, message_id = split_key(key)
    record = await inbox.get(source, message_id)
    if record is None:
        return None
    payload = stored_payload(record)
    if payload is None:
        raise ConfigurationError(f"{key!r} is {record.status.value} and keeps no payload: there is nothing to replay")
    if record.status in (Status.DEAD, Status.CONFLICT):
        raise ConfigurationError(
            f"{key!r} is {record.status.value}: the hub would settle a replay as {record.status.value} again; "
            f"run `edinbox requeue {key}` first"
        )
    return Stored(key, _journal_id(source, message_id, payload), payload, whole=True)


def _journal_id(source: str, message_id: str, payload: bytes) -> str:
    """The producer id of a journaled payload: its interchange key when it is EDI, else its journal message id."""
    try:
        [(producer_id, _)] = split_payload(payload, name=message_id)
    except (ConfigurationError, ValueError):
        return message_id
    return producer_id


def _delivery_id(delivery: str, payload: bytes) -> str:
    """The producer id of a rejected payload: its interchange key when it has one, else the name it came under."""
    try:
        messages = split_payload(payload, name=delivery)
    except ConfigurationError:
        messages = []
    if len(messages) == 1 and "@" not in messages[0][0]:
        return messages[0][0]
    name = delivery.removeprefix("dir:").removeprefix("rejected/")
    if delivery.startswith("dir:") and "~" in name:  # a spool file's producer id travels in its name
        return unquote(name.split("~", 1)[1].removesuffix(".edi"))
    return name


async def replay(inbox: AsyncInbox, key: str, *, to: str) -> dict[str, Any]:
    """Publish the payload stored under `key` in `inbox` to `to` (the hub's source, unless the operator names
    another) under its original key."""
    target = to
    if not target:
        raise ConfigurationError("replay needs a destination: pass --to URL, or --source (the hub's source)")
    found = await stored(inbox, key)
    if found is None:
        raise ConfigurationError(f"no row {key!r} for consumer {inbox.consumer!r}")
    if not found.whole:
        raise ConfigurationError(
            f"{key!r} keeps only the first {HEAD} bytes of its payload ({found.where}): publish the whole file "
            "from there with `edinbox publish`"
        )
    await send(target, [(found.message_id, found.payload)])
    return {"key": key, "message_id": found.message_id, "bytes": len(found.payload), "to": mask(target)}


async def forget_rejected(inbox: AsyncInbox, number: int) -> bool:
    """Delete one parked payload (`rejected/N`); False when there was none (or no hub tables to hold one)."""
    params = {"consumer": inbox.consumer, "id": number}
    if not await has_hub(inbox):
        return False
    return bool(await inbox.transaction(lambda tx: tx.unit.run("hub_forget_rejected", params)))
