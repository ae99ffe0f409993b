"""The values of the hub's settings, each checked without I/O: numbers within their range (`LIMITS`), durations with
their unit, sizes, names, the database and accounting URLs. `edinbox.hub.config._model` types its fields with these.

Each converter takes what a TOML file, an `EDINBOX_` variable or a flag gave and returns the value or raises
ValueError with a sentence saying what was expected (pydantic names the key); the source URL and the partners'
destinations are checked by `edinbox.sources` (`check_url`, `check_destination`) from the model itself.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from pydantic import Field

from edinbox._errors import ConfigurationError
from edinbox._urls import addresses, database_url

__all__ = [
    "LIMITS",
    "MAX_CONSUMER",
    "MAX_DURATION",
    "MAX_PAYLOAD_LIMIT",
    "accounting_url",
    "bind_host",
    "byte_size",
    "consumer_name",
    "database",
    "duration",
    "duration_text",
    "lease_duration",
    "limited",
    "nonempty_name",
    "optional_duration",
    "parse_duration",
    "parse_size",
    "period",
    "rows_per_second",
    "seconds",
    "shown",
    "text_only",
    "whole_number",
]

MAX_DURATION = timedelta(days=36500)
"""The longest duration a setting may give (100 years): a horizon, retention, lease or period."""
MAX_CONSUMER = 128
"""The longest consumer name, in characters (it names the spool's claim folder and a broker's consumer group)."""
MAX_PAYLOAD_LIMIT = 1024**3
"""The largest `max_payload` (1 GiB, the largest value PostgreSQL stores in one field)."""

LIMITS: Mapping[str, tuple[float, float]] = MappingProxyType(
    {
        "batch_size": (1, 10000),
        "poll_timeout": (0, 3600),
        "idle_timeout": (0, 86400),
        "max_attempts": (1, 10000),
        "max_payload": (1, MAX_PAYLOAD_LIMIT),
        "payload_cap": (1, MAX_PAYLOAD_LIMIT),
        "metrics_port": (0, 65535),
    }
)
"""The range of each numeric setting, bounds included (poll_timeout must be above 0)."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION_HINT = "a duration with its unit (30s, 15m, 12h, 7d, 2w)"


def parse_duration(text: str) -> timedelta:
    """Parse `30s`, `15m`, `12h`, `7d` or `2w` into a timedelta; a number without its unit, or more than
    MAX_DURATION (100 years), is refused."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if not match:
        raise ConfigurationError(f"{str(text)[:80]!r} is not {_DURATION_HINT}")
    seconds = float(match[1]) * _UNITS[match[2]]
    if not seconds <= MAX_DURATION.total_seconds():
        raise ConfigurationError(f"{text.strip()[:80]!r} is longer than {MAX_DURATION.days // 365} years")
    return timedelta(seconds=seconds)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(i?))?b?\s*$", re.IGNORECASE)


def parse_size(value: object) -> int:
    """Parse a number of bytes, or a size such as `100KB`, `32MiB`, `1.5GB` (KiB, MiB, GiB: powers of 1024)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.match(value) if isinstance(value, str) else None
    if not match:
        raise ConfigurationError(f"max_payload {value!r} is not a size (examples: 65536, 100KB, 32MiB, 1GiB)")
    number, prefix, binary = match.groups()
    power = "kmgt".index(prefix.lower()) + 1 if prefix else 0
    return int(float(number) * (1024 if binary else 1000) ** power)


def whole_number(value: object) -> object:
    """An integer, or its digits as text (a variable or flag); 2.5, "twenty" and true are refused."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"expected a whole number, got {value!r}")


def seconds(value: object) -> object:
    """A number of seconds (integer or decimal, or its text); a duration text is refused here."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(f"expected a number of seconds, got {value!r}")


def duration(value: object) -> timedelta:
    """A duration text with its unit (`7d`), or a timedelta, as a timedelta of at most MAX_DURATION: settings are
    parsed here, once, and every reader after gets the timedelta."""
    if isinstance(value, timedelta):
        if not timedelta(0) <= value <= MAX_DURATION:
            raise ValueError(f"expected a duration from 0 to {MAX_DURATION.days // 365} years, got {value}")
        return value
    if isinstance(value, str) and _DURATION.match(value):
        try:
            return parse_duration(value)
        except ConfigurationError as exc:
            raise ValueError(str(exc)) from None
    raise ValueError(f"expected {_DURATION_HINT}, got {shown(value)}")


def duration_text(value: timedelta | None) -> str:
    """A duration setting as a file or a flag gives it: the largest unit that holds it whole (`7d`, `90m`, `15s`);
    empty for none. `parse_duration` reads it back to the same timedelta."""
    if value is None:
        return ""
    seconds = value.total_seconds()
    for unit in ("d", "h", "m"):
        if seconds and seconds % _UNITS[unit] == 0:
            return f"{int(seconds // _UNITS[unit])}{unit}"
    return f"{seconds:g}s"


def shown(value: object) -> str:
    """A value as an error message quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}...({len(text)} characters)"


def lease_duration(value: object) -> timedelta:
    """A duration longer than zero."""
    span = duration(value)
    if span <= timedelta(0):
        raise ValueError(f"expected a duration longer than zero, got {shown(value)}")
    return span


def optional_duration(value: object) -> timedelta | None:
    """A duration, or empty for "never" (None)."""
    return None if value in ("", None) else duration(value)


def rows_per_second(value: object) -> object:
    """A positive number of rows per second (integer or decimal, or its text; `inf`: no limit); 0, a negative
    number, NaN and words are refused."""
    rate = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        rate = float(value)
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            rate = float(value)
    if rate is None or not rate > 0:
        raise ValueError(f"expected a positive number of rows per second (inf: no limit), got {value!r}")
    return rate


def period(value: object) -> timedelta | None:
    """A duration longer than zero, or "off" (or empty) for "never" (None)."""
    if value in ("", None) or (isinstance(value, str) and value.strip().lower() == "off"):
        return None
    span = duration(value)
    if span <= timedelta(0):
        raise ValueError(f"expected a duration longer than zero (or off: never), got {shown(value)}")
    return span


def byte_size(value: object) -> object:
    """A number of bytes or a size text."""
    try:
        size = parse_size(value)
    except ConfigurationError:
        raise ValueError(f"expected a size (65536, 100KB, 32MiB, 1GiB), got {value!r}") from None
    if size < 1:
        raise ValueError("must be at least 1 byte")
    return size


def text_only(value: object) -> object:
    """Text only: a number where a URL or name belongs is a mistake, not something to convert."""
    if isinstance(value, str):
        return value
    raise ValueError(f"expected text, got {value!r}")


def nonempty_name(value: object) -> object:
    """Non-empty text."""
    if isinstance(value, str) and value.strip():
        return value
    raise ValueError(f"expected a non-empty name, got {value!r}")


def consumer_name(value: object) -> object:
    """A consumer name: 1 to MAX_CONSUMER printable characters, not only spaces."""
    nonempty_name(value)
    text = str(value)
    if len(text) > MAX_CONSUMER:
        raise ValueError(f"expected at most {MAX_CONSUMER} characters, got {len(text)}")
    if not text.isprintable():
        raise ValueError(f"expected printable characters (no control character), got {shown(text)}")
    return text


def bind_host(value: object) -> object:
    """An address to bind: a host name or an IP address (an IPv6 one with or without brackets)."""
    text = str(text_only(value))
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if not bare or len(bare) > 253 or not re.fullmatch(r"[\w.:%-]+", bare):
        raise ValueError(f"expected a host name or an IP address, got {shown(value)}")
    return text


def database(value: object) -> object:
    """A database URL the stores can open (`database_url`): its scheme, its hosts and ports, and on PostgreSQL what
    libpq reads of it (its parameters, numbers where it wants numbers)."""
    text = str(text_only(value))
    try:
        database_url(text)
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None
    return text


def accounting_url(value: object) -> object:
    """Empty, or the http:// or https:// URL of an accounting API, with its host and a port from 1 to 65535."""
    text = str(text_only(value))
    if not text:
        return text
    if not text.lower().startswith(("http://", "https://")):
        raise ValueError(f"expected an http:// or https:// URL, got the scheme {text.partition(':')[0][:20]!r}")
    try:
        addresses(text, what="the accounting URL", host=True)
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None
    return text


def limited(name: str) -> Any:
    """The range of the numeric setting `name` (LIMITS) as pydantic's constraints."""
    low, high = LIMITS[name]
    return Field(ge=low, le=high) if name != "poll_timeout" else Field(gt=low, le=high)
