"""The fault point that provokes real redeliveries: the hub kills itself after a commit, before the ack.

Armed by the CLI from `EDINBOX_FAULT=after_commit:N` (the library never reads the environment): after the N-th
commit of settled deliveries, the process sends itself SIGKILL, so nothing after the commit runs. The broker (or the
spool) never sees the ack and delivers the batch again; the inbox must turn every copy into a duplicate.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field

from edinbox._errors import ConfigurationError

__all__ = ["FaultPoint", "parse_fault"]

_POINTS = ("after_commit",)


@dataclass(slots=True)
class FaultPoint:
    """Counts commits and kills the process after the armed one."""

    point: str
    after: int
    commits: int = field(default=0)

    def committed(self) -> None:
        """Record one commit; SIGKILL this process when it is the armed one."""
        self.commits += 1
        if self.point == "after_commit" and self.commits == self.after:
            os.kill(os.getpid(), signal.SIGKILL)


def parse_fault(text: str | None) -> FaultPoint | None:
    """Parse `after_commit:N` (N >= 1); empty or None means no fault point."""
    if not text:
        return None
    point, _, count = text.partition(":")
    if point not in _POINTS or not count.isdigit() or int(count) < 1:
        raise ConfigurationError(f"EDINBOX_FAULT={text!r}: expected after_commit:N with N >= 1")
    return FaultPoint(point, int(count))
