"""The hub on the spool claims and plans its next batch while the database works on the current one, and gives that
batch back unsettled when it stops, fails or ends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from edinbox import Message
from edinbox._errors import StoreError
from edinbox.hub import Accounting, Created, HubConfig, open_hub
from edinbox.sources.spool import SpoolSource, publish
from hub.test_hub import doc, files, render
from hub_ops import list_rows, stats

pytestmark = pytest.mark.parametrize("hub_config", ["sqlite", "postgresql"], indirect=True)


class WatchedAccounting(Accounting):
    """The SQL sink, whose batch handler first waits a moment, notes how many files are claimed, and may fail."""

    needs_lines = False

    def __init__(self, inner: Accounting, spool: Path, *, failing: bool = False) -> None:
        self.inner = inner
        self.spool = spool
        self.failing = failing
        self.claimed: list[int] = []

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Create as the SQL sink does."""
        return await self.inner.create(tx, message, invoices)

    async def create_many(self, tx: Any, batch: Sequence[tuple[Message, Sequence[Any]]]) -> list[Created]:
        """Wait, note the claims, then fail (a database outage) or create as the SQL sink does."""
        await asyncio.sleep(0.2)
        self.claimed.append(len(files(self.spool, "processing")))
        if self.failing:
            raise StoreError("the database went away")
        return await self.inner.create_many(tx, batch)


class RecoveringAccounting(Accounting):
    """The SQL sink, whose first batch outlasts the spool's claim_timeout, then has another process's spool source
    recover stale claims before it creates; it notes how many files that recovery took back."""

    needs_lines = False

    def __init__(self, inner: Accounting, other: SpoolSource, *, seconds: float) -> None:
        self.inner = inner
        self.other = other
        self.seconds = seconds
        self.taken: list[int] = []

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Create as the SQL sink does."""
        return await self.inner.create(tx, message, invoices)

    async def create_many(self, tx: Any, batch: Sequence[tuple[Message, Sequence[Any]]]) -> list[Created]:
        """Outlast claim_timeout (the first batch only), have the other source recover, then create."""
        if not self.taken:
            await asyncio.sleep(self.seconds)
            self.taken.append(self.other.recover())
        return await self.inner.create_many(tx, batch)


def invoices(count: int) -> list[tuple[str, bytes]]:
    """`count` interchanges of one invoice each, under distinct keys."""
    return [(f"a{i}", render(doc(control=f"{900 + i:09d}", number=f"A-{i}"))) for i in range(count)]


async def test_the_next_batch_is_claimed_and_planned_while_the_current_one_settles(
    hub_config: HubConfig, spool: Path
) -> None:
    """While the first batch's handler runs, the second batch is claimed too and planned; the next step settles it
    without receiving or planning again, and each invoice is created once."""
    config = hub_config.with_overrides(batch_size=3)
    await publish(config.source, invoices(6))
    async with open_hub(config) as hub:
        sink = hub.accounting = WatchedAccounting(hub.accounting, spool)
        planned: list[str] = []
        plan = hub._plan

        def noted(delivery: Any) -> Any:
            planned.append(delivery.coordinates)
            return plan(delivery)

        hub._plan = noted  # type: ignore[method-assign]
        assert await hub.step() == 3
        assert sink.claimed == [6]  # the first batch's three and the next three, claimed while it settled
        assert len(planned) == 6
        assert len(files(spool, "archive")) == 3
        assert await hub.step() == 3
        assert len(planned) == 6  # planned ahead: not again
    counts = await stats(config)
    assert (counts["processed"], counts["invoices"], counts["duplicate"]) == (6, 6, 0)
    assert len(files(spool, "archive")) == 6


async def test_a_batch_received_ahead_goes_back_unsettled_when_the_hub_ends(hub_config: HubConfig, spool: Path) -> None:
    """The hub's end hands the batch it received ahead back to inbound/, nothing of it journaled; a later hub settles
    it as new messages, not duplicates."""
    config = hub_config.with_overrides(batch_size=3)
    await publish(config.source, invoices(6))
    async with open_hub(config) as hub:
        hub.accounting = WatchedAccounting(hub.accounting, spool)
        assert await hub.step() == 3
        assert len(files(spool, "processing")) == 3
    assert files(spool, "processing") == []
    assert len(files(spool, "inbound")) == 3
    assert len(await list_rows(config, status=None, limit=20)) == 3
    async with open_hub(config) as hub:
        await hub.run(once=True)
    counts = await stats(config)
    assert (counts["processed"], counts["invoices"], counts["duplicate"]) == (6, 6, 0)


async def test_a_failed_step_gives_back_the_batch_received_ahead(hub_config: HubConfig, spool: Path) -> None:
    """A database outage in the batch's transaction hands back its deliveries and the next batch claimed meanwhile:
    nothing stays claimed, nothing is journaled, and once the database is back all of it settles once."""
    config = hub_config.with_overrides(batch_size=3, idle_timeout=2.0)
    await publish(config.source, invoices(6))
    async with open_hub(config) as hub:
        sink = hub.accounting
        failing = hub.accounting = WatchedAccounting(sink, spool, failing=True)
        with pytest.raises(StoreError, match="went away"):
            await hub.step()
        assert failing.claimed == [6]
        assert files(spool, "processing") == []
        assert await list_rows(config, status=None, limit=20) == []
        hub.accounting = sink
        await hub.run(once=True)
    counts = await stats(config)
    assert (counts["processed"], counts["invoices"], counts["duplicate"]) == (6, 6, 0)


async def test_a_batch_claimed_ahead_is_not_taken_back_while_a_slow_batch_settles(
    hub_config: HubConfig, spool: Path
) -> None:
    """A batch that outlasts the spool's claim_timeout keeps its own claims and those of the batch claimed ahead
    fresh: another hub's recovery takes none of them back, and every invoice settles once, with no duplicate."""
    config = hub_config.with_overrides(batch_size=3, source=f"{hub_config.source}?claim_timeout=1")
    await publish(config.source, invoices(6))
    async with SpoolSource(spool, consumer="other", claim_timeout=1) as other, open_hub(config) as hub:
        sink = hub.accounting = RecoveringAccounting(hub.accounting, other, seconds=1.6)
        assert await hub.step() == 3
        assert sink.taken == [0]  # nothing was stale: the three in hand and the three claimed ahead were kept fresh
        assert files(spool, "inbound") == []
        assert await hub.step() == 3
    counts = await stats(config)
    assert (counts["processed"], counts["invoices"], counts["duplicate"]) == (6, 6, 0)
    assert len(files(spool, "archive")) == 6


class StolenAccounting(Accounting):
    """A sink whose batch handler finds one of the batch's claims taken back (moved to inbound/ as another hub's
    recovery would), then meets a database outage."""

    needs_lines = False

    def __init__(self, spool: Path) -> None:
        self.spool = spool

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Never called: the batch handler fails first."""
        raise AssertionError("not reached")

    async def create_many(self, tx: Any, batch: Sequence[tuple[Message, Sequence[Any]]]) -> list[Created]:
        """Move the first claim back to inbound/, then fail as a database outage."""
        [claim, *_] = sorted(p for p in (self.spool / "processing").rglob("*") if p.is_file())
        claim.rename(self.spool / "inbound" / claim.name)
        raise StoreError("the database went away")


async def test_a_delivery_that_cannot_be_handed_back_is_logged(
    hub_config: HubConfig, spool: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A failed step hands its batch back; the claim another hub took meanwhile cannot be: one `nack-failed` line
    counts it and names its error, and the others go back to inbound/ all the same."""
    config = hub_config.with_overrides(batch_size=3)
    await publish(config.source, invoices(3))
    async with open_hub(config) as hub:
        hub.accounting = StolenAccounting(spool)
        with caplog.at_level(logging.WARNING, logger="edinbox.hub"), pytest.raises(StoreError):
            await hub.step()
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("nack-failed")]
    assert "failed=1 held=3" in line
    assert "is gone" in line
    assert len(files(spool, "inbound")) == 3
