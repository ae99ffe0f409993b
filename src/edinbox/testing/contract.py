"""The inbox contract suites, shipped so that a third-party store (or a store wrapped by your own code) can run them.

Requires pytest. Subclass a contract and give it a `store_harness` fixture: a callable that takes inbox options
(`consumer=`, `max_attempts=`, `horizon=`, `retry=`) and returns a fresh harness on an empty journal of your store:
a `StoreHarness` for `RetryContract`, an `InboxHarness` for `InboxContract` (the whole inbox: process, failures,
batches, lease mode, purge, the schema checks):

```python
import pytest
from edinbox.testing.contract import RetryContract

class TestMyStoreRetries(RetryContract):
    @pytest.fixture
    def store_harness(self, tmp_path):
        return lambda **options: MyHarness(tmp_path, **options)   # a StoreHarness
```

edinbox's own stores (PostgreSQL, MariaDB, SQLite on a file and in memory, in both APIs) run these same classes in
its test suite (`tests/inbox/test_inbox_contract.py`, `tests/inbox/test_inbox_retry_contract.py`).

A third-party source (a broker module with `open_source` / `publisher` support, see `edinbox.sources`) runs
`SourceContract` against its real broker: give it a `url` fixture (a fresh queue, removed after the test) and
`dead_letters(url)`, and say with its class attributes what the broker does (`counts_deliveries`,
`publisher_dedup`, `redelivery_wait`...). Its tests are coroutines (pytest-asyncio with `asyncio_mode = "auto"`, as
edinbox runs them); `collect(source, count, within=...)` receives until `count` deliveries came:

```python
import pytest
from edinbox.testing.contract import SourceContract

class TestMyBroker(SourceContract):
    counts_deliveries = False

    @pytest.fixture
    async def url(self):
        yield "mybroker://127.0.0.1/?queue=contract-1"   # a fresh queue; delete it after

    async def dead_letters(self, url):
        return [...]                                      # (producer id, payload) of each parked message
```
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from edinbox._core import Status
from edinbox._errors import RetryLater
from edinbox._message import Outcome
from edinbox._retry import Retry
from edinbox.testing._contract_base import (
    SOURCE,
    Boom,
    Crash,
    HarnessFactory,
    InboxHarness,
    InboxHarnessFactory,
    StoreHarness,
    Unreadable,
    lease,
    msg,
)
from edinbox.testing._contract_lease import LeaseContract
from edinbox.testing._contract_process import ProcessContract
from edinbox.testing._contract_source import SourceContract, collect

__all__ = [
    "SOURCE",
    "Boom",
    "Crash",
    "HarnessFactory",
    "InboxContract",
    "InboxHarness",
    "InboxHarnessFactory",
    "RetryContract",
    "SourceContract",
    "StoreHarness",
    "Unreadable",
    "collect",
    "lease",
    "msg",
]

HOUR = Retry(immediate=0, first=timedelta(hours=1), cap=timedelta(hours=1), jitter=0)
"""A policy whose first wait outlasts any test: a failed row stays waiting."""


def _get(h: StoreHarness, message_id: str) -> Any:
    return h.call("get", SOURCE, message_id)


def _wait_out(error: RetryLater) -> None:
    """Sleep past the retry time a RetryLater named (plus a margin for the database's clock)."""
    time.sleep(error.delay.total_seconds() + 0.05)


class RetryContract:
    """How waiting retries behave on every store; subclasses pick the store and the API."""

    def make(self, store_harness: HarnessFactory, *, retry: Retry, max_attempts: int = 3) -> StoreHarness:
        """A fresh inbox with `retry` and `max_attempts`, from the subclass's `store_harness` fixture."""
        return store_harness(max_attempts=max_attempts, retry=retry)

    def test_a_delivery_before_retry_at_runs_nothing_and_costs_no_attempt(self, store_harness: HarnessFactory) -> None:
        """After a failure, a delivery before the row's retry_at raises RetryLater (with the time left), runs nothing
        and counts nothing; once the time has come the next delivery runs the handler and clears retry_at."""
        h = self.make(store_harness, retry=Retry(immediate=0, first=timedelta(seconds=0.6), jitter=0))
        with pytest.raises(Boom):
            h.process(msg("w"), fail=Boom("down"))
        failed = _get(h, "w")
        assert (failed.status, failed.attempts) == (Status.FAILED, 1)
        assert failed.retry_at is not None
        with pytest.raises(RetryLater) as early:
            h.process(msg("w"))
        assert early.value.retry_at == failed.retry_at
        assert timedelta(0) < early.value.delay <= timedelta(seconds=0.6)
        assert h.seen == [["w"]]
        assert _get(h, "w").attempts == 1
        _wait_out(early.value)
        assert h.process(msg("w")) is Outcome.PROCESSED
        done = _get(h, "w")
        assert (done.status, done.attempts, done.retry_at) == (Status.PROCESSED, 2, None)
        assert h.effects("w") == 1

    def test_immediate_retries_come_first_then_the_waits_grow(self, store_harness: HarnessFactory) -> None:
        """immediate=1, first=0.3 s, factor 2, max_attempts=4: the second delivery runs at once, the third waits up to
        0.3 s, the fourth up to 0.6 s, and the fourth failure parks the row DEAD with no retry time."""
        retry = Retry(immediate=1, first=timedelta(seconds=0.3), factor=2, jitter=0)
        h = self.make(store_harness, retry=retry, max_attempts=4)
        with pytest.raises(Boom):
            h.process(msg("g"), fail=Boom())
        with pytest.raises(Boom):  # no wait after the first failure
            h.process(msg("g"), fail=Boom())
        waits = []
        for _ in range(2):
            with pytest.raises(RetryLater) as early:
                h.process(msg("g"), fail=Boom())
            waits.append(early.value.delay)
            _wait_out(early.value)
            with pytest.raises(Boom):
                h.process(msg("g"), fail=Boom())
        assert timedelta(seconds=0.1) < waits[0] <= timedelta(seconds=0.3)
        assert timedelta(seconds=0.4) < waits[1] <= timedelta(seconds=0.6)
        dead = _get(h, "g")
        assert (dead.status, dead.attempts, dead.retry_at) == (Status.DEAD, 4, None)
        assert h.process(msg("g")) is Outcome.DEAD
        assert len(h.seen) == 4

    def test_a_waiting_message_holds_its_retry_later_alone_in_an_isolated_batch(
        self, store_harness: HarnessFactory
    ) -> None:
        """With isolate, a message waiting for its retry time holds its own RetryLater and its batch-mates settle;
        without isolate the batch raises that RetryLater with nothing run, journaled or counted."""
        h = self.make(store_harness, retry=HOUR)
        with pytest.raises(Boom):
            h.process(msg("w"), fail=Boom())
        results = h.process_batch([msg("a"), msg("w"), msg("b")], isolate=True)
        assert results[0] is Outcome.PROCESSED
        assert isinstance(results[1], RetryLater)
        assert results[2] is Outcome.PROCESSED
        assert (h.effects("a"), h.effects("w"), h.effects("b")) == (1, 0, 1)
        with pytest.raises(RetryLater):
            h.process_batch([msg("c"), msg("w")])
        assert _get(h, "c") is None
        assert _get(h, "w").attempts == 1
        assert ["w"] not in h.seen[1:]

    def test_requeue_clears_retry_at(self, store_harness: HarnessFactory) -> None:
        """A dead row that still had a retry time is requeued without it: the next delivery runs at once."""
        h = self.make(store_harness, retry=HOUR)
        with pytest.raises(Boom):
            h.process(msg("q"), fail=Boom())
        assert _get(h, "q").retry_at is not None
        h.admin(f"UPDATE {h.table} SET status = 'dead'")  # parked by an operator's tool, its retry time kept
        assert h.call("requeue", SOURCE, "q") is True
        assert _get(h, "q").retry_at is None
        assert h.process(msg("q")) is Outcome.PROCESSED

    def test_a_lease_mode_failure_waits_too(self, store_harness: HarnessFactory) -> None:
        """In lease mode a failed claim gets its retry time too; a delivery before it runs nothing, counts nothing."""
        h = self.make(store_harness, retry=HOUR)
        with pytest.raises(Boom):
            h.process(msg("l"), fail=Boom(), lease=timedelta(seconds=30))
        with pytest.raises(RetryLater):
            h.process(msg("l"), lease=timedelta(seconds=30))
        record = _get(h, "l")
        assert (record.status, record.attempts, record.lease_until) == (Status.FAILED, 1, None)
        assert record.retry_at is not None
        assert len(h.seen) == 1

    def test_a_permanent_failure_parks_without_a_retry_time(self, store_harness: HarnessFactory) -> None:
        """A PermanentError parks at once: DEAD, no retry time, the next delivery returns DEAD."""
        h = self.make(store_harness, retry=HOUR)
        assert h.process(msg("p"), fail=Unreadable("bad")) is Outcome.DEAD
        record = _get(h, "p")
        assert (record.status, record.retry_at) == (Status.DEAD, None)
        assert h.process(msg("p")) is Outcome.DEAD


class InboxContract(ProcessContract, LeaseContract):
    """The inbox's whole behaviour on one store: process, failures and who pays for them, batches, lease mode, purge,
    the schema checks. The subclass gives a `store_harness` fixture returning an `InboxHarnessFactory`."""
