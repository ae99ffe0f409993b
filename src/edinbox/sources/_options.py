"""Reading a source URL's query options: every option known and typed, or a ConfigurationError with the URL masked."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import SplitResult, parse_qsl, urlsplit, urlunsplit

from edinbox._errors import ConfigurationError
from edinbox._urls import addresses, mask

__all__ = [
    "MAX_SECONDS",
    "SourceOptions",
    "int_range",
    "name_option",
    "positive_float",
    "positive_int",
    "server_url",
    "split_url",
]

T = TypeVar("T")

MAX_SECONDS = 10 * 365 * 86400.0
"""The longest time an option in seconds may give (10 years): longer overflows the drivers' timers and durations."""
MAX_INT = 2**63 - 1
"""The largest whole number an option may give (a signed 64-bit integer, what the brokers store)."""

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


class SourceOptions:
    """The query options of a source URL merged with keyword options; each is taken once, leftovers are errors."""

    def __init__(self, url: str, query: Mapping[str, str], overrides: Mapping[str, Any]) -> None:
        """Keep the raw options; `overrides` (keyword options of `from_url`) win over the URL's query."""
        self._url = url
        self._values: dict[str, Any] = {**query, **overrides}
        self._taken: set[str] = set()

    def error(self, text: str) -> ConfigurationError:
        """A ConfigurationError about this URL, its password masked."""
        return ConfigurationError(f"source URL {mask(self._url)!r}: {text}")

    def take(self, name: str, convert: Callable[[str, Any], T], default: T) -> T:
        """The option `name` converted (the converter raises ValueError on bad input), or `default` when absent."""
        self._taken.add(name)
        if name not in self._values or self._values[name] in ("", None):
            return default
        try:
            return convert(name, self._values[name])
        except (TypeError, ValueError) as exc:
            raise self.error(f"option {name}={self._values[name]!r} is invalid: {exc}") from None

    def require(self, name: str, convert: Callable[[str, Any], T]) -> T:
        """The option `name`, converted; a ConfigurationError when it is missing."""
        value = self.take(name, convert, None)
        if value is None:
            for given in sorted(set(self._values) - self._taken):  # a misspelling is named, not "missing"
                if difflib.get_close_matches(given, [name], n=1, cutoff=0.6):
                    raise self.error(f"unknown option {given}= (did you mean {name}=?)")
            others = sorted(f"{n}=" for n in set(self._values) - self._taken)
            also = f" (also given: {', '.join(others)}: a misspelling?)" if others else ""
            raise self.error(f"the option {name}= is required{also}")
        return value

    def finish(self) -> None:
        """Fail on any option that no one took: a typo must not silently fall back to a default."""
        unknown = sorted(set(self._values) - self._taken)
        if unknown:
            close = difflib.get_close_matches(unknown[0], sorted(self._taken), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}=?" if close else f"known: {', '.join(sorted(self._taken))}"
            raise self.error(f"unknown option(s) {', '.join(unknown)} ({hint})")


def split_url(url: str, *, schemes: tuple[str, ...], overrides: Mapping[str, Any]) -> tuple[SplitResult, SourceOptions]:
    """Split a source URL into its parts without query and its options; a malformed address (`addresses`) or a
    repeated option is an error."""
    if not isinstance(url, str):
        raise ConfigurationError("a source URL must be a string")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed [IPv6 bracket
        raise ConfigurationError(f"source URL {mask(url)!r}: {exc}") from None
    if parts.scheme not in schemes:
        raise ConfigurationError(f"source URL {mask(url)!r}: the scheme must be one of {', '.join(schemes)}")
    if parts.scheme != "dir":  # a spool folder has a path, not an address
        addresses(url, what="source URL")
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    names = [name for name, _ in pairs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigurationError(f"source URL {mask(url)!r}: option(s) given twice: {', '.join(repeated)}")
    return parts._replace(query="", fragment=""), SourceOptions(url, dict(pairs), overrides)


def server_url(parts: SplitResult) -> str:
    """The URL without its query, for the driver."""
    return urlunsplit(parts)


def name_option(name: str, value: Any) -> str:
    """A queue, stream, subject, group or consumer name: letters, digits, dot, dash, underscore."""
    text = str(value)
    if not text or len(text) > 200 or not set(text) <= _NAME_CHARS:
        raise ValueError(f"{name} must be 1-200 letters, digits, '.', '-' or '_'")
    return text


def _whole(name: str, value: Any) -> int:
    """A whole number written in digits (`12`, not `1e3`, `1_000` or `12.0`)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{name} must be a whole number")
    text = str(value).strip()
    if not text.lstrip("-").isdigit() or not text.isascii() or len(text) > 20:
        raise ValueError(f"{name} must be a whole number")
    return int(text)


def int_range(low: int, high: int) -> Callable[[str, Any], int]:
    """The converter of a whole number from `low` to `high`, both included."""

    def convert(name: str, value: Any) -> int:
        number = _whole(name, value)
        if not low <= number <= high:
            raise ValueError(f"{name} must be a whole number from {low} to {high}")
        return number

    return convert


def positive_int(name: str, value: Any) -> int:
    """A whole number of at least 1 (and at most MAX_INT)."""
    number = _whole(name, value)
    if not 1 <= number <= MAX_INT:
        raise ValueError(f"{name} must be a whole number from 1 to {MAX_INT}")
    return number


def positive_float(name: str, value: Any) -> float:
    """A number of seconds greater than zero, at most MAX_SECONDS (10 years)."""
    number = float(value)
    if not 0 < number <= MAX_SECONDS:
        raise ValueError(f"{name} must be a number of seconds above 0 and at most {MAX_SECONDS:.0f}")
    return number
