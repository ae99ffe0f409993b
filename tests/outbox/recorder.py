"""The send the outbox tests relay with: it records what it got, and fails as told."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from edinbox import ConfigurationError
from edinbox._message import Outgoing


class Recorder:
    """A send that records what it got, and fails as told."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, bytes]] = []
        self.fail: Exception | None = None
        self.bad: bytes | None = None
        self.headers: list[Mapping[str, str] | None] = []

    def __call__(self, destination: str, messages: Sequence[Outgoing]) -> None:
        if self.fail is not None:
            raise self.fail
        if any(m.payload == self.bad for m in messages):
            raise ConfigurationError("payload refused")
        self.sent += [(destination, m.message_id, m.payload) for m in messages]
        self.headers += [m.headers for m in messages]

    async def send(self, destination: str, messages: Sequence[Outgoing]) -> None:
        """The async form."""
        self(destination, messages)
