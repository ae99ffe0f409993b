"""The hub's logging: `edinbox run`'s line format (`LineFormatter`), passwords masked, a driver's log record kept to
one line (`OneLineFilter`); the events themselves are rendered by `edinbox.loop` (`format_line`, `settled`: logfmt
or JSON, passwords masked, control characters escaped)."""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Sequence

from edinbox._redact import RedactFilter, Secrets
from edinbox.loop import format_line, settled, visible

__all__ = ["LOGGER", "LineFormatter", "OneLineFilter", "configure", "format_line", "settled"]

LOGGER = "edinbox.hub"

_FORMAT = "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s %(message)s"


class LineFormatter(logging.Formatter):
    """`edinbox run`'s line: ISO 8601 UTC timestamp, level, logger, message; every control character and line
    separator of the whole line (a traceback's line breaks included) escaped, so a record is one line."""

    def __init__(self) -> None:
        """The hub's format, in UTC."""
        super().__init__(_FORMAT, datefmt="%Y-%m-%dT%H:%M:%S")
        self.converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line."""
        return visible(super().format(record))


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The stderr handler `configure` installs (found again when it is called a second time)."""


def configure(urls: Sequence[str], *, level: int, known: Secrets | None = None) -> None:
    """Log to stderr as `edinbox run` does (`LineFormatter`), passwords masked in every line (the drivers' too, and
    the exact passwords of `urls` and of `known`), a driver's record on one line, and stamina's line per retry
    silenced (the hub logs one line per outage). Called again, it replaces what it installed: the level, the
    filters."""
    root = logging.getLogger()
    ours = [h for h in root.handlers if isinstance(h, _Handler)]
    if not root.handlers:  # as logging.basicConfig: a process (or test) that logs elsewhere already keeps that
        handler = _Handler(sys.stderr)
        handler.setFormatter(LineFormatter())
        root.addHandler(handler)
        ours = [handler]
    if ours:
        root.setLevel(level)
    redact = RedactFilter(urls=list(urls), known=known)
    for each in root.handlers:  # third-party loggers (httpx, aio-pika, nats) print URLs too
        for old in [f for f in each.filters if isinstance(f, OneLineFilter | RedactFilter)]:
            each.removeFilter(old)
        each.addFilter(OneLineFilter())  # first: the redaction then masks what it kept of the exception
        each.addFilter(redact)
    logging.getLogger("stamina").setLevel(logging.ERROR)
    logging.getLogger("asyncssh").setLevel(logging.WARNING)  # an SFTP source's every connect and channel at INFO


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
