"""One structured line per event (a settled message, an outage, a failed nack): logfmt by default, JSON on request;
passwords always masked, and every control character or line separator escaped (`visible`), so one event is always
one line whatever a partner put in a message id."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from edinbox._urls import mask

__all__ = ["LOGGER", "format_line", "settled", "visible"]

LOGGER = "edinbox.loop"
"""The logger of the consumer loop's lines (a hub passes its own, `edinbox.hub`)."""


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


def format_line(event: str, fields: dict[str, Any], *, as_json: bool = False) -> str:
    """Render an event and its fields as one logfmt (or JSON) line, each value with its passwords masked and its
    control characters and line separators escaped (a logfmt value holding one is quoted as a JSON string)."""
    values = {key: _value(value) for key, value in fields.items()}
    if as_json:
        return _ascii_json({"event": event, **values})
    parts = [event]
    for key, value in values.items():
        text = f"{value:.1f}" if isinstance(value, float) else str(value)  # a list as Python prints it, as before
        if not text or any(c in text for c in ' "=\\') or visible(text) != text:
            text = _ascii_json(text)
        parts.append(f"{key}={text}")
    return " ".join(parts)


def settled(logger: logging.Logger, fields: dict[str, Any], *, as_json: bool = False) -> None:
    """Log that one message was settled (key, outcome, duration in ms, ...)."""
    if logger.isEnabledFor(logging.INFO):
        logger.info(format_line("settled", fields, as_json=as_json))
