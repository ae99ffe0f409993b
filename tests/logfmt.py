"""A small logfmt parser for the hub's text log lines: `key=value` pairs separated by one space, a value either bare
(no space, quote or equals sign) or a JSON string."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from edinbox.loop import Event

_PAIR = re.compile(r'([\w.-]+)=("(?:[^"\\]|\\.)*"|[^\s"=]*)')


def parse(line: str) -> dict[str, str]:
    """The pairs of one logfmt line, a quoted value decoded; ValueError when any part of the line is not a pair."""
    fields: dict[str, str] = {}
    at = 0
    while at < len(line):
        match = _PAIR.match(line, at)
        if match is None:
            raise ValueError(f"not logfmt at column {at}: {line!r}")
        value = match.group(2)
        fields[match.group(1)] = json.loads(value) if value.startswith('"') else value
        at = match.end()
        if at < len(line):
            if line[at] != " ":
                raise ValueError(f"not logfmt at column {at}: {line!r}")
            at += 1
    return fields


def event_record(name: str, fields: dict[str, Any], *, logger: str = "edinbox.hub") -> logging.LogRecord:
    """The log record `log_event` makes for event `name` with `fields`, at INFO."""
    return logging.LogRecord(logger, logging.INFO, __file__, 1, Event(name, fields), None, None)
