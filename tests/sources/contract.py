"""The project's own additions to the packaged source contract (`edinbox.testing.contract.SourceContract`): the
broker sources' base class, and the helpers of their fault tests."""

from __future__ import annotations

import time

from edinbox import SourceError
from edinbox.sources import Source
from edinbox.testing.contract import SourceContract

__all__ = ["BrokerContract", "assert_one_line", "settle_all"]


class BrokerContract(SourceContract):
    """A broker source: the whole contract, against a server that can fail (its fault tests live beside it)."""


async def settle_all(source: Source, keys: set[str], acked: set[str], errors: list[SourceError]) -> None:
    """Receive and ack until every key is acked (30 s at most), noting each SourceError; anything else fails."""
    deadline = time.monotonic() + 30
    while not keys <= acked and time.monotonic() < deadline:
        try:
            for delivery in await source.receive(max_messages=10, timeout=0.5):
                await source.ack(delivery)
                acked.add(delivery.key)
        except SourceError as exc:
            errors.append(exc)


def assert_one_line(errors: list[SourceError]) -> None:
    """Each error says in one non-empty line what failed."""
    for exc in errors:
        text = str(exc)
        assert text.strip(), repr(exc)
        assert "\n" not in text, text
        assert not text.rstrip().endswith(":"), text
