"""The dashboard's chart, drawn on the server as SVG shapes (no script, no chart library, works offline)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["COLORS", "Bar", "Chart", "stacked"]

COLORS = {
    "processed": "#2e7d32",
    "in_progress": "#1565c0",
    "failed": "#ef6c00",
    "dead": "#c62828",
    "conflict": "#6a1b9a",
}
"""One colour per journal status, in the order the bars stack them."""

WIDTH, HEIGHT, LEFT, BOTTOM = 900, 220, 40, 20


@dataclass(frozen=True, slots=True)
class Bar:
    """One rectangle of a stacked bar, with the tooltip it shows."""

    x: float
    y: float
    width: float
    height: float
    color: str
    title: str


@dataclass(frozen=True, slots=True)
class Chart:
    """Everything the template draws: the bars, the y scale's top, and the time labels."""

    bars: tuple[Bar, ...]
    top: int
    labels: tuple[tuple[float, str], ...]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom: int = BOTTOM


def stacked(per_minute: dict[int, Counter[str]], *, start: datetime, end: datetime) -> Chart:
    """Bars per minute from `start` to `end`, each stacked by status, scaled to the busiest minute."""
    first = int(start.timestamp()) // 60 * 60
    minutes = max(1, (int(end.timestamp()) - first) // 60 + 1)
    top = max([sum(c.values()) for c in per_minute.values()] or [0]) or 1
    step = (WIDTH - LEFT) / minutes
    plot = HEIGHT - BOTTOM
    bars: list[Bar] = []
    for minute, counts in sorted(per_minute.items()):
        index = (minute - first) // 60
        if not 0 <= index < minutes:
            continue
        y = float(plot)
        for status, color in COLORS.items():
            n = counts.get(status, 0)
            if not n:
                continue
            height = plot * n / top
            y -= height
            when = datetime.fromtimestamp(minute, UTC).strftime("%H:%M")
            bars.append(Bar(LEFT + index * step, y, max(step - 1, 1), height, color, f"{when} UTC: {n} {status}"))
    labels = []
    for index in range(0, minutes, max(1, minutes // 6)):
        when = datetime.fromtimestamp(first + index * 60, UTC).strftime("%H:%M")
        labels.append((LEFT + index * step, when))
    return Chart(tuple(bars), top, tuple(labels))
