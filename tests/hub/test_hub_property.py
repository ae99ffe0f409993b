"""Property: whatever the traffic, batch size and crash points, each invoice exists once and nothing is lost."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from edinbox.hub import FaultPoint, HubConfig, open_hub
from edinbox.hub.demo._traffic import generate
from edinbox.sources.spool import publish
from hub_ops import init, stats


class Crash(BaseException):
    """The process dying right after a commit: nothing after it runs, the claimed deliveries are not acked."""


class CrashAfterCommit(FaultPoint):
    """The fault point, raising instead of SIGKILL so that many crashes fit in one test process."""

    def committed(self, last_words: Callable[[], None] | None = None) -> None:
        """Count the commit and crash on the armed one, after its last words."""
        self.commits += 1
        if self.commits == self.after:
            if last_words is not None:
                last_words()
            raise Crash


def _pending(spool: Path) -> int:
    inbound = len(os.listdir(spool / "inbound"))
    return inbound + sum(len(os.listdir(d)) for d in (spool / "processing").iterdir())


async def _scenario(config: HubConfig, spool: Path, *, crashes: list[int], crashed: list[int]) -> None:
    for after in [*crashes, None]:
        fault = CrashAfterCommit("after_commit", after) if after else None
        try:
            async with open_hub(config, fault=fault) as hub:
                await hub.run(once=True)
        except Crash:
            crashed.append(after)
            continue
        if not _pending(spool):
            return


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    messages=st.integers(5, 40),
    duplicate_rate=st.floats(0, 1),
    batch_size=st.integers(1, 8),
    crashes=st.lists(st.integers(1, 3), min_size=1, max_size=4),
)
def test_invoices_equal_unique_interchanges_whatever_the_crashes(
    *,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    messages: int,
    duplicate_rate: float,
    batch_size: int,
    crashes: list[int],
) -> None:
    """Random traffic, batch sizes and crashes between commit and ack: the counts always add up."""
    root = tmp_path_factory.mktemp("hub")
    spool = root / "spool"
    config = HubConfig(
        db=f"sqlite:///{root / 'hub.db'}",
        source=f"dir://{spool}",
        idle_timeout=0.05,
        batch_size=batch_size,
        poll_timeout=0.05,
    )
    traffic = generate(messages, duplicate_rate=duplicate_rate, seed=seed)

    async def scenario() -> dict[str, object]:
        await init(config)
        await publish(config.source, traffic.files)
        await _scenario(config, spool, crashes=crashes, crashed=crashed)
        return await stats(config)

    crashed: list[int] = []
    counts = asyncio.run(scenario())
    event(f"crashes: {len(crashed)}")
    assert _pending(spool) == 0
    assert counts["invoices"] == traffic.invoices
    assert counts["processed"] + counts["resent"] == traffic.unique_interchanges  # type: ignore[operator]
    assert counts["resent"] == traffic.resends
    assert counts["rejected_payloads"] == traffic.malformed
    assert counts["dead"] == 0
    # a producer copy meets whichever version of a reused control number came first: a duplicate or a conflict
    assert counts["duplicate"] + counts["conflict"] >= traffic.duplicates + traffic.conflicts  # type: ignore[operator]
    assert counts["received"] >= len(traffic.files)  # type: ignore[operator]
