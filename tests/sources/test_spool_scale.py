"""Draining a spool costs the same per file whatever the backlog: no listing or stat of every waiting file per batch."""

from __future__ import annotations

import time
from pathlib import Path

from edinbox.sources.spool import SpoolSource, file_name


def _fill(root: Path, count: int) -> None:
    inbound = root / "inbound"
    inbound.mkdir(parents=True)
    for i in range(count):
        (inbound / file_name(f"m{i:06d}")).write_bytes(b"ISA payload")


async def _rate(root: Path, settle: int) -> float:
    """Files per second to receive (batches of 20) and ack the first `settle` files."""
    async with SpoolSource(root, consumer="c") as source:
        done = 0
        started = time.perf_counter()
        while done < settle:
            got = await source.receive(max_messages=20, timeout=1)
            assert got
            for d in got:
                await source.ack(d)
            done += len(got)
        return done / (time.perf_counter() - started)


async def test_a_backlog_twenty_times_bigger_barely_slows_the_drain(tmp_path: Path) -> None:
    """Settling 500 files with 10,000 waiting runs at least a third as fast as with 500 waiting (a spool that lists
    and stats the whole backlog for every batch runs about twenty times slower there)."""
    best = {500: 0.0, 10_000: 0.0}
    for round_ in range(2):
        for backlog in (500, 10_000):
            root = tmp_path / f"{round_}-{backlog}"
            _fill(root, backlog)
            best[backlog] = max(best[backlog], await _rate(root, 500))
    assert best[10_000] > best[500] / 3
