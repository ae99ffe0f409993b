"""One structured line per event (a settled message, an outage, a failed nack): logfmt by default, JSON on request,
passwords always masked."""

from __future__ import annotations

import json
import logging
from typing import Any

from edinbox._urls import mask

__all__ = ["LOGGER", "format_line", "settled"]

LOGGER = "edinbox.loop"
"""The logger of the consumer loop's lines (a hub passes its own, `edinbox.hub`)."""


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
