"""The message store's write, settling transaction against index batch: a kept payload indexed at once (its words
and packed bytes made in the settling transaction, the full-text index written there: how PostgreSQL and MariaDB keep
it) against written as received and indexed later (`index_payloads`, 500 per transaction: how PostgreSQL did at
journal version 13). On SQLite from journal version 14 the settling statement takes no words in either mode (the
full-text index is written by the index batches, from the packed body): its two rows measure the same writes.

Each round writes the same generated interchanges (471 bytes on average) into a fresh journal through the store's
own statements, 20 per transaction as the hub's batches: `keep_params` then `payloads_keep` in one `transaction`;
for the deferred mode the index batches follow, timed apart. The modes take turns round by round. Figures are the
benchmark process's CPU microseconds per payload (SQLite runs in the process: its work is in them; PostgreSQL's
server work is not) and wall microseconds, median round.

Run: .venv/bin/python -m bench.message_store_writes [--messages 2000] [--rounds 6] [--no-postgres]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.message_store import POSTGRES, _schema
from edinbox import Inbox, Message
from edinbox._payloads import keep_params, search_text
from edinbox.hub.demo._traffic import generate

BATCH = 20
"""Payloads per settling transaction (the hub's batch)."""


def one_round(db: str, table: str, messages: list[Message], *, at_once: bool) -> dict[str, float]:
    """Write `messages` kept, in batches; CPU and wall microseconds per payload of the parameters, the settling
    transactions and (deferred) the index batches."""
    spent = {"params": 0.0, "settle cpu": 0.0, "settle wall": 0.0, "index cpu": 0.0, "index wall": 0.0}
    with Inbox(db, consumer="bench", table=table, keep_payloads=True) as inbox:
        inbox.create_schema()
        for start in range(0, len(messages), BATCH):
            cpu = time.process_time()
            rows = [keep_params("bench", m, cap=1 << 22, indexed=at_once) for m in messages[start : start + BATCH]]
            spent["params"] += time.process_time() - cpu
            cpu, wall = time.process_time(), time.perf_counter()
            inbox.transaction(lambda tx, rows=rows: tx.unit.run_many("payloads_keep", rows))
            spent["settle cpu"] += time.process_time() - cpu
            spent["settle wall"] += time.perf_counter() - wall
        cpu, wall = time.process_time(), time.perf_counter()
        while inbox.index_payloads():
            pass
        spent["index cpu"] += time.process_time() - cpu
        spent["index wall"] += time.perf_counter() - wall
        assert inbox.search(search_text(bytes(messages[-1].payload)).split()[-1])  # indexed, either way
    return {name: value / len(messages) * 1e6 for name, value in spent.items()}


def measure(
    name: str, fresh: Callable[[], tuple[str, str, Callable[[], None]]], messages: list[Message], rounds: int
) -> None:
    """Run the rounds on one database, modes taking turns; print the medians."""
    found: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for turn in range(rounds):
        for at_once in (True, False) if turn % 2 == 0 else (False, True):
            db, table, drop = fresh()
            try:
                found[at_once].append(one_round(db, table, messages, at_once=at_once))
            finally:
                drop()
    print(f"\n{name}, {len(messages)} payloads, {BATCH} per settling transaction, {rounds} rounds (median us/payload):")
    print("| mode | params CPU | settling CPU | settling wall | index batches CPU | index batches wall |")
    print("|---|---|---|---|---|---|")
    for at_once, label in ((True, "indexed at once"), (False, "as received, indexed later")):
        median = {key: statistics.median(r[key] for r in found[at_once]) for key in found[at_once][0]}
        print(
            f"| {label} | {median['params']:.1f} | {median['settle cpu']:.1f} | {median['settle wall']:.1f} | "
            f"{median['index cpu']:.1f} | {median['index wall']:.1f} |"
        )


def main() -> int:
    """Parse the options, run the rounds on SQLite and PostgreSQL, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    files = generate(args.messages, duplicate_rate=0.0, seed=11, mixed=False).files
    messages = [Message(f"{i:09d}", "bench", payload) for i, (_, payload) in enumerate(files)]
    root = Path(tempfile.mkdtemp(prefix="bench-store-writes-"))
    print(
        f"Message store writes ({os.cpu_count()} CPUs, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())})"
    )

    def sqlite() -> tuple[str, str, Callable[[], None]]:
        folder = Path(tempfile.mkdtemp(dir=root))
        return f"sqlite:///{folder / 'store.db'}", "inbox", lambda: shutil.rmtree(folder, ignore_errors=True)

    def postgresql() -> tuple[str, str, Callable[[], None]]:
        schema, drop = _schema()
        return POSTGRES, f"{schema}.inbox", drop

    try:
        measure("SQLite", sqlite, messages, args.rounds)
        if not args.no_postgres:
            measure("PostgreSQL", postgresql, messages, args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
