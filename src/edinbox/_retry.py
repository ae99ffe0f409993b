"""The retry policy: how long a failed message waits before its next attempt, decided with no I/O.

A handler's own exception counts one attempt; the row then waits until its `retry_at` (the database's now plus
`Retry.delay(attempt)`) before the next delivery runs it again. The first `immediate` failures wait nothing; after
them the wait starts at `first` and grows by `factor` each time, up to `cap`, with up to `jitter` of it added at
random so that messages that failed together do not all come back at once. A delivery that arrives earlier runs
nothing, costs no attempt and is handed back to wait (`_core.Action.WAIT`, raised as `RetryLater`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from edinbox._errors import ConfigurationError

__all__ = ["Retry", "failure_delay"]


@dataclass(frozen=True, slots=True)
class Retry:
    """How long a message waits after each failed attempt: immediate retries, then exponential backoff with jitter.

    With the defaults and `max_attempts=5`, the four waits are 0 s, 0 s, 15 s and 60 s (plus up to a fifth of
    each at random): a message is parked DEAD no sooner than 75 s after its first failure.
    """

    immediate: int = 2
    """Failures after which the next delivery may run the message again at once."""
    first: timedelta = timedelta(seconds=15)
    """The wait after the first failure past the immediate ones."""
    factor: float = 4.0
    """How much each later wait grows (1: a fixed wait)."""
    cap: timedelta = timedelta(minutes=10)
    """The longest wait (before jitter)."""
    jitter: float = 0.2
    """The most that is added at random to a wait, as a fraction of it (0: none)."""

    def __post_init__(self) -> None:
        """Refuse (ConfigurationError) a negative count or duration, a factor under 1, a jitter outside [0, 1]."""
        if isinstance(self.immediate, bool) or not isinstance(self.immediate, int) or self.immediate < 0:
            raise ConfigurationError(f"Retry.immediate must be a non-negative integer, got {self.immediate!r}")
        for name in ("first", "cap"):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise ConfigurationError(f"Retry.{name} must be a non-negative timedelta, got {value!r}")
        if isinstance(self.factor, bool) or not isinstance(self.factor, int | float) or not self.factor >= 1:
            raise ConfigurationError(f"Retry.factor must be a number of at least 1, got {self.factor!r}")
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, int | float) or not 0 <= self.jitter <= 1:
            raise ConfigurationError(f"Retry.jitter must be a fraction between 0 and 1, got {self.jitter!r}")

    def base(self, attempts: int) -> timedelta:
        """The wait, before jitter, after a message's `attempts`-th failed attempt (1 = its first)."""
        past = attempts - self.immediate
        if past <= 0:
            return timedelta(0)
        if self.first >= self.cap:
            return self.cap
        # the growth stops at the cap: an exponent past it would only overflow
        wait = self.first.total_seconds()
        for _ in range(past - 1):
            wait *= self.factor
            if wait >= self.cap.total_seconds():
                return self.cap
        return timedelta(seconds=wait)

    def delay(self, attempts: int, *, draw: float = 0.0) -> timedelta:
        """The wait after the `attempts`-th failure, with `draw` (a random number in [0, 1), given by the caller)
        times `jitter` of it added."""
        base = self.base(attempts)
        return base + base * (self.jitter * min(max(draw, 0.0), 1.0))

    def total(self, max_attempts: int) -> timedelta:
        """The least time between a message's first failure and the one that parks it (every wait before jitter)."""
        return sum((self.base(n) for n in range(1, max_attempts)), timedelta(0))


def failure_delay(attempts: int, *, max_attempts: int, retry: Retry, draw: float) -> timedelta | None:
    """The wait a row gets when its handler has now failed `attempts` times in all; None when that failure parks
    it (no retry follows)."""
    if attempts >= max_attempts:
        return None
    return retry.delay(attempts, draw=draw)
