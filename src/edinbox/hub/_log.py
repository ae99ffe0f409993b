"""One structured line per settled message: logfmt by default, JSON on request, passwords always masked; and a
driver's log record kept to one line (`OneLineFilter`)."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

from edinbox._urls import mask

__all__ = ["LOGGER", "OneLineFilter", "configure", "format_line", "settled"]

LOGGER = "edinbox.hub"


def configure(urls: Sequence[str], *, level: int) -> None:
    """Log to stderr as `edinbox run` does: ISO 8601 UTC timestamps, passwords masked in every line (the drivers'
    too, and the exact passwords of `urls`), a driver's record on one line, and stamina's line per retry silenced
    (the hub logs one line per outage)."""
    from edinbox._redact import RedactFilter

    logging.basicConfig(
        level=level,
        format="%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s %(message)s",
        datefmt="%Y-%m-%dT%H:%M:%S",
        stream=sys.stderr,
    )
    redact = RedactFilter(urls=list(urls))
    for handler in logging.getLogger().handlers:  # third-party loggers (httpx, aio-pika, nats) print URLs too
        handler.addFilter(OneLineFilter())  # first: the redaction then masks what it kept of the exception
        handler.addFilter(redact)
        if handler.formatter is not None:
            handler.formatter.converter = time.gmtime
    logging.getLogger("stamina").setLevel(logging.ERROR)


def format_line(event: str, fields: dict[str, Any], *, as_json: bool = False) -> str:
    """Render an event and its fields as one logfmt (or JSON) line with every password masked."""
    if as_json:
        return mask(json.dumps({"event": event, **fields}, default=str, separators=(",", ":")))
    parts = [event]
    for key, value in fields.items():
        text = f"{value:.1f}" if isinstance(value, float) else str(value)
        if not text or any(c in text for c in ' "=\\'):
            text = json.dumps(text)
        parts.append(f"{key}={text}")
    return mask(" ".join(parts))


def settled(logger: logging.Logger, fields: dict[str, Any], *, as_json: bool = False) -> None:
    """Log that one message was settled (key, outcome, duration in ms, ...)."""
    if logger.isEnabledFor(logging.INFO):
        logger.info(format_line("settled", fields, as_json=as_json))


class OneLineFilter(logging.Filter):
    """Keep the records of the drivers (loggers outside edinbox: aiormq, aio-pika, nats...) to one line each, and
    each line to once per `window` seconds: an exception's type and first line are appended to the message and the
    traceback dropped, and a line the filter let through less than `window` seconds ago (digits and addresses aside)
    is dropped, so a reconnect loop's line per attempt is not repeated for the whole outage. The hub logs the outage
    itself, once; edinbox's own records are left as they are."""

    def __init__(self, *, window: float = 60.0) -> None:
        """Let a driver's line through at most once per `window` seconds."""
        super().__init__()
        self.window = window
        self._seen: dict[tuple[str, str], float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """Flatten the record in place; False for a driver's line repeated within the window."""
        if record.name == "edinbox" or record.name.startswith("edinbox."):
            return True
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format
            message = f"{record.msg} {record.args!r}"
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            first = (str(exc).strip().splitlines() or [""])[0]
            message = f"{message}: {type(exc).__name__}: {first}".rstrip(": ")
        elif record.exc_text:
            message = f"{message}: {record.exc_text.strip().splitlines()[-1]}"
        record.msg = " ".join(message.split())[:1000]
        record.args = None
        record.exc_info = record.exc_text = record.stack_info = None
        return self._first(record.name, record.msg, record.created)

    def _first(self, name: str, message: str, now: float) -> bool:
        """Whether this line (digits and addresses aside) was not let through within the window."""
        shape = (name, _DIGITS.sub("#", message))
        if len(self._seen) > 1000:  # forget what the window has passed, so the memory stays bounded
            self._seen = {k: t for k, t in self._seen.items() if now - t < self.window}
        last = self._seen.get(shape)
        if last is not None and now - last < self.window:
            return False
        self._seen[shape] = now
        return True


_DIGITS = re.compile(r"0x[0-9a-fA-F]+|[0-9]+")
"""What varies between two lines of a reconnect loop: attempt counts, ports, object addresses."""
