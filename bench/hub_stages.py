"""Where the hub's time goes per message: wall time of each stage of `Hub.step` and of each named SQL statement.

The hub settles the first `--measure` deliveries of generated invoice traffic from a spool (as `bench.spool
--vs-parse` does), with timers wrapped around its stages: receiving from the spool, planning (parse, key, invoice
extraction: on the spool mostly ahead, while the previous batch's transaction waits for the database; otherwise in a
worker thread), the batch's transaction (the journal's claim, the accounting handler, the bookkeeping, the commit)
and the acks; and around every call of the store's unit, by statement name. Figures are microseconds per settled
message (wall time, so waits for threads and the disk count), then the parse-alone time of the same files. Stages
nest (the claim, handler and record are inside settle) or overlap (planning ahead runs during settle), so they do
not add up to the step.

With `--cpu` the figures are the event loop thread's CPU time instead, and every stage's figure leaves out the
planning and the spool claims that ran inside it (the next batch's, claimed and planned while the stage waited for the
database): each row is then that stage's own CPU, and the rows under the step add up to it. The process's user and
system CPU per message come first (system: the spool's renames, opens and reads, the reasons' flushes, the sockets).

Run: .venv/bin/python -m bench.hub_stages [--measure 2000] [--cpu] [--db postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.spool import _drop_schema, fill_traffic, parse_rate
from edinbox._async_inbox import AsyncInbox
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.database import on_inbox
from edinbox.hub.deliveries import _hub
from edinbox.hub.deliveries._batch import Batch
from edinbox.hub.deliveries._hub import Hub
from edinbox.hub.demo._traffic import generate
from edinbox.hub.ops import init
from edinbox.sources.spool import SpoolSource
from edinbox.stores import _async_mysql_unit, _async_postgres, _async_sqlite

_UNITS = (_async_sqlite._AsyncSQLiteUnit, _async_postgres._AsyncPostgresUnit, _async_mysql_unit._AsyncMySQLUnit)


class Timers:
    """Seconds and calls per label, from wrapped coroutines and functions."""

    def __init__(self, *, cpu: bool = False) -> None:
        """Start with nothing counted; `cpu`: count the calling thread's CPU time, each stage's without that of the
        `apart` stages run inside it (see the module's docstring), instead of wall time."""
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.stages: list[str] = []
        """The fixed labels, in the order they were wrapped."""
        self.clock = time.thread_time if cpu else time.perf_counter
        self.cpu = cpu
        self.apart: set[str] = set()
        """With `cpu`: the stages whose time the others leave out (planning and spool claims, run inside them)."""
        self.inside = 0.0
        """With `cpu`: the time of the `apart` stages so far, in the thread that made these timers (the loop's)."""
        self.thread = threading.get_ident()

    def wrap(self, owner: Any, name: str, label: str | Callable[..., str]) -> None:
        """Replace `owner.name` (a coroutine function or a function) with one that adds its wall time to `label`."""
        inner = getattr(owner, name)
        timers = self
        if isinstance(label, str):
            self.stages.append(label)

        def add(started: tuple[float, float], args: tuple[Any, ...]) -> None:
            key = label(*args) if callable(label) else label
            spent = timers.clock() - started[0]
            if key in timers.apart:
                if threading.get_ident() == timers.thread:  # a worker thread's planning is not the loop's time
                    timers.inside += spent
            elif timers.cpu:
                spent -= timers.inside - started[1]
            timers.seconds[key] += spent
            timers.calls[key] += 1

        if asyncio.iscoroutinefunction(inner):

            @functools.wraps(inner)
            async def timed(*args: Any, **kwargs: Any) -> Any:
                started = (timers.clock(), timers.inside)
                try:
                    return await inner(*args, **kwargs)
                finally:
                    add(started, args)

        else:

            @functools.wraps(inner)
            def timed(*args: Any, **kwargs: Any) -> Any:
                started = (timers.clock(), timers.inside)
                try:
                    return inner(*args, **kwargs)
                finally:
                    add(started, args)

        setattr(owner, name, timed)


def instrument(timers: Timers) -> None:
    """Wrap the hub's stages and every store unit's statement calls (with `cpu`, the acks and rejects too)."""
    receive = "  receive (spool claims and reads)"
    plan = "  plan, per delivery (on the spool mostly ahead, during the previous transaction)"
    if timers.cpu:
        timers.apart |= {receive, plan}
    timers.wrap(Hub, "step", "step (all of it)")
    timers.wrap(SpoolSource, "receive", receive)
    timers.wrap(Hub, "_plan", plan)
    if not timers.cpu:  # its CPU is the worker thread's: the plan row counts it
        timers.wrap(asyncio, "to_thread", "  plan, as the loop waits for a worker thread")
    timers.wrap(Hub, "_settle", "  settle (the batch's transaction)")
    timers.wrap(AsyncInbox, "_claim_batch", "    journal claim (insert, look up)")
    timers.wrap(AsyncInbox, "_keep", "    message store (payloads kept)")
    timers.wrap(Batch, "create", "    handler (invoices)")
    timers.wrap(Batch, "record", "    record (parked payloads, counters, ledger)")
    timers.wrap(_hub, "hand_back_each", "  finish (ack, reject or hand back each delivery)")
    if timers.cpu:
        timers.wrap(SpoolSource, "ack", "    spool ack (a rename into archive/)")
        timers.wrap(SpoolSource, "reject", "    spool reject (a .reason written and flushed, two renames)")
    for unit in _UNITS:
        for method in ("begin", "insert", "begin_fetch", "fetch", "run", "run_many", "commit", "rollback"):
            timers.wrap(unit, method, functools.partial(_statement, method))


def _statement(method: str, _unit: Any, name: Any = None, *_: Any) -> str:
    return f"SQL {method} {name}" if isinstance(name, str) else f"SQL {method}"


async def run_hub(root: Path, measure: int, *, db: str, schema: str) -> tuple[float, float, float]:
    """Settle `measure` deliveries with the hub; return the seconds it took, and the process's user and system CPU
    seconds for them (init excluded)."""
    if db:
        config = HubConfig(db=db, table=f"{schema}.inbox", source=f"dir://{root}")
    else:
        config = HubConfig(db=f"sqlite:///{root / 'hub.db'}", source=f"dir://{root}")
    await on_inbox(config, lambda inbox: init(inbox, config=config))
    async with open_hub(config) as hub:
        done = 0
        started, used = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        while done < measure:
            done += await hub.step()
        now = resource.getrusage(resource.RUSAGE_SELF)
        return time.perf_counter() - started, now.ru_utime - used.ru_utime, now.ru_stime - used.ru_stime


def main() -> int:
    """Run the instrumented hub once, then parse alone, and print microseconds per message."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", type=int, default=2000)
    parser.add_argument("--db", default="", help="a PostgreSQL URL [an SQLite file beside the spool]")
    parser.add_argument("--cpu", action="store_true", help="the loop thread's CPU time per stage, not wall time")
    args = parser.parse_args()
    traffic = list(generate(2000, duplicate_rate=0.0, seed=1).files)
    workdir = Path(tempfile.mkdtemp(prefix="bench-stages-"))
    schema = f"bench_stages_{os.getpid()}"
    timers = Timers(cpu=args.cpu)
    try:
        fill_traffic(workdir, args.measure, traffic)
        instrument(timers)
        try:
            seconds, user, system = asyncio.run(run_hub(workdir, args.measure, db=args.db, schema=schema))
        finally:
            if args.db:
                _drop_schema(args.db, schema)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    parse = 1e6 / parse_rate(traffic, args.measure)
    per = 1e6 / args.measure
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    where = "PostgreSQL" if args.db else "SQLite file"
    batch = HubConfig().batch_size
    print(f"hub on the spool and {where}, {args.measure:,} deliveries, batches of {batch} (load average {load}):")
    print(f"{seconds * per:,.0f} us per message; parse + key + invoice extraction alone: {parse:,.0f} us per file")
    print(f"the process's CPU: {user * per:,.0f} us user and {system * per:,.0f} us system per message")
    what = "us of CPU per message (the loop's thread; planning and claims apart)" if args.cpu else "us per message"
    print(f"| stage | {what} | calls |")
    print("|---|---|---|")
    for key in timers.stages:
        print(f"| {key} | {timers.seconds[key] * per:,.1f} | {timers.calls[key]:,} |")
    statements = sorted((k for k in timers.seconds if k.startswith("SQL")), key=lambda k: -timers.seconds[k])
    for key in statements[:12]:
        print(f"| {key} | {timers.seconds[key] * per:,.1f} | {timers.calls[key]:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
