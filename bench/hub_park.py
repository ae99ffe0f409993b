"""The hub's parking of a batch's payloads on PostgreSQL: one statement over arrays against one INSERT per payload.

    .venv/bin/python -m bench.hub_park [--db postgresql://postgres@127.0.0.1:5432/test] [--turns 60] [--parked 5]

Each turn parks, in a transaction of its own on the hub's tables (a fresh schema, dropped after), `--parked`
payloads of 600 bytes (a rejected interchange's head) the way a batch parks them, once through `park` (`hub_park`
over the batch's arrays: one statement) and once one pipelined `hub_park` per payload (`run_many`, the way before),
in alternating order, and times the parking alone (not the commit, the same for both); it prints each way's time per
payload (median of the turns) and the median per-turn ratio of rates.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from typing import Any

from bench.spool import _drop_schema
from edinbox.hub import HubConfig
from edinbox.hub.database import Parked, open_inbox, park
from edinbox.hub.ops import init


async def one_by_one(tx: Any, *, consumer: str, parked: list[Parked]) -> None:
    """The payloads parked one pipelined INSERT each (`hub_park` over one-row arrays, an executemany), as the hub
    parked them before it sent the batch's as one set."""
    rows = [
        {"consumer": consumer, "fingerprint": [p.fingerprint], "delivery": [p.delivery], "reason": [p.reason],
         "payload": [p.payload], "deliveries": [1]}
        for p in parked
    ]  # fmt: skip
    await tx.unit.run_many("hub_park", rows)


async def timed(way: Any, tx: Any, batch: list[Parked]) -> float:
    """Seconds `way` takes to park `batch` in the transaction `tx` (its commit not counted)."""
    started = time.perf_counter()
    await way(tx, consumer="bench", parked=batch)
    return time.perf_counter() - started


async def run(db: str, *, turns: int, parked: int) -> None:
    """Time both ways turn by turn and print the table."""
    schema = f"bench_park_{os.getpid()}"
    config = HubConfig(db=db, table=f"{schema}.inbox")
    ways = {"one statement (the batch's set)": park, "one INSERT each": one_by_one}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    try:
        async with open_inbox(config) as inbox:
            await init(inbox, config=config)
            for turn in range(turns + 3):  # three turns of warm-up
                order = list(ways) if turn % 2 else list(ways)[::-1]
                for name in order:
                    batch = [
                        Parked(uuid.uuid4().hex, f"dir:rejected/{turn}-{i}", "not EDI", os.urandom(300).hex().encode())
                        for i in range(parked)
                    ]
                    took = await inbox.transaction(lambda tx, way=ways[name], batch=batch: timed(way, tx, batch))
                    if turn >= 3:
                        seconds[name].append(took)
    finally:
        _drop_schema(db, schema)
    base = "one INSERT each"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"parking {parked} payloads per transaction, {turns} turns each, alternating (load average {load})")
    print("| way | us per payload (median turn) | ratio of rates to one INSERT each: median [min-max] |")
    print("|---|---|---|")
    for name, times in seconds.items():
        ratios = sorted(b / t for b, t in zip(seconds[base], times, strict=True))
        print(
            f"| {name} | {statistics.median(times) / parked * 1e6:,.0f} | "
            f"x{statistics.median(ratios):.2f} [{ratios[0]:.2f}-{ratios[-1]:.2f}] |"
        )


def main() -> None:
    """Parse the arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--parked", type=int, default=5, help="payloads parked per transaction")
    args = parser.parse_args()
    asyncio.run(run(args.db, turns=args.turns, parked=args.parked))


if __name__ == "__main__":
    main()
