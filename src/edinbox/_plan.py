"""What the inbox does with a delivery or a batch, decided with no I/O from what the journal returned.

`AsyncInbox` (and its generated twin `Inbox`) fetch rows and write statements; this module turns rows into
decisions and messages into statement parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from edinbox._core import Action, Found, Status, decide, failure_status, key_problem
from edinbox._errors import ConfigurationError, RetryLater
from edinbox._message import Message
from edinbox._urls import mask

__all__ = [
    "Key",
    "check_settings",
    "copy_action",
    "describe",
    "failure_rows",
    "found_row",
    "key_params",
    "plan_batch",
    "wait_error",
]

Key = tuple[str, str]
"""A message's (source, message_id): its key within one consumer."""

Timestamp = Callable[[Any], datetime | None]


def check_settings(consumer: object, *, max_attempts: object, horizon: object) -> None:
    """Refuse (ConfigurationError) an empty or over-long consumer, a non-positive max_attempts or a negative horizon."""
    if not isinstance(consumer, str) or not consumer:
        raise ConfigurationError("consumer must be a non-empty string")
    if (problem := key_problem(consumer)) is not None:
        raise ConfigurationError(f"consumer {problem}")
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise ConfigurationError(f"max_attempts must be a positive integer, got {max_attempts!r}")
    if not isinstance(horizon, timedelta) or horizon < timedelta(0):
        raise ConfigurationError(f"horizon must be a non-negative timedelta, got {horizon!r}")


def key_params(consumer: str, message: Message, *, trace: str | None = None) -> dict[str, Any]:
    """The parameters that name a message's journal row, with the fingerprint conflicts are judged by and the
    traceparent the row keeps when this attempt settles it (None: nothing traced)."""
    return {
        "consumer": consumer,
        "source": message.source,
        "message_id": message.message_id,
        "fingerprint": message.fingerprint,
        "trace": trace,
    }


def describe(exc: BaseException) -> str:
    """A handler error as the journal keeps it: type and message, credentials masked, at most 4,000 characters.

    A NUL or a lone surrogate in the message is escaped, so every store can hold the text.
    """
    text = mask(f"{type(exc).__qualname__}: {exc}")[:4000].replace("\x00", "\\x00")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def failure_rows(
    consumer: str, messages: Sequence[Message], exc: Exception, *, max_attempts: int, delay: timedelta | None = None
) -> list[dict[str, Any]]:
    """The parameters that count one failed attempt of each message (the payload is kept in case it parks); the row
    waits `delay` before its next attempt (None: it parks, or may run again at once)."""
    common = {
        "first_status": failure_status(1, max_attempts=max_attempts).value,
        "error": describe(exc),
        "max_attempts": max_attempts,
        "delay": delay,
    }
    return [{**key_params(consumer, m), **common, "payload": bytes(m.payload)} for m in messages]


def found_row(row: Sequence[Any], timestamp: Timestamp) -> tuple[Found, datetime]:
    """(status, fingerprint, attempts, lease_until, retry_at, trace, now) as read by the store -> the row and the
    database's now."""
    status, fingerprint, attempts, lease_until, retry_at, trace, now = row
    found = Found(Status(status), fingerprint, attempts, timestamp(lease_until), timestamp(retry_at), trace)
    return found, timestamp(now) or datetime.now().astimezone()


def wait_error(message: Message, found: Found, now: datetime) -> RetryLater:
    """The RetryLater of a delivery that came before its message's retry time (`_core.Action.WAIT`)."""
    retry_at = found.retry_at or now
    delay = max(retry_at - now, timedelta(0))
    return RetryLater(
        f"message {message.key} waits for its retry at {retry_at.isoformat()} ({delay.total_seconds():.3f} s);"
        " do not ack it",
        retry_at=retry_at,
        delay=delay,
    )


def copy_action(first_fingerprint: str | None, message: Message) -> Action:
    """Another copy, in one batch, of a message the batch processes: a duplicate, or a conflict if it differs."""
    return Action.DUPLICATE if first_fingerprint == message.fingerprint else Action.CONFLICT


def plan_batch(
    batch: Sequence[Message],
    inserted: set[Key],
    found: dict[Key, tuple[Found, datetime]],
    *,
    max_attempts: int,
) -> list[Action | None] | None:
    """Decide each message of a batch whose keys were just inserted (`inserted`) or read back (`found`).

    None for a message means: its row is new, run the handler. RETRY also runs the handler (after resetting
    the row); any other action runs nothing. The first copy of a key decides; later copies in the same batch
    are duplicates or conflicts of the copy that runs. Returns None when a row that was not inserted is not
    found either (deleted meanwhile by forget or purge): the caller starts over.
    """
    claimed: dict[Key, str | None] = {}  # key -> fingerprint of the copy that runs
    plan: list[Action | None] = []
    for message in batch:
        key = message.key
        if key in claimed:
            plan.append(copy_action(claimed[key], message))
        elif key in inserted:
            claimed[key] = message.fingerprint
            plan.append(None)
        elif key in found:
            row, now = found[key]
            action = decide(row, message.fingerprint or "", now=now, max_attempts=max_attempts)
            if action is Action.RETRY:
                claimed[key] = message.fingerprint
            plan.append(action)
        else:
            return None
    return plan
