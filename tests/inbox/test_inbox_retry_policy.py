"""The retry policy and the wait decision, with no database: `Retry` and `_core.decide`'s WAIT."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edinbox import ConfigurationError, Retry
from edinbox._core import Action, Found, Status, decide
from edinbox._retry import failure_delay

NOW = datetime(2026, 1, 1, tzinfo=UTC)

policies = st.builds(
    Retry,
    immediate=st.integers(0, 5),
    first=st.timedeltas(timedelta(0), timedelta(hours=1)),
    factor=st.floats(1, 10),
    cap=st.timedeltas(timedelta(0), timedelta(days=1)),
    jitter=st.floats(0, 1),
)


@given(policies, st.integers(1, 40), st.floats(0, 1, exclude_max=True))
def test_the_waits_start_after_the_immediate_retries_grow_and_stay_under_the_cap(
    retry: Retry, attempts: int, draw: float
) -> None:
    """No wait for the first `immediate` failures; after them each wait is at least the one before, at most the cap,
    and the jitter adds at most its fraction of the wait."""
    wait = retry.delay(attempts, draw=draw)
    base = retry.base(attempts)
    if attempts <= retry.immediate:
        assert wait == timedelta(0)
    assert retry.base(attempts + 1) >= base
    assert base <= retry.cap
    assert base <= wait <= base * (1 + retry.jitter) + timedelta(microseconds=1)


@given(policies, st.integers(1, 10))
def test_the_total_is_the_sum_of_the_waits_before_the_parking_failure(retry: Retry, max_attempts: int) -> None:
    """`total(max_attempts)` adds the waits after every failure but the one that parks."""
    assert retry.total(max_attempts) == sum((retry.base(n) for n in range(1, max_attempts)), timedelta(0))
    assert failure_delay(max_attempts, max_attempts=max_attempts, retry=retry, draw=0.5) is None


def test_the_defaults_span_more_than_a_minute_over_five_attempts() -> None:
    """With the defaults and max_attempts=5 (the inbox's default), a message is parked no sooner than a minute
    after its first failure, after two immediate retries."""
    retry = Retry()
    waits = [retry.base(n).total_seconds() for n in (1, 2, 3, 4)]
    assert waits == [0, 0, 15, 60]
    assert retry.total(5) >= timedelta(minutes=1)


@given(
    st.sampled_from(list(Status)),
    st.integers(0, 6),
    st.one_of(st.none(), st.timedeltas(timedelta(hours=-2), timedelta(hours=2))),
    st.one_of(st.none(), st.timedeltas(timedelta(hours=-2), timedelta(hours=2))),
    st.booleans(),
)
def test_only_a_failed_row_before_its_retry_time_waits(
    status: Status, attempts: int, retry_in: timedelta | None, lease_in: timedelta | None, same: bool
) -> None:
    """decide() says WAIT exactly for a failed row under max_attempts whose retry_at is still ahead; a failed row
    whose time has come (or that has none) is retried, and every other status decides as before."""
    retry_at = None if retry_in is None else NOW + retry_in
    lease_until = None if lease_in is None else NOW + lease_in
    found = Found(status, "fp", attempts, lease_until, retry_at)
    action = decide(found, "fp" if same else "other", now=NOW, max_attempts=3)
    waiting = status is Status.FAILED and attempts < 3 and retry_at is not None and retry_at > NOW
    assert (action is Action.WAIT) == waiting
    without = decide(Found(status, "fp", attempts, lease_until), "fp" if same else "other", now=NOW, max_attempts=3)
    if not waiting:
        assert action is without  # the retry time changes nothing else
    if status is Status.FAILED and not waiting and attempts < 3:
        assert action is Action.RETRY


@pytest.mark.parametrize(
    "options",
    [
        {"immediate": -1},
        {"first": timedelta(seconds=-1)},
        {"cap": 5},
        {"factor": 0.5},
        {"jitter": 1.5},
        {"immediate": True},
    ],
)
def test_a_policy_that_cannot_work_is_refused(options: dict[str, object]) -> None:
    """A negative count or duration, a factor under 1 or a jitter outside [0, 1] is a ConfigurationError."""
    with pytest.raises(ConfigurationError):
        Retry(**options)  # type: ignore[arg-type]
