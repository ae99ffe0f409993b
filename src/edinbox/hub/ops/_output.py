"""How the operator's commands print their values: aligned tables, key/value lines, JSON, short durations; and a
partner's text shown as data (`visible`: control characters and line separators as escapes, never acted on).

One convention for every command: timestamps in ISO 8601, UTC (`2026-12-03T02:11:56.123456+00:00`), durations as
the options take them (`7d`, `1d2h`, `30s`), and for people a missing value is `-`, never Python's `None`; a nested
mapping (`journal` in `stats`) is printed as `journal.processed` lines, never as an embedded JSON dict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from edinbox._core import human_duration
from edinbox.loop import visible

__all__ = ["as_dict", "human_duration", "json_value", "render", "visible"]


def json_value(value: Any) -> Any:
    """A journal or table value as JSON can carry it: datetimes in ISO form, bytes as text, enums by value."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
    if isinstance(value, timedelta):
        return human_duration(value)
    if isinstance(value, bytes | memoryview):
        return bytes(value).decode("latin-1")
    if hasattr(value, "value") and not isinstance(value, int | str):
        return value.value
    return value


def as_dict(value: Any) -> dict[str, Any]:
    """The fields of a dataclass or slotted record as a dict of JSON-able values."""
    names = list(getattr(value, "__dataclass_fields__", None) or getattr(value, "__slots__", None) or ())
    return {name: json_value(getattr(value, name)) for name in names}


def _flat(data: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """`key, value` pairs, a nested mapping's keys prefixed with its own (`journal.processed`)."""
    pairs: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            pairs += _flat(value, f"{prefix}{key}.")
        elif key.endswith("_seconds") and not isinstance(value, bool):
            shown = None if value is None else human_duration(value)
            pairs.append((f"{prefix}{key.removesuffix('_seconds')}", shown))
        else:
            pairs.append((f"{prefix}{key}", value))
    return pairs


def _text(value: Any) -> str:
    """A value for people: `-` for none, lists joined, everything else as JSON values print."""
    value = json_value(value)
    if value is None or value == "":
        return "-"
    if isinstance(value, list):
        return "; ".join(
            _text(v) if not isinstance(v, Mapping) else " ".join(f"{k}={_text(x)}" for k, x in v.items()) for v in value
        )
    return visible(str(value))


def render(data: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, as_json: bool, columns: Sequence[str] = ()) -> str:
    """One JSON document, or for people: `key  value` lines for a mapping, an aligned table for rows."""
    if as_json:
        return json.dumps(data, default=json_value)
    if isinstance(data, Mapping):
        pairs = _flat(data)
        width = max((len(k) for k, _ in pairs), default=0)
        return "\n".join(f"{key.ljust(width)}  {_text(value)}" for key, value in pairs)
    columns = list(columns) or (list(data[0]) if data else [])
    table = [[c.upper() for c in columns], *([_text(row.get(c)) for c in columns] for row in data)]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in table)
