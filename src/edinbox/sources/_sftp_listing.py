"""Which remote files are ready to take: a file is taken only once it has stopped changing (no I/O here).

Each listing records every regular file's size and modification time. A file is ready once two listings at least
`settle` seconds apart saw the same size and time, and it is not held (handed out less than `claim_timeout` seconds ago
and not settled: a holder that never settles it, such as a hub that stopped handing back its batch after a failure,
gets it back after that), not skipped (a file that could be neither read nor parked, left alone until it changes) and
not held back by a nack's delay.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from math import inf

__all__ = ["Listing", "Seen"]


@dataclass(frozen=True, slots=True)
class Seen:
    """What the listings saw of one file: its size and time, since when (monotonic seconds), how many times."""

    size: int
    mtime: int
    since: float
    listings: int = 1

    @property
    def state(self) -> tuple[int, int]:
        """Size and modification time: the file's state as a listing sees it."""
        return self.size, self.mtime


class Listing:
    """The files the last listing saw, and which of them the source may take now."""

    def __init__(self, *, settle: float, claim_timeout: float = 300.0) -> None:
        """Take a file once it kept its size and time for `settle` seconds over two listings or more; hand it out
        again when it is still not settled `claim_timeout` seconds after it was handed out (or last refreshed)."""
        self.settle = settle
        self.claim_timeout = claim_timeout
        self.seen: dict[bytes, Seen] = {}
        self.held: dict[bytes, float] = {}
        self.skipped: dict[bytes, tuple[int, int]] = {}
        self.later: dict[bytes, float] = {}

    def update(self, files: Iterable[tuple[bytes, int, int]], *, now: float) -> None:
        """Record a listing of `(name, size, mtime)`; files no longer listed are forgotten."""
        seen: dict[bytes, Seen] = {}
        for name, size, mtime in files:
            old = self.seen.get(name)
            if old is not None and old.state == (size, mtime):
                seen[name] = replace(old, listings=old.listings + 1)
            else:
                seen[name] = Seen(size, mtime, now)
        self.seen = seen
        self.skipped = {name: state for name, state in self.skipped.items() if name in seen}
        self.later = {name: when for name, when in self.later.items() if name in seen}

    def ready(self, *, now: float) -> list[bytes]:
        """The names that may be taken now, in name order."""
        out = []
        for name in sorted(self.seen):
            seen = self.seen[name]
            if (
                seen.listings < 2
                or now - seen.since < self.settle
                or now - self.held.get(name, -inf) < self.claim_timeout
            ):
                continue
            if self.skipped.get(name) == seen.state or self.later.get(name, 0.0) > now:
                continue
            out.append(name)
        return out

    def hold(self, name: bytes, *, now: float) -> None:
        """`name` was handed out (or its holder says it still works on it) at `now`."""
        self.held[name] = now

    def changed(self, name: bytes, *, size: int, mtime: int, now: float) -> None:
        """A read found `name` changed since it was listed: it must settle again from its new state."""
        self.seen[name] = Seen(size, mtime, now)

    def settled(self, name: bytes) -> None:
        """`name` was archived, deleted or parked, or found gone: forget it."""
        self.held.pop(name, None)
        self.seen.pop(name, None)
        self.later.pop(name, None)

    def give_back(self, name: bytes, *, not_before: float) -> None:
        """`name` was handed back unsettled: take it again, not before `not_before` (monotonic seconds)."""
        self.held.pop(name, None)
        if name in self.seen:
            self.later[name] = not_before
