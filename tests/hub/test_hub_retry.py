"""The hub's retries wait: a failed interchange's delivery comes back before its retry time, runs nothing, costs no
attempt, and is handed back to the spool until that time."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from edinbox import Message, Status
from edinbox.hub import Accounting, Created, HubConfig, SqlAccounting, open_hub
from edinbox.sources.spool import publish
from hub.test_hub import doc, files, render
from hub_ops import stats


class FlakyAccounting(Accounting):
    """A sink whose first two calls for one invoice number fail (a downstream blip: the batch's call, charged to no
    one, then the call for it alone, its first attempt); later calls create it."""

    def __init__(self, inner: SqlAccounting, *, number: str) -> None:
        self.inner = inner
        self.number = number
        self.calls: list[float] = []

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Fail the first call for the flaky invoice."""
        if any(i.number == self.number for i in invoices):
            self.calls.append(time.monotonic())
            if len(self.calls) <= 2:
                raise RuntimeError("accounting is down for a moment")
        return await self.inner.create(tx, message, invoices)


async def test_a_failed_interchange_waits_for_its_retry_time_on_the_spool(
    hub_config: HubConfig, spool: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """retry_first=2s, no immediate retry: the failing interchange's next deliveries before its retry time run
    nothing (logged `waiting`), its file is put back dated to that time, and it is created once, at attempt 2, no
    sooner than 2 s after the failure, while its batch-mate is created at once."""
    config = hub_config.with_overrides(max_attempts=3, retry_immediate=0, retry_first="2s")
    flaky = render(doc(control="000000801", number="FLAKY"))
    fine = render(doc(control="000000802", number="FINE"))
    await publish(config.source, [("flaky", flaky), ("fine", fine)])
    caplog.set_level(logging.INFO, logger="edinbox")
    async with open_hub(config) as hub:
        sink = FlakyAccounting(hub.accounting, number="FLAKY")  # type: ignore[arg-type]
        hub.accounting = sink
        deadline = time.monotonic() + 20
        while files(spool, "inbound") + files(spool, "processing") and time.monotonic() < deadline:
            await hub.step()
        [record] = [r for r in await hub.inbox.records(limit=10) if "000000801" in f"{r.source}/{r.message_id}"]
    assert len(sink.calls) == 3
    assert sink.calls[2] - sink.calls[1] >= 2.0 - 0.05
    assert record is not None
    assert (record.status, record.attempts, record.retry_at) == (Status.PROCESSED, 2, None)
    assert any("waiting" in r.getMessage() and "000000801" in r.getMessage() for r in caplog.records)
    counts = await stats(config)
    assert (counts["processed"], counts["invoices"], counts["dead"]) == (2, 2, 0)
