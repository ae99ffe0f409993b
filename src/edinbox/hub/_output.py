"""How the operator's commands print their values: aligned tables, key/value lines, JSON, short durations."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

__all__ = ["as_dict", "human_duration", "json_value", "render"]


def json_value(value: Any) -> Any:
    """A journal or table value as JSON can carry it: datetimes in ISO form, bytes as text, enums by value."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return bytes(value).decode("latin-1")
    if hasattr(value, "value") and not isinstance(value, int | str):
        return value.value
    return value


def as_dict(value: Any) -> dict[str, Any]:
    """The fields of a dataclass or slotted record as a dict of JSON-able values."""
    names = list(getattr(value, "__dataclass_fields__", None) or getattr(value, "__slots__", None) or ())
    return {name: json_value(getattr(value, name)) for name in names}


def human_duration(span: timedelta) -> str:
    """A duration the way the options take it: 30d, 12h, 5m, else seconds (90s, 1.5s)."""
    seconds = span.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def render(data: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, as_json: bool, columns: Sequence[str] = ()) -> str:
    """One JSON document, or for people: `key  value` lines for a mapping, an aligned table for rows."""
    if as_json:
        return json.dumps(data, default=str)
    if isinstance(data, Mapping):
        width = max((len(k) for k in data), default=0)
        return "\n".join(
            f"{key.ljust(width)}  {json.dumps(value, default=str) if isinstance(value, dict | list) else value}"
            for key, value in data.items()
        )
    columns = list(columns) or (list(data[0]) if data else [])
    table = [[c.upper() for c in columns], *([str(row.get(c, "")) for c in columns] for row in data)]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in table)
