"""The trace of one batch: an `edinbox settle` span per delivery, continuing the producer's trace from its headers,
with `edinbox handler` and `edinbox commit` children timed from the batch's one handler call and one commit.

A batch settles its deliveries together, so each delivery's handler and commit spans cover the batch's: the time
its invoices were being created and the time its transaction took to commit. No-ops without OpenTelemetry.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from edinbox import _trace
from edinbox.edi import partner
from edinbox.hub.deliveries._items import Item
from edinbox.loop import HANDLED, DeliveryOutcome
from edinbox.sources import Delivery

__all__ = ["Spans"]


class Spans:
    """The spans of one batch's deliveries, started when the batch was received."""

    def __init__(self, deliveries: Sequence[Delivery], *, consumer: str) -> None:
        """Start one span per delivery, each under the trace context its headers carry (if any)."""
        self.consumer = consumer
        self.handler: tuple[int, int] | None = None
        self.commit: tuple[int, int] | None = None
        if not _trace.tracing():
            self.spans: list[Any] = []
            return
        now = time.time_ns()
        self.spans = [_trace.start(_trace.SETTLE, parent=_trace.extract(d.headers), start_time=now) for d in deliveries]

    def handled(self, started: int, ended: int) -> None:
        """Note a handler call of the batch (nanoseconds); several calls (isolation) span from first to last."""
        first = started if self.handler is None else self.handler[0]
        self.handler = (first, ended)

    def committed(self, started: int) -> None:
        """Note that the batch's commit began at `started` and has just ended."""
        self.commit = (started, time.time_ns())

    def finish(
        self, index: int, delivery: Delivery, items: Sequence[Item], outcomes: dict[int, DeliveryOutcome]
    ) -> None:
        """End the span of delivery `index` with its key, outcome, attempt and partner, and its children."""
        if not self.spans:
            return
        settle = self.spans[index]
        labels = [outcomes.get(i, DeliveryOutcome.NOT_SETTLED) for i in range(len(items))]
        keys = [item.label for item in items] or [delivery.coordinates]
        sources = [item.message.source for item in items if item.message is not None]
        _trace.note(
            settle,
            key=", ".join(keys),
            consumer=self.consumer,
            outcome=",".join(dict.fromkeys(labels)) or DeliveryOutcome.NOT_SETTLED,
            attempt=delivery.delivery_count or 1,
            partner=partner(sources[0]) if sources else "",
            message_type=",".join(dict.fromkeys(t for item in items for t in item.types)),
        )
        if self.handler is not None and any(label in HANDLED for label in labels):
            _trace.start(_trace.HANDLER, parent=settle, start_time=self.handler[0]).end(end_time=self.handler[1])
        if self.commit is not None and outcomes:
            _trace.start(_trace.COMMIT, parent=settle, start_time=self.commit[0]).end(end_time=self.commit[1])
        settle.end()
