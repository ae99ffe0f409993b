"""Outbox benchmark: relay throughput to the spool and to RabbitMQ, and the hub with acknowledgments on vs off,
measured side by side in one run.

Relay: `--rows` rows are published into the outbox of a fresh SQLite journal (one transaction per 100), then
`AsyncInbox.relay` passes (100 rows each: claim, send with the key as producer id, mark sent) drain it to a spool
folder and to a RabbitMQ queue (publisher confirms), through the relay's publishers kept open across passes, and
to RabbitMQ once more with a connection opened and closed per pass (what the relay did before); rows per second,
and each rate as a ratio of the spool's.

Hub: generated invoice traffic (no duplicates, 60 % asking for a TA1 / CONTRL) is settled by the hub on a spool and
an SQLite file without agreements, then with every partner's acknowledgments going to an outbound spool folder,
written in the settling transaction and either relayed apart (`--no-relay`: what the hub itself pays; an `edinbox
relay` process sends them) or relayed by the hub's own relay before `run --once` returns (the spool's fsyncs
included); deliveries per second, and the cost of acknowledgments as 1 - on / off. Modes take turns round by round,
so the load of other processes on a shared machine hits them alike; the best round of each is compared, and the
median round too.

`--outbound /dev/shm` puts the partners' outbound spool folders on another file system (here memory), to tell the
relay's own cost from its disk flushes competing with the journal's on one disk.

The temporary folders are removed at the end of the run, not after each measure: on ext4 without a journal (this
machine's disk) creating a file skips every inode of its block group freed in the last five minutes, one lookup
each, so thousands of files removed by the previous measure made each acknowledgment file (created during the timed
part, unlike the hub's input) cost a millisecond of kernel time. `--root DIR` makes them in DIR (default: the
system's temporary folder, which other processes churn too).

Run: .venv/bin/python -m bench.outbox [--rounds 3] [--rows 2000] [--messages 1000] [--no-rabbitmq] [--outbound DIR]
     [--root DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.hubs import drop_queue
from edinbox import AsyncInbox
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.config._model import Agreement
from edinbox.hub.database import on_inbox
from edinbox.hub.demo._traffic import generate
from edinbox.hub.ops import init
from edinbox.loop import Publishers, send
from edinbox.sources.spool import publish

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"
PAYLOAD = b"ISA*00*" + b"x" * 300 + b"~IEA*1*000000001~"


async def relay_rate(root: Path, destination: str, rows: int, *, keep_open: bool = True) -> float:
    """Publish `rows` outbox rows, then drain them to `destination` through publishers kept open (as the relay
    does) or opened per pass; return rows relayed per second."""
    db = f"sqlite:///{root / 'outbox.db'}"
    async with AsyncInbox(db, consumer="bench") as inbox:
        await inbox.create_schema()
        for start in range(0, rows, 100):

            async def work(tx: object, start: int = start) -> None:
                for n in range(start, min(rows, start + 100)):
                    await tx.publish(destination, PAYLOAD, key=f"ack/{n:07d}")  # type: ignore[attr-defined]

            await inbox.transaction(work)
        publishers = Publishers()
        started = time.perf_counter()
        sent = 0
        while (result := await inbox.relay(publishers.send if keep_open else send, limit=100)).sent:
            sent += result.sent
        await publishers.aclose()
        if result.error is not None or sent != rows:
            raise RuntimeError(f"relayed {sent} of {rows}: {result.error}")
        return sent / (time.perf_counter() - started)


HUB_MODES = {"off": (False, True), "on, relayed apart": (True, False), "on, relayed by run": (True, True)}
"""Hub modes: (acknowledgments written, relayed by the hub's own relay within the measured time)."""


async def hub_rate(
    root: Path, messages: int, *, acknowledgments: bool, relay: bool, outbound: Path | None = None
) -> float:
    """Settle generated traffic through the hub (SQLite, spool); return deliveries per second."""
    spool, out = root / "spool", (outbound or root) / "out"
    config = HubConfig(
        db=f"sqlite:///{root / 'hub.db'}", source=f"dir://{spool}", batch_size=20, idle_timeout=0.2, relay=relay
    )
    if acknowledgments:
        agreement = Agreement(outbound=f"dir://{out}/{{id}}", ta1="requested")
        config = config.with_overrides(partners={"*": agreement})
    await on_inbox(config, lambda inbox: init(inbox, config=config))
    traffic = generate(messages, duplicate_rate=0.0, seed=11)
    await publish(config.source, traffic.files)
    started = time.perf_counter()
    async with open_hub(config) as hub:
        totals = await hub.run(once=True)
    elapsed = time.perf_counter() - started - config.idle_timeout  # the idle wait that ends `once`
    if acknowledgments and relay and not totals.get("relayed"):
        raise RuntimeError("no acknowledgment was relayed")
    return sum(v for k, v in totals.items() if k not in ("relayed", "outbox_parked")) / elapsed


def main() -> int:
    """Measure and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--no-rabbitmq", action="store_true")
    parser.add_argument("--outbound", type=Path, help="the folder the partners' outbound spools go in (another disk)")
    parser.add_argument("--root", type=Path, help="the folder the temporary folders go in (default: the system's)")
    args = parser.parse_args()
    made: list[Path] = []
    try:
        return measure(args, made)
    finally:
        for folder in made:  # only now: see the module's docstring
            shutil.rmtree(folder, ignore_errors=True)


def measure(args: argparse.Namespace, made: list[Path]) -> int:
    """Measure every mode round by round, appending each temporary folder to `made`; print the tables."""

    def folder(where: Path | None) -> Path:
        made.append(Path(tempfile.mkdtemp(prefix="edinbox-bench-", dir=where)))
        return made[-1]

    relays: dict[str, list[float]] = {"spool": []}
    if not args.no_rabbitmq:
        relays.update({"rabbitmq": [], "rabbitmq, a connection per pass": []})
    hubs: dict[str, list[float]] = {mode: [] for mode in HUB_MODES}
    for _ in range(args.rounds):
        for name, rates in relays.items():
            root = folder(args.root)
            queue = f"bench_outbox_{uuid.uuid4().hex[:8]}"
            try:
                where = f"dir://{root / 'out'}" if name == "spool" else f"{RABBITMQ}?queue={queue}"
                keep_open = name != "rabbitmq, a connection per pass"
                rates.append(asyncio.run(relay_rate(root, where, args.rows, keep_open=keep_open)))
            finally:
                if name != "spool":
                    asyncio.run(drop_queue(queue))
        for mode, measured in hubs.items():
            root = folder(args.root)
            written, relayed = HUB_MODES[mode]
            outbound = folder(args.outbound) if args.outbound else None
            rate = hub_rate(root, args.messages, acknowledgments=written, relay=relayed, outbound=outbound)
            measured.append(asyncio.run(rate))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Outbox relay, {args.rows} rows of {len(PAYLOAD)} bytes, 100 per pass, best of {args.rounds} rounds")
    print(f"({os.cpu_count()} CPUs, load average {load}):")
    print("| destination | rate | ratio to the spool |\n|---|---|---|")
    base = max(relays["spool"])
    for name, best in relays.items():
        print(f"| {name} | {max(best):,.0f} rows/s | x{max(best) / base:.2f} |")
    print(f"\nHub (SQLite, spool, batch 20), {args.messages} generated interchanges, acknowledgments off vs on:")
    print("| acknowledgments | best | ratio to off | median | ratio to off | rounds |\n|---|---|---|---|---|---|")
    off, off_median = max(hubs["off"]), statistics.median(hubs["off"])
    for mode, rates in hubs.items():
        best, median = max(rates), statistics.median(rates)
        print(
            f"| {mode} | {best:,.0f} deliveries/s | x{best / off:.2f} | {median:,.0f} deliveries/s "
            f"| x{median / off_median:.2f} | {' '.join(f'{r:,.0f}' for r in rates)} |"
        )
    for mode in list(HUB_MODES)[1:]:
        best, median = 1 - max(hubs[mode]) / off, 1 - statistics.median(hubs[mode]) / off_median
        print(f"acknowledgments ({mode}) cost {best:.0%} (best rounds), {median:.0%} (medians) (target: < 25 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
