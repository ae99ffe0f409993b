"""The proof, per broker: the hub killed after a commit and before the ack creates every invoice exactly once.

Each test publishes partner interchanges (a share of them published twice, as a retrying producer does) with
`edinbox publish`, runs `edinbox run --once` in subprocesses with the fault point `EDINBOX_FAULT=after_commit:K`
armed (the hub SIGKILLs itself after its K-th commit, before the ack), restarts it, and checks the database and the
broker: invoices == unique interchanges, nothing left on the broker, and the broker's own delivery count shows the
killed batch really came back.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from edinbox.hub.demo._traffic import PARTNERS, Doc, render
from services import require_service

from .harness import BROKERS, Broker

CLI = [sys.executable, "-c", "from edinbox.cli import main; main()"]
UNIQUE = 40
DUPLICATE_SHARE = 0.25
_DELIVERY_COUNT = re.compile(r"delivery_count\W+(\d+)")


def traffic(folder: Path, *, seed: int) -> tuple[list[Path], int]:
    """Write UNIQUE invoice interchanges, a quarter of them twice (producer retries), shuffled, one per file."""
    rng = random.Random(seed)
    docs = []
    for n in range(UNIQUE):
        partner = PARTNERS[n % len(PARTNERS)]
        control = f"{700000 + n:09d}" if partner.standard == "X12" else f"IC{700000 + n}"
        lines = tuple((rng.randint(1, 9), Decimal(rng.randint(100, 9999)) / 100) for _ in range(rng.randint(1, 3)))
        docs.append(
            Doc(partner, control, "invoice", f"P{n:05d}", date(2026, 11, 1) + timedelta(days=n % 28), lines=lines)
        )
    payloads = [render(doc) for doc in docs]
    payloads += [render(doc) for doc in rng.sample(docs, k=int(UNIQUE * DUPLICATE_SHARE))]
    rng.shuffle(payloads)
    files = []
    for i, payload in enumerate(payloads):
        path = folder / f"{i:03d}.edi"
        path.write_bytes(payload)
        files.append(path)
    return files, UNIQUE


def cli(*args: str, fault: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the edinbox command in a subprocess (with the fault point armed when given)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    if fault:
        env["EDINBOX_FAULT"] = fault
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False)


def hub_args(url: str, db: list[str]) -> list[str]:
    """`edinbox run` on the source, draining what is waiting, logging one JSON line per settled message."""
    return ["run", "--source", url, *db, "--consumer", "hub", "--once", "--log-format", "json"]


def stats(db: list[str]) -> dict[str, int]:
    """The hub's counts from `edinbox stats --json`."""
    done = cli("stats", *db, "--consumer", "hub", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def redeliveries(log: str) -> int:
    """How many settled messages the broker itself reported as delivered more than once."""
    return sum(1 for count in _DELIVERY_COUNT.findall(log) if int(count) > 1)


@pytest.fixture(params=BROKERS, ids=lambda b: b.name)
def broker(request: pytest.FixtureRequest, unique_name: str) -> Iterator[Broker]:
    """Each broker of the harness in turn, its fresh names removed after the test."""
    chosen: Broker = request.param
    if chosen.service:
        require_service(chosen.service)
    yield chosen
    asyncio.run(chosen.cleanup(unique_name))


def publish(files: list[Path], url: str) -> None:
    """Publish every file with `edinbox publish`, the producer id set to the interchange key."""
    done = cli("publish", *map(str, files), "--to", url)
    assert done.returncode == 0, done.stderr
    assert f"published {len(files)} message(s)" in done.stdout


def started(hubs: list[subprocess.Popen[bytes]], logs: list[Path], *, within: float = 60) -> None:
    """Wait until every hub logged its `started` line (its source is open: it receives from now on)."""
    deadline = time.monotonic() + within
    while not all('"event":"started"' in log.read_text() for log in logs):
        assert time.monotonic() < deadline, "the hubs never all started"
        assert all(hub.poll() is None for hub in hubs), [log.read_text() for log in logs]
        time.sleep(0.1)


def drained(broker: Broker, name: str, hub: subprocess.Popen[bytes], *, within: float = 120) -> None:
    """Wait until the broker holds nothing more for the consumer but what `hub` has in hand: the killed hub's batch
    came back (NATS: after its ack_wait) and was taken, every other delivery too."""
    deadline = time.monotonic() + within
    while asyncio.run(broker.left(name)) > 0:
        assert hub.poll() is None, "the hub exited before the broker was drained"
        assert time.monotonic() < deadline, "the broker still holds deliveries"
        time.sleep(0.2)


def check(
    broker: Broker, name: str, db: list[str], *, unique: int, published: int, logs: str, redelivered: bool = True
) -> None:
    """Invoices == unique interchanges, every copy suppressed, nothing left on the broker, and (when a hub was
    killed) the killed batch's redelivery observed."""
    counts = stats(db)
    assert counts["invoices"] == unique
    assert counts["processed"] == unique
    # the producers' copies (unless the broker dropped them), plus at least one redelivery of the killed batch
    copies = 0 if broker.drops_publisher_copies else published - unique
    if redelivered:
        assert counts["duplicate"] >= copies + 1
        assert redeliveries(logs) >= 1, "the broker never reported a delivery count above 1"
    else:
        assert counts["duplicate"] == copies
    assert counts["conflict"] == counts["dead"] == counts["rejected"] == 0
    assert asyncio.run(broker.left(name)) == 0


def test_killed_after_commit_then_restarted(broker: Broker, unique_name: str, tmp_path: Path) -> None:
    """A hub SIGKILLed between commit and ack, then restarted, leaves exactly one invoice per unique interchange."""
    url = broker.url(unique_name)
    db = ["--db", f"sqlite:///{tmp_path / 'hub.db'}"]
    assert cli("init", *db).returncode == 0  # as an operator does before starting the hub
    files, unique = traffic(tmp_path, seed=5)
    publish(files, url)
    # batches of 20, so the traffic takes several commits and the kill at the second leaves deliveries unsettled
    first = cli(*hub_args(url, db), "--batch-size", "20", fault="after_commit:2")
    assert first.returncode == -9, first.stderr
    second = cli(*hub_args(url, db))
    assert second.returncode == 0, second.stderr
    check(broker, unique_name, db, unique=unique, published=len(files), logs=second.stderr)


def test_two_hubs_compete_and_one_is_killed(
    broker: Broker, unique_name: str, tmp_path: Path, postgres_db: list[str]
) -> None:
    """Two hubs share one queue on PostgreSQL; one is killed after a commit; every invoice still exists once."""
    url = broker.url(unique_name)
    files, unique = traffic(tmp_path, seed=7)
    init = cli("init", *postgres_db, "--consumer", "hub")  # once, as an operator does before starting workers
    assert init.returncode == 0, init.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    # not --once: each hub runs until the test stops it (an idle timeout would run from its start, and on a loaded
    # machine the traffic may arrive seconds later)
    args = [*CLI, *[a for a in hub_args(url, postgres_db) if a != "--once"], "--batch-size", "5"]
    logs = {name: tmp_path / f"{name}.log" for name in ("killed", "survivor")}
    killed = subprocess.Popen(
        args, env={**env, "EDINBOX_FAULT": "after_commit:3"}, stdout=subprocess.DEVNULL, stderr=logs["killed"].open("w")
    )
    survivor = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=logs["survivor"].open("w"))
    started([killed, survivor], list(logs.values()))  # both consume before the traffic arrives, so they share it
    publish(files, url)
    killed.wait(timeout=120)
    drained(broker, unique_name, survivor)
    survivor.send_signal(signal.SIGTERM)  # it finishes the batch in hand; what it received ahead goes back
    survivor.wait(timeout=120)
    killed_log, survivor_log = (log.read_text() for log in logs.values())
    assert killed.returncode == -9, killed_log
    assert survivor.returncode == 0, survivor_log
    sweep = cli(*hub_args(url, postgres_db))  # whatever came back after the survivor went idle
    assert sweep.returncode == 0, sweep.stderr
    assert '"outcome":"processed"' in survivor_log
    check(broker, unique_name, postgres_db, unique=unique, published=len(files), logs=survivor_log + sweep.stderr)
