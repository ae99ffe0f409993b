"""The hub's logging, configured once per process (`configure`): every record, the hub's events and the drivers'
lines alike, rendered by `edinbox.loop.EventFormatter` as one logfmt line or one JSON object (`--log-format`),
passwords masked, and a driver's record kept to one line (`OneLineFilter`)."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Sequence

from edinbox._redact import RedactFilter, Secrets
from edinbox.loop import EventFormatter, log_event, settled

__all__ = ["LOGGER", "OneLineFilter", "configure", "log_event", "rendering_json", "settled"]

LOGGER = "edinbox.hub"


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The stderr handler `configure` installs (found again when it is called a second time)."""


def configure(urls: Sequence[str], *, level: int, known: Secrets | None = None, json: bool = False) -> None:
    """Log to stderr as `edinbox run` does: each record one line, logfmt (or one JSON object with `json`), whatever
    logger wrote it; passwords masked in every line (the drivers' too, and the exact passwords of `urls` and of
    `known`), a driver's record on one line, Python's warnings logged as records, and stamina's line per retry
    silenced (the hub logs one line per outage). Called again, it replaces what it installed: the level, the
    format, the filters."""
    root = logging.getLogger()
    ours = [h for h in root.handlers if isinstance(h, _Handler)]
    if not root.handlers:  # as logging.basicConfig: a process (or test) that logs elsewhere already keeps that
        handler = _Handler(sys.stderr)
        root.addHandler(handler)
        ours = [handler]
    for handler in ours:
        handler.setFormatter(EventFormatter(json=json))
    if ours:
        root.setLevel(level)
        logging.captureWarnings(True)  # a DeprecationWarning from a driver is a record too, not a bare stderr line
    redact = RedactFilter(urls=list(urls), known=known)
    for each in root.handlers:  # third-party loggers (httpx, aio-pika, nats) print URLs too
        for old in [f for f in each.filters if isinstance(f, OneLineFilter | RedactFilter)]:
            each.removeFilter(old)
        each.addFilter(OneLineFilter())  # first: the redaction then masks what it kept of the exception
        each.addFilter(redact)
    logging.getLogger("stamina").setLevel(logging.ERROR)
    logging.getLogger("asyncssh").setLevel(logging.WARNING)  # an SFTP source's every connect and channel at INFO


def rendering_json() -> bool:
    """Whether `configure` set this process's lines to JSON (what a child process it starts is told to do)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, _Handler) and isinstance(handler.formatter, EventFormatter):
            return handler.formatter.json
    return False


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
