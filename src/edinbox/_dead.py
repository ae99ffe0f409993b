"""Dead letters: a message the inbox parks DEAD, also published to an error destination through the outbox.

The letter is stored in the transaction that parks the row, so it is sent once per parking (at least once by the
relay, under the message's own id as the producer id). It carries the original payload and headers, and why it died
(`Edinbox-Error-Type`, `Edinbox-Error`, `Edinbox-Attempts`) with its key (`Edinbox-Source`, `Edinbox-Message-Id`),
so an operator's error-queue tooling sees it; sent back to the consumer's queue, it is a new delivery of the same
key: DEAD until an operator requeues it, then processed once. No I/O here.
"""

from __future__ import annotations

from typing import Any

from edinbox._errors import ConfigurationError
from edinbox._message import Message
from edinbox._outbox import check_headers, publish_params

__all__ = ["check_destination", "dead_letter"]

_TEXT = 1000
"""The most characters of the error message a letter carries in its header."""


def check_destination(destination: object) -> None:
    """Refuse (ConfigurationError) a dead-letter destination that is not a broker URL carrying headers."""
    if not isinstance(destination, str) or "://" not in destination:
        raise ConfigurationError(f"dead_letters must be a destination URL (amqp://, nats://, ...), got {destination!r}")
    try:
        check_headers(destination, {"Edinbox-Error-Type": "Exception"})
    except ConfigurationError as exc:
        raise ConfigurationError(f"dead_letters {destination.partition('://')[0]}:// cannot carry why: {exc}") from exc


def dead_letter(destination: str, message: Message, *, error: BaseException | str, attempts: int) -> dict[str, Any]:
    """The outbox row of `message`'s dead letter to `destination`: parked after `attempts` attempts by `error`."""
    headers: dict[str, str] = {}
    for name, value in (message.headers or {}).items():
        try:  # an original header the destination cannot carry (a reserved name) is left out
            check_headers(destination, {name: value})
        except ConfigurationError:
            continue
        headers[name] = value
    kind, text = (type(error).__qualname__, str(error)) if isinstance(error, BaseException) else ("", error)
    text = " ".join(text.replace("\x00", " ").split())[:_TEXT]
    headers.update(
        {
            "Edinbox-Source": message.source,
            "Edinbox-Message-Id": message.message_id,
            "Edinbox-Error-Type": kind or "edinbox",
            "Edinbox-Error": text,
            "Edinbox-Attempts": str(attempts),
        }
    )
    return publish_params(destination, bytes(message.payload), key=message.message_id, headers=headers)
