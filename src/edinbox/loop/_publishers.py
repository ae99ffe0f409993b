"""The relay's open publishers: one per destination, kept open across passes so a pass costs no new connection.

A publisher is opened on the first send to its destination and kept until it fails (any error may have left its
connection unusable: it is closed, and the next pass opens a new one, after the relay's backoff when the failure was
transient), until it has not been used for `keep_open` seconds, or until the relay stops.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from edinbox._message import Outgoing
from edinbox.sources import Publisher, open_publisher

__all__ = ["Publishers"]


class Publishers:
    """The open publishers of one relay, by destination URL."""

    def __init__(self, *, keep_open: float = 60.0) -> None:
        """Close a publisher left unused for `keep_open` seconds (at the next `close_idle`)."""
        self.keep_open = keep_open
        self._open: dict[str, Publisher] = {}
        self._used: dict[str, float] = {}
        self.opened = 0
        """How many publishers were opened so far (one per destination, and one more after each failure)."""

    async def send(self, destination: str, messages: Sequence[Outgoing]) -> None:
        """Send through the destination's open publisher, opening it first when there is none; a failure closes it."""
        publisher = self._open.get(destination) or await self._connect(destination)
        try:
            await publisher.send(messages)
        except BaseException:
            await self._close(destination)
            raise
        self._used[destination] = time.monotonic()

    async def _connect(self, destination: str) -> Publisher:
        publisher = open_publisher(destination)
        try:
            await publisher.open()
        except BaseException:
            await publisher.aclose()
            raise
        self.opened += 1
        self._open[destination] = publisher
        return publisher

    async def _close(self, destination: str) -> None:
        self._used.pop(destination, None)
        publisher = self._open.pop(destination, None)
        if publisher is not None:
            await publisher.aclose()

    async def close_idle(self) -> None:
        """Close the publishers not used for `keep_open` seconds."""
        now = time.monotonic()
        for destination in [d for d, used in self._used.items() if now - used >= self.keep_open]:
            await self._close(destination)

    async def aclose(self) -> None:
        """Close every open publisher."""
        for destination in list(self._open):
            await self._close(destination)
