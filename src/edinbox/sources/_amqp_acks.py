"""The acks of a RabbitMQ consumer, sent a batch at a time: one `basic.ack` frame with `multiple` for a run of tags.

A hub acks its batch's deliveries one by one, right after the commit. Each ack used to be a frame of its own, a write
to the socket, and a wake-up of the broker's channel process. Here `ack` only notes the delivery; the acks noted
before the caller next waits go out together (a task scheduled with the first of them): the longest run of noted
tags below every tag still open on that channel (delivered, not settled: in the caller's hands, held for a delayed
nack, or prefetched and not received yet) is acked with one `multiple` frame, any other noted tag alone. A tag that
is open is never covered by a `multiple` ack, so a delivery that is nacked or rejected later is never acked by it.

Delivery tags mean something only on the channel that delivered them: each channel keeps its own open tags, and a
channel that closed is forgotten (the broker requeued its unacked deliveries; the inbox absorbs the redelivery).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from edinbox._logs import log_event

__all__ = ["Acks"]

_log = logging.getLogger(__name__)


class Acks:
    """The open delivery tags of each channel and the acks noted and not sent yet."""

    def __init__(self) -> None:
        """Nothing open, nothing noted."""
        self._open: dict[Any, set[int]] = {}
        self._noted: dict[Any, set[int]] = {}
        self._sending: asyncio.Task[None] | None = None

    def arrived(self, message: Any) -> None:
        """Note a delivery the broker pushed: its tag is open until it is settled."""
        self._open.setdefault(message.channel, set()).add(message.delivery_tag)

    def holding(self, channel: Any) -> int:
        """How many deliveries of `channel` are open (delivered, not settled): what counts against its prefetch."""
        return len(self._open.get(channel, ()))

    def settled(self, message: Any) -> None:
        """Note a delivery nacked or rejected (its own frame, sent by the caller)."""
        self._open.get(message.channel, set()).discard(message.delivery_tag)

    def ack(self, message: Any) -> None:
        """Note an ack; it is sent with the others noted before the caller next waits."""
        self._noted.setdefault(message.channel, set()).add(message.delivery_tag)
        if self._sending is None or self._sending.done():
            self._sending = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._noted:
            await self.flush()

    async def flush(self) -> None:
        """Send the acks noted so far (never raises: a channel that closed meanwhile had its deliveries requeued)."""
        noted, self._noted = self._noted, {}
        for channel, tags in noted.items():
            opened = self._open.get(channel, set())
            opened -= tags
            try:
                await _send(channel, tags, below=min(opened, default=None))
            except Exception as exc:
                fields = {"deliveries": len(tags), "error": str(exc), "then": "the broker requeues them"}
                log_event(_log, logging.WARNING, "acks-not-sent", fields)
        for channel in [c for c in self._open if c.is_closed]:
            del self._open[channel]

    async def aclose(self) -> None:
        """Send what is noted, before the connection closes."""
        if self._sending is not None:
            await self._sending
        await self._drain()


async def _send(channel: Any, tags: set[int], *, below: int | None) -> None:
    """Ack `tags`: the run under `below` (the lowest tag still open) in one frame, the others one by one."""
    run = sorted(t for t in tags if below is None or t < below)
    alone = sorted(t for t in tags if below is not None and t > below)
    if len(run) > 1:
        await channel.basic_ack(delivery_tag=run[-1], multiple=True)
    else:
        alone = run + alone
    for tag in alone:
        await channel.basic_ack(delivery_tag=tag)
