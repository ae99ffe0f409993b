"""`publish_once`, what each source module's `publish(url, messages)` runs: the publisher is closed whatever
happened, also when opening it failed after its connection was made."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from edinbox import SourceError
from edinbox.sources._base import Outgoing, Publisher, publish_once


class Recording(Publisher):
    """A publisher that records its calls; `fail_open` makes `open` fail after it connected."""

    def __init__(self, *, fail_open: bool) -> None:
        """Record into `calls`."""
        self.url = "test://"
        self.fail_open = fail_open
        self.calls: list[str] = []

    async def open(self) -> None:
        """Connect, then fail when told to (as a queue declaration refused after the connection was made)."""
        self.calls.append("open")
        if self.fail_open:
            raise SourceError("declaring the queue failed")

    async def send(self, messages: Sequence[Outgoing]) -> None:
        """Record the producer ids sent."""
        self.calls.append("send " + ",".join(m.message_id for m in messages))

    async def aclose(self) -> None:
        """Record the close."""
        self.calls.append("aclose")


async def test_a_publisher_that_failed_to_open_is_closed() -> None:
    """The failure of `open` is raised, nothing is sent, and the connection it made is closed."""
    publisher = Recording(fail_open=True)
    with pytest.raises(SourceError, match="declaring"):
        await publish_once(publisher, [("a", b"x")])
    assert publisher.calls == ["open", "aclose"]


async def test_pairs_and_outgoing_values_are_sent_then_the_publisher_closed() -> None:
    """`(message_id, payload)` pairs and `Outgoing` values go in one send, between the open and the close."""
    publisher = Recording(fail_open=False)
    await publish_once(publisher, [("a", b"x"), Outgoing("b", b"y", {"h": "v"})])
    assert publisher.calls == ["open", "send a,b", "aclose"]
