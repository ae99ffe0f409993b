"""The fault points that provoke real redeliveries: the hub kills itself after a commit, before the ack, or the
relay after a send, before marking the rows sent; and the one that makes `run`'s relay child die as it starts.

Armed by the CLI from `EDINBOX_FAULT=after_commit:N` or `after_send:N` (the library never reads the environment):
after the N-th commit of settled deliveries (or the N-th confirmed send of outbox rows), the process sends itself
SIGKILL, so nothing after it runs but its last words (the hub logs which deliveries the killed commit settled, as no
`settled` line follows). The broker (or the spool) never sees the ack and delivers the batch again; the relay sends
the same rows again with the same keys; the receivers' inboxes must turn every copy into a duplicate.
`relay_start:N` kills each of the first N relay children of `run` as it starts, before it relays anything: a child
that crashes at every start, which the hub starts again with growing waits while it goes on settling deliveries.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

from edinbox._errors import ConfigurationError

__all__ = ["FaultPoint", "parse_fault"]

_POINTS = ("after_commit", "after_send", "relay_start")


@dataclass(slots=True)
class FaultPoint:
    """Counts commits (or sends) and kills the process after the armed one."""

    point: str
    after: int
    commits: int = field(default=0)

    def committed(self, last_words: Callable[[], None] | None = None) -> None:
        """Record one commit; SIGKILL this process when it is the armed one, after calling `last_words`."""
        self._count("after_commit", last_words)

    def sent(self) -> None:
        """Record one confirmed send of outbox rows; SIGKILL this process when it is the armed one."""
        self._count("after_send")

    def started(self) -> None:
        """Record the start of a relay child; SIGKILL this process when it is the armed one."""
        self._count("relay_start")

    def _count(self, point: str, last_words: Callable[[], None] | None = None) -> None:
        if self.point == point:
            self.commits += 1
            if self.commits == self.after:
                if last_words is not None:
                    last_words()
                os.kill(os.getpid(), signal.SIGKILL)


def parse_fault(text: str | None) -> FaultPoint | None:
    """Parse `after_commit:N`, `after_send:N` or `relay_start:N` (N >= 1); empty or None means no fault point."""
    if not text:
        return None
    point, _, count = text.partition(":")
    if point not in _POINTS or not count.isdigit() or int(count) < 1:
        raise ConfigurationError(
            f"EDINBOX_FAULT={text!r}: expected after_commit:N, after_send:N or relay_start:N, N >= 1"
        )
    return FaultPoint(point, int(count))
