"""The outbox's values and decisions, with no I/O: what a published message is, how the relay groups what it
claimed, who pays for a failed send, and what `stats` says about the backlog.

A row is published inside a transaction (`tx.publish`) and exists only if that transaction commits. A relay
claims committed rows (oldest first, at most one unsent row per destination and key at a time, so order per key
holds), sends them with the key as the producer id, then marks them sent. A crash between the send and the mark
sends the same key again: at least once, and the receiver's inbox makes it once. Who pays for a failed send:

- a ConfigurationError (a destination URL that names no broker, a bad option) or a PermanentError (a payload the
  broker refuses as too big) parks that row alone with its reason; it is never sent and never retried;
- any other failure (the broker is down, the network) leaves the rows unsent and costs nothing: the relay backs off
  and sends them again later.

A parked row leaves the order of its key: the rows published after it under the same destination and key are sent
as if it had been sent (it never will be, and holding its key back would turn one bad message into a backlog that
grows forever); `stats` counts it and `show` lists it with its reason.

Headers go with the message on every broker (AMQP headers, NATS headers, Redis stream-entry fields, Kafka record
headers). A spool folder carries none, so `publish` refuses headers for a `dir://` destination, and a header that
would take the place of the producer id (`x-message-id` on AMQP, `Nats-…` on NATS, `message_id` / `payload` on
Redis, `message_id` on Kafka) is refused too.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from edinbox._core import MAX_KEY_BYTES
from edinbox._errors import ConfigurationError, LimitError, PermanentError
from edinbox._message import Outgoing
from edinbox._urls import mask

__all__ = [
    "Claimed",
    "OutboxStats",
    "SendResult",
    "Verdict",
    "by_destination",
    "judge_send",
    "mark_params",
    "publish_params",
]

_HEADER_NAME = re.compile(r"[!-9;-~]{1,200}")
"""A header name every broker carries: printable ASCII without spaces or colons."""
_RESERVED = {
    "dir": None,
    "amqp": ("x-message-id",),
    "amqps": ("x-message-id",),
    "nats": ("nats-",),
    "tls": ("nats-",),
    "redis": ("message_id", "payload"),
    "rediss": ("message_id", "payload"),
    "kafka": ("message_id",),
}
"""Per scheme, the header names (or `-`-ended prefixes) that hold the producer id or the broker's own controls;
None: the destination carries no headers."""


def publish_params(destination: str, payload: bytes, *, key: str, headers: Mapping[str, str] | None) -> dict[str, Any]:
    """The row `tx.publish` stores; ConfigurationError or LimitError for arguments no relay could ever send."""
    if not isinstance(destination, str) or "://" not in destination:
        raise ConfigurationError(f"publish() needs a destination URL (dir://, amqp://, ...), got {destination!r}")
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise ConfigurationError(f"publish() needs a bytes payload, not {type(payload).__name__}")
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"publish() needs a non-empty key (the producer id), got {key!r}")
    if len(key.encode()) > MAX_KEY_BYTES:
        raise LimitError(f"the outbox key is longer than {MAX_KEY_BYTES} bytes in UTF-8")
    encoded = None
    if headers:
        check_headers(destination, headers)
        encoded = json.dumps(dict(headers), sort_keys=True)
    # kept without its passwords (`mask`): the relay supplies them from its settings (`relay(destinations=...)`)
    return {"destination": mask(destination), "key": key, "payload": bytes(payload), "headers": encoded}


def check_headers(destination: str, headers: Mapping[str, str]) -> None:
    """ConfigurationError for headers the destination cannot carry (see the module's docstring)."""
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise ConfigurationError("publish() headers must map strings to strings")
    scheme = destination.partition("://")[0].lower()
    reserved = _RESERVED.get(scheme, ())
    if reserved is None:
        raise ConfigurationError("publish() headers: a spool folder (dir://) carries no headers; send them to a broker")
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise ConfigurationError(f"publish() header name {name!r}: 1-200 printable ASCII characters, no ':'")
        if any(c in value for c in "\r\n\x00"):
            raise ConfigurationError(f"publish() header {name!r}: the value holds a line break or NUL")
        lowered = name.lower()
        if any(lowered == r or (r.endswith("-") and lowered.startswith(r)) for r in reserved):
            raise ConfigurationError(f"publish() header {name!r} is reserved on {scheme}:// for the producer id")


@dataclass(frozen=True, slots=True)
class Claimed:
    """One unsent outbox row a relay holds."""

    id: int
    destination: str
    key: str
    payload: bytes
    headers: Mapping[str, str] | None = None

    def outgoing(self) -> Outgoing:
        """The message to send: the key as the producer id, the payload and the headers."""
        return Outgoing(self.key, self.payload, self.headers)


def by_destination(rows: Sequence[Sequence[Any]]) -> dict[str, list[Claimed]]:
    """Claimed rows (`id, destination, key, payload, headers`) grouped by destination, each group in id order."""
    groups: dict[str, list[Claimed]] = {}
    for row in rows:
        headers = json.loads(row[4]) if row[4] else None
        claimed = Claimed(int(row[0]), str(row[1]), str(row[2]), bytes(row[3]), headers)
        groups.setdefault(claimed.destination, []).append(claimed)
    return groups


def mark_params(ids: Sequence[int], dialect: str) -> dict[str, Any]:
    """The parameters of `outbox_mark_sent`, one statement a pass: the ids of the rows sent as a list on MariaDB (one
    bound parameter each, so that the UPDATE seeks them on the primary key alone), one JSON array elsewhere."""
    listed = [int(i) for i in ids]
    return {"ids": listed if dialect == "mysql" else json.dumps(listed)}


class Verdict(enum.Enum):
    """What a failed send means for the rows it carried."""

    PARK = "park"
    """Permanent: park the row with its reason (a group of several is first sent row by row)."""
    RETRY = "retry"
    """Transient: leave the rows unsent, back off, send again later."""


def judge_send(error: Exception) -> Verdict:
    """Who pays for a failed send: the row (configuration or permanent error) or nobody (anything else)."""
    return Verdict.PARK if isinstance(error, ConfigurationError | PermanentError) else Verdict.RETRY


@dataclass(frozen=True, slots=True)
class SendResult:
    """What one relay pass did."""

    sent: int = 0
    parked: tuple[tuple[str, str], ...] = ()
    """The `(key, reason)` of each row parked by this pass."""
    error: Exception | None = None
    """The transient failure that left rows unsent (the relay backs off), None when every claimed row settled."""

    @property
    def busy(self) -> bool:
        """True when the pass moved rows: run the next one at once."""
        return bool(self.sent or self.parked)


@dataclass(frozen=True, slots=True)
class OutboxStats:
    """The outbox of one journal: rows waiting, parked and sent, and how long the oldest unsent row has waited."""

    backlog: int = 0
    parked: int = 0
    sent: int = 0
    oldest_unsent: timedelta | None = None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> OutboxStats:
        """Build from the `outbox_stats` row (counts, then the oldest unsent age in seconds or NULL)."""
        age = None if row[3] is None else timedelta(seconds=max(0.0, float(row[3])))
        return cls(backlog=int(row[0] or 0), parked=int(row[1] or 0), sent=int(row[2] or 0), oldest_unsent=age)
