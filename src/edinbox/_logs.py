"""Events logged as data, rendered by one formatter: `log_event(logger, level, "settled", fields)` logs an `Event`
(its name and its fields, as the record's message: logfmt when a handler prints it as text), and `EventFormatter`
renders every record, an event's or any other logger's, as one logfmt line (`time=... level=... logger=...
event=... key=value`) or one JSON object. Passwords are always masked, and every control character or line
separator escaped (`visible`), so a record is always one line whatever a partner put in a message id."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edinbox._urls import mask

__all__ = ["LOGGER", "Event", "EventFormatter", "format_line", "log_event", "settled", "visible"]

LOGGER = "edinbox.loop"
"""The logger of the consumer loop's lines (a hub passes its own, `edinbox.hub`); the sources log to their own."""


_UNSEEN = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
    "\U000e0000-\U000e007f\ud800-\udfff]"
)
"""What a terminal or a log reader would act on or not show: C0 and C1 controls (ESC, VT, NUL...), DEL, line and
paragraph separators, and the invisible format characters (bidirectional overrides, zero-width spaces)."""

_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    """One unseen character, visible: `\\n`, `\\x1b`, `\\u2028`, `\\U000e0041`."""
    char = match.group()
    code = ord(char)
    if char in _SHORT:
        return _SHORT[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with every control character, line separator and invisible format character written as an escape,
    so a partner's text is shown as data: one line, nothing a terminal would act on."""
    return _UNSEEN.sub(_escape, text)


def _value(value: Any) -> Any:
    """A field's value as a line carries it: numbers, lists and mappings as they are, anything else as its text,
    passwords masked in every text."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _value(v) for k, v in value.items()}
    return mask(str(value))


def _ascii_json(value: Any) -> str:
    """JSON with every character outside printable ASCII escaped (json.dumps leaves DEL as it is)."""
    return json.dumps(value, separators=(",", ":")).replace("\x7f", "\\u007f")


def _logfmt(values: dict[str, Any]) -> str:
    """`key=value` pairs, a value quoted as a JSON string when it is empty or holds a space, a quote, an equals sign,
    a backslash or anything `visible` would escape."""
    parts = []
    for key, value in values.items():
        text = f"{value:.1f}" if isinstance(value, float) else str(value)  # a list as Python prints it, as before
        if not text or any(c in text for c in ' "=\\') or visible(text) != text:
            text = _ascii_json(text)
        parts.append(f"{key}={text}")
    return " ".join(parts)


def format_line(event: str, fields: dict[str, Any]) -> str:
    """An event and its fields as one logfmt line (`settled key=... outcome=...`), each value with its passwords
    masked and its control characters and line separators escaped."""
    values = _logfmt({key: _value(value) for key, value in fields.items()})
    return f"{event} {values}" if values else event


@dataclass(frozen=True, slots=True)
class Event:
    """What happened (`name`: settled, dependency-down...) and its fields, as data: a log record's message."""

    name: str
    fields: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        """The event as one logfmt line, for a handler that prints records as text (`format_line`)."""
        return format_line(self.name, self.fields)

    def redacted(self, mask_text: Callable[[str], str]) -> Event:
        """The same event with `mask_text` applied to every text field (a filter's known passwords)."""
        return Event(self.name, {k: mask_text(v) if isinstance(v, str) else v for k, v in self.fields.items()})


def log_event(logger: logging.Logger, level: int, event: str, fields: dict[str, Any]) -> None:
    """Log `event` with its `fields` as data (an `Event` record message) at `level`."""
    if logger.isEnabledFor(level):
        logger.log(level, Event(event, fields), stacklevel=2)  # the record says where the caller logged it


def settled(logger: logging.Logger, fields: dict[str, Any]) -> None:
    """Log that one message was settled (key, outcome, duration in ms, ...)."""
    if logger.isEnabledFor(logging.INFO):
        logger.log(logging.INFO, Event("settled", fields), stacklevel=2)


_HEAD = ("time", "level", "logger", "event")


class EventFormatter(logging.Formatter):
    """Every record as one line: logfmt (`time=2026-01-31T09:00:00.000Z level=info logger=edinbox.hub
    event=settled key=...`) or, with `json`, one JSON object with the same keys. An `Event`'s fields become keys of
    their own; any other record (a driver's, a plain message) carries its text as `message`. An exception adds
    `error` (its type and first line; `exception` when the event has an `error` of its own) and `traceback`
    (escaped onto the same line)."""

    def __init__(self, *, json: bool = False) -> None:
        """Render logfmt, or JSON with `json`."""
        super().__init__()
        self.json = json

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line."""
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        values: dict[str, Any] = {
            "time": f"{when}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        if isinstance(record.msg, Event):
            values["event"] = record.msg.name
            body = record.msg.fields
        else:
            body = {"message": record.getMessage()}
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            summary = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
            body = {**body, ("exception" if "error" in body else "error"): summary}  # an event's own error kept
            body["traceback"] = record.exc_text or self.formatException(record.exc_info)
        elif record.exc_text:
            body = {**body, "traceback": record.exc_text}
        for key, value in body.items():
            values[f"field_{key}" if key in _HEAD else key] = _value(value)
        return _ascii_json(values) if self.json else _logfmt(values)
