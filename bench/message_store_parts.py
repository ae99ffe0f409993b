"""Where the message store's CPU goes in the hub on SQLite: the kept payload's statement in the settling transaction,
the COMMIT in the driver's thread, the index batches; SQLite's temporary files on disk (its default) against in
memory (`PRAGMA temp_store = MEMORY`, what the store's connections use), side by side.

Each round settles the same generated interchanges (no duplicates) through the hub from a spool, batches of 20, as
`bench.message_store` does, with the store off or on, on an SQLite file of its own; the four variants take turns
round by round. The parts are CPU time of the thread that runs them (`time.thread_time`), per delivery: `keep` is
`AsyncJournal._keep` (its parameters and its statement, on the caller's thread inside the held transaction), `commit`
the COMMITs run in the driver's thread, `index` the index batches (`Indexer.step` and `finish`); `hub` is the hub
process's CPU per delivery in all, its threads together, the index batches included.

A statement inside a transaction that writes a table and its indexes copies each page it changes into SQLite's
statement journal; past 64 KiB in a transaction SQLite moves it to a file in /var/tmp (`temp_store` FILE) and writes
each page there with two system calls, which `strace -f -e pwrite64` shows as one `etilqs_*` file per batch.

Run: .venv/bin/python -m bench.message_store_parts [--messages 2000] [--rounds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite.core

from bench.message_store import hub_round
from edinbox._async_journal import AsyncJournal
from edinbox.hub.demo._traffic import generate
from edinbox.loop._index import Indexer
from edinbox.stores import _async_sqlite

SPENT: collections.Counter[str] = collections.Counter()
"""Thread CPU seconds per part, of the round running."""
TEMP_STORE = ["MEMORY"]
"""The `temp_store` the store's connections get in the round running."""


def _timed(method: Callable[..., Awaitable[Any]], part: str) -> Callable[..., Awaitable[Any]]:
    """`method` counting the CPU time of the thread that runs it into `SPENT[part]`."""

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return await method(*args, **kwargs)
        finally:
            SPENT[part] += time.thread_time() - started

    return timed


def _install() -> None:
    """Count the parts (see the module's docstring) and let each round choose the connections' `temp_store`."""
    AsyncJournal._keep = _timed(AsyncJournal._keep, "keep")  # type: ignore[method-assign]
    Indexer.step = _timed(Indexer.step, "index")  # type: ignore[method-assign]
    Indexer.finish = _timed(Indexer.finish, "index")  # type: ignore[method-assign]
    execute = aiosqlite.core.Connection._execute

    async def driver_call(self: Any, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not (args and isinstance(args[0], str) and args[0].startswith("COMMIT")):
            return await execute(self, fn, *args, **kwargs)

        def commit(*inner: Any, **named: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*inner, **named)
            finally:
                SPENT["commit"] += time.thread_time() - started

        return await execute(self, commit, *args, **kwargs)

    aiosqlite.core.Connection._execute = driver_call  # type: ignore[method-assign]
    connect = _async_sqlite.connect

    def connect_with(path: str) -> sqlite3.Connection:
        connection = connect(path)
        connection.execute(f"PRAGMA temp_store = {TEMP_STORE[0]}")
        return connection

    _async_sqlite.connect = connect_with


def main() -> int:
    """Run the rounds, variants taking turns; print the parts' medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    _install()
    files = generate(args.messages, duplicate_rate=0.0, seed=11, mixed=False).files
    variants = [(store, keep) for store in ("FILE", "MEMORY") for keep in (False, True)]
    found: dict[tuple[str, bool], list[dict[str, float]]] = {variant: [] for variant in variants}
    root = Path(tempfile.mkdtemp(prefix="bench-store-parts-"))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Message store parts ({os.cpu_count()} CPUs, load average {load})")
    try:
        for turn in range(args.rounds):
            for store, keep in variants if turn % 2 == 0 else variants[::-1]:
                TEMP_STORE[0] = store
                SPENT.clear()
                folder = Path(tempfile.mkdtemp(dir=root))
                result = asyncio.run(hub_round(folder, f"sqlite:///{folder / 'hub.db'}", "inbox", files, keep=keep))
                parts = {part: seconds / result.settled * 1e6 for part, seconds in SPENT.items()}
                parts["hub"] = result.cpu_per(with_index=True)
                found[(store, keep)].append(parts)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nHub (sqlite, spool, batch 20), {args.messages} interchanges, {args.rounds} rounds (median us/delivery):")
    print("| temp_store | store | keep (statement) | commit (driver thread) | index batches | hub CPU in all |")
    print("|---|---|---|---|---|---|")
    for store, keep in variants:
        rounds = found[(store, keep)]
        median = {part: statistics.median(r.get(part, 0.0) for r in rounds) for part in ("keep", "commit", "index")}
        hub = statistics.median(r["hub"] for r in rounds)
        print(
            f"| {store} | {'on' if keep else 'off'} | {median['keep']:.1f} | {median['commit']:.1f} | "
            f"{median['index']:.1f} | {hub:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
