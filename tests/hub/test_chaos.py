"""`edinbox chaos` as a user runs it: a real process against real sources and a private PostgreSQL it restarts.

Each run publishes traffic, kills hubs and restarts the database; the tests read its verdict line, check that the
chaos really happened (kills and restarts counted), count the invoices in the database themselves, and show the
command can fail: a source whose hub parks every delivery ends with lost > 0 and a non-zero exit. Runs with bad
deliveries among the good ones (`--poison`, `--huge`) also check that each was parked once and became no invoice.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pymysql
import pytest

from edinbox.hub import HubConfig
from edinbox.hub.chaos._run import CONSUMER, tally
from edinbox.hub.chaos._traffic import huge, parked, poison
from edinbox.hub.demo._traffic import generate
from edinbox.sources import open_source
from edinbox.sources.spool import SpoolSource, publish
from edinbox.testing.contract import collect
from hub_ops import forget, list_rows
from servers import PrivateMariaDB, PrivatePostgres
from services import require_service

from .test_hub import settle

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="private PostgreSQL servers are started on Linux")

MESSAGES = 40
DUPLICATES = 10


def chaos(*args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    """Run `edinbox chaos` as a subprocess (no EDINBOX_ variable of this process leaks in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    command = [sys.executable, "-m", "edinbox.cli", "chaos", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def summary(output: str) -> dict[str, int]:
    """The numbers of the verdict line (`lost=N doubled=M`, with bad deliveries `parked=K of N parked_twice=T
    stray=S`: `of` holds N) and of the summary (`kills=K db_restarts=R ...`)."""
    lines = output.splitlines()
    verdict = r"lost=\d+ doubled=\d+( parked=\d+ of (?P<of>\d+) parked_twice=\d+ stray=\d+)?"
    match = re.fullmatch(verdict, lines[0])
    assert match, output
    numbers = {k: int(v) for k, v in re.findall(r"\b([a-z_]+)=(\d+)\b", "\n".join(lines[:3]))}
    if match["of"] is not None:
        numbers["of"] = int(match["of"])
    return numbers


@pytest.fixture
async def source(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh spool folder, RabbitMQ queue, NATS stream or Redis stream on the shared servers, removed afterwards.

    NATS and Redis get short redelivery times (ack_wait, dead_after) so a killed hub's deliveries come back fast.
    """
    kind = request.param
    if kind == "spool":
        yield f"dir://{tmp_path / 'spool'}"
        return
    require_service(kind)
    if kind == "rabbitmq":
        from sources.test_rabbitmq import BROKER, drop

        yield f"{BROKER}?queue={unique_name}"
        await drop(unique_name)
    elif kind == "nats":
        import nats

        yield f"nats://127.0.0.1:4222?stream={unique_name}&subject={unique_name}.in&ack_wait=2"
        nc = await nats.connect("nats://127.0.0.1:4222")
        try:
            await nc.jetstream().delete_stream(unique_name)
        finally:
            await nc.close()
    else:
        import redis.asyncio as redis_asyncio

        yield f"redis://127.0.0.1:6379/0?stream={unique_name}&dead_after=1&claim_idle=2"
        client = redis_asyncio.Redis.from_url("redis://127.0.0.1:6379/0")
        await client.delete(unique_name, f"{unique_name}.dead")
        await client.aclose()


async def left_in(url: str) -> list[str]:
    """The keys a consumer of the chaos run still receives from the source, within its redelivery time."""
    async with open_source(url, consumer=CONSUMER) as source:
        comeback = 0.0 if isinstance(source, SpoolSource) else source.ack_wait or 0.0  # the spool: at its open
        got = await collect(source, 1, within=comeback + 1.5)
        for delivery in got:
            await source.nack(delivery)
    return [d.key for d in got]


def chaos_with_restart(
    source: str, db: str, restart: str, table: str, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """A chaos run (two hubs, a kill every 1.5 s, the database restarted once) that passed: exit 0, lost=0
    doubled=0, kills and the restart counted, each message settled with one effect; the finished command."""
    done = chaos(
        *("--source", source, "--db", db, "--table", table),
        *("--messages", str(MESSAGES), "--duplicates", str(DUPLICATES), "--hubs", "2", "--kill-every", "1.5"),
        *("--restart-db-command", restart, "--timeout", "120"),
        # quiet for 7 s before the hubs are stopped: longer than the spool's recovery of a dead hub's files (5 s)
        # and the brokers' redelivery times (2 s at most here: RabbitMQ at once, NATS ack_wait, Redis dead_after),
        # so the last copies are settled too; the quiet counts only while every hub runs and has said its source is
        # open, however long a replacement takes to start on a loaded machine
        *("--drain-idle", "7"),
        *("--dir", str(tmp_path / "work")),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    numbers = summary(done.stdout)
    assert numbers["lost"] == 0
    assert numbers["doubled"] == 0
    assert numbers["kills"] > 0
    assert numbers["db_restarts"] == 1
    assert numbers["effects"] == numbers["settled"] == MESSAGES
    return done


@pytest.fixture(scope="module")
def postgres() -> Iterator[PrivatePostgres]:
    """A private PostgreSQL server that chaos runs restart (each in its own schema); stopped and deleted after."""
    with PrivatePostgres() as server:
        yield server


@pytest.mark.parametrize("source", ["spool", "rabbitmq", "nats", "redis"], indirect=True)
def test_chaos_with_a_database_restart_loses_and_doubles_nothing(
    source: str, postgres: PrivatePostgres, tmp_path: Path, unique_name: str
) -> None:
    """Hubs killed every 1.5 s and PostgreSQL restarted mid-run: `lost=0 doubled=0`, exit 0, the kills and the
    restart really happened, and the database holds each published invoice exactly once."""
    done = chaos_with_restart(source, postgres.url, postgres.restart_command(), f"{unique_name}.inbox", tmp_path)
    with psycopg.connect(postgres.url) as conn:
        query = f"SELECT count(*), count(DISTINCT (seller, number)) FROM {unique_name}.edinbox_hub_invoices"
        row = conn.execute(query.encode()).fetchone()
    assert row == (MESSAGES, MESSAGES)
    password = urlsplit(source).password
    if password:  # RabbitMQ's guest:guest: masked in the report, the progress lines and the hubs' log
        shown = done.stdout + done.stderr + (tmp_path / "work" / "hubs.log").read_text()
        assert f":{password}@" not in shown
        assert ":***@" in done.stdout
    assert asyncio.run(left_in(source)) == []  # drained: nothing comes back, even after the source's ack_wait
    again = chaos("--source", source, "--db", postgres.url, "--table", f"{unique_name}.inbox", "--timeout", "30")
    assert again.returncode == 1
    assert "already holds" in again.stderr  # a second run on the same tables is refused, not miscounted


@pytest.fixture(scope="module")
def mariadb() -> Iterator[PrivateMariaDB]:
    """A private MariaDB server that chaos runs restart (each in its own database); stopped and deleted after."""
    with PrivateMariaDB() as server:
        yield server


@pytest.mark.parametrize("source", ["spool", "rabbitmq"], indirect=True)
def test_chaos_with_a_mariadb_restart_loses_and_doubles_nothing(
    source: str, mariadb: PrivateMariaDB, tmp_path: Path, unique_name: str
) -> None:
    """Hubs killed every 1.5 s and a private MariaDB restarted mid-run (`--db mariadb://`): `lost=0 doubled=0`,
    the kills and the restart happened, and the database holds each published invoice exactly once."""
    url = mariadb.url.replace("mysql://", "mariadb://", 1)
    chaos_with_restart(source, url, mariadb.restart_command(), f"{unique_name}.inbox", tmp_path)
    connection = pymysql.connect(host="127.0.0.1", port=mariadb.port, user="root", autocommit=True)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*), count(DISTINCT seller, number) FROM `{unique_name}`.edinbox_hub_invoices")
            row = cursor.fetchone()
    finally:
        connection.close()
    assert row == (MESSAGES, MESSAGES)
    assert asyncio.run(left_in(source)) == []


def test_chaos_fails_when_the_hub_cannot_settle(tmp_path: Path) -> None:
    """A spool whose hub parks every file (max_payload below every interchange) settles nothing: the run times
    out, reports every invoice lost and which ones, and exits 1."""
    spool = f"dir://{tmp_path / 'spool'}?max_payload=100"
    done = chaos(
        *("--source", spool, "--db", f"sqlite:///{tmp_path / 'chaos.db'}", "--messages", "12", "--duplicates", "0"),
        # the run times out whatever its length: 15 s lets the hub start and park every file on a loaded machine
        *("--hubs", "1", "--kill-every", "0", "--timeout", "15", "--dir", str(tmp_path / "work")),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    numbers = summary(done.stdout)
    assert numbers["lost"] == 12
    assert "timed out" in done.stdout
    assert "missing (first 5)" in done.stdout
    assert len(list((tmp_path / "spool" / "rejected").glob("*.reason"))) == 12  # the hub really parked them


def _hubs_of(spool: str) -> list[int]:
    """Pids of this user's processes whose environment names the spool (the chaos run's hubs)."""
    pids = []
    needle = f"EDINBOX_SOURCE={spool}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_chaos_run_leaves_no_hub_running(tmp_path: Path, signum: int) -> None:
    """Ctrl-C or SIGTERM in the middle of a run stops the command and every hub it started."""
    spool = f"dir://{tmp_path / 'spool'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    command = [sys.executable, "-m", "edinbox.cli", "chaos", "--source", spool]
    command += ["--db", f"sqlite:///{tmp_path / 'chaos.db'}", "--messages", "400", "--hubs", "2"]
    command += ["--dir", str(tmp_path / "work")]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(_hubs_of(spool)) < 2:
        assert proc.poll() is None, "the command ended before its hubs started"
        assert time.monotonic() < deadline, "the hubs never started"
        time.sleep(0.1)
    proc.send_signal(signum)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert _hubs_of(spool) == []


async def test_a_second_effect_shows_in_the_count_the_invoices_table_hides(hub_config: HubConfig) -> None:
    """An interchange processed twice (its journal row forgotten, then redelivered) leaves the invoices table as it
    was, because of its unique key, but adds one effect: the tally chaos counts `doubled` from sees it."""
    traffic = generate(3, duplicate_rate=0.0, seed=5, mixed=False)
    await publish(hub_config.source, traffic.files)
    await settle(hub_config)
    first = await tally(hub_config)
    assert (len(first.invoices), first.effects, first.settled) == (3, 3, 3)
    [row, *_] = await list_rows(hub_config, status="processed", limit=1)
    assert await forget(hub_config, row["key"])
    await publish(hub_config.source, traffic.files[:3])
    await settle(hub_config)
    second = await tally(hub_config)
    assert second.invoices == first.invoices  # the unique key hides the second effect...
    assert (second.effects, second.settled) == (4, 3)  # ...the effect counter does not: doubled = 1


def test_poison_and_huge_deliveries_are_parked_once_on_the_spool_with_sqlite(tmp_path: Path) -> None:
    """Six poison deliveries (not EDI, cut short, a total too large) and two of 17-20 MiB (a blob; a good invoice and
    a huge bad interchange) among 30 interchanges, hubs killed every 1.5 s in batches of 4: `parked=8 of 8`,
    nothing lost or doubled, eight rows in the rejected table (the blob's first 64 KiB, the bad interchange whole),
    the pair's invoice created, no poison invoice, and the spool's rejected/ folder holding each bad file whole."""
    db = tmp_path / "chaos.db"
    done = chaos(
        *("--source", f"dir://{tmp_path / 'spool'}", "--db", f"sqlite:///{db}", "--messages", "30"),
        *("--duplicates", "5", "--hubs", "2", "--kill-every", "1.5", "--batch-size", "4"),
        *("--poison", "6", "--huge", "2", "--timeout", "60", "--dir", str(tmp_path / "work")),
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    numbers = summary(done.stdout)
    assert (numbers["lost"], numbers["doubled"], numbers["kills"] > 0) == (0, 0, True)
    assert (numbers["parked"], numbers["of"], numbers["parked_twice"], numbers["stray"]) == (8, 8, 0, 0)
    assert "invoices=31/31" in done.stdout  # the pair's good invoice too
    assert "batch_size=4" in done.stdout
    with sqlite3.connect(db) as conn:
        sizes = sorted(size for (size,) in conn.execute("SELECT length(payload) FROM edinbox_hub_rejected"))
        poisoned = conn.execute("SELECT count(*) FROM edinbox_hub_invoices WHERE number LIKE 'POISON-%'").fetchone()
    assert len(sizes) == 8
    assert sizes[-2] == 64 * 1024  # the blob, cut to the head the table keeps
    assert sizes[-1] > 16 * 1024 * 1024  # the pair's bad interchange, whole
    assert poisoned == (0,)
    kept = [p for p in (tmp_path / "spool" / "rejected").iterdir() if not p.name.endswith(".reason")]
    assert len(kept) == 7  # the pair's file was acked: its good invoice is settled
    assert max(p.stat().st_size for p in kept) > 16 * 1024 * 1024


def test_poison_and_huge_deliveries_are_parked_once_through_a_postgresql_restart(
    postgres: PrivatePostgres, tmp_path: Path, unique_name: str
) -> None:
    """Five poison deliveries and two of 17-20 MiB among 40 interchanges on the spool, hubs killed every 1.5 s in
    batches of 50 and PostgreSQL restarted mid-run: `parked=7 of 7`, nothing lost or doubled, seven rejected rows,
    the invoices and the huge pair's one each created once."""
    done = chaos(
        *("--source", f"dir://{tmp_path / 'spool'}", "--db", postgres.url, "--table", f"{unique_name}.inbox"),
        *("--messages", str(MESSAGES), "--duplicates", str(DUPLICATES), "--hubs", "2", "--kill-every", "1.5"),
        *("--batch-size", "50", "--poison", "5", "--huge", "2", "--restart-db-command", postgres.restart_command()),
        *("--timeout", "60", "--drain-idle", "7", "--dir", str(tmp_path / "work")),
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    numbers = summary(done.stdout)
    assert (numbers["lost"], numbers["doubled"], numbers["db_restarts"]) == (0, 0, 1)
    assert (numbers["parked"], numbers["of"], numbers["parked_twice"], numbers["stray"]) == (7, 7, 0, 0)
    with psycopg.connect(postgres.url) as conn:
        rejected = conn.execute(f"SELECT count(*) FROM {unique_name}.edinbox_hub_rejected".encode()).fetchone()
        invoices = conn.execute(f"SELECT count(*) FROM {unique_name}.edinbox_hub_invoices".encode()).fetchone()
    assert (rejected, invoices) == ((7,), (MESSAGES + 1,))


@pytest.mark.parametrize("source", ["nats"], indirect=True)
def test_a_huge_delivery_the_broker_refuses_is_said_and_not_counted(source: str, tmp_path: Path) -> None:
    """NATS refuses a 17-20 MiB message (its max_payload is 1 MiB by default): the run says so, counts the poison
    alone (`parked=3 of 3`), and passes."""
    done = chaos(
        *("--source", source, "--db", f"sqlite:///{tmp_path / 'chaos.db'}", "--messages", "10", "--duplicates", "0"),
        *("--hubs", "1", "--kill-every", "0", "--poison", "3", "--huge", "1", "--timeout", "60"),
        *("--dir", str(tmp_path / "work")),
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    numbers = summary(done.stdout)
    assert (numbers["lost"], numbers["parked"], numbers["of"]) == (0, 3, 3)
    assert "refused by the source (not counted): 1" in done.stdout
    assert "max_payload" in done.stdout


def test_a_bad_delivery_parked_whole_and_cut_counts_twice() -> None:
    """The parking count finds a bad delivery by the fingerprint of the bytes it parks, whole or their first 64 KiB:
    one row is parked once, both rows are parked twice, none is not parked."""
    rng = random.Random(3)
    [_, pair] = huge(2, rng=rng, max_payload=32 * 1024 * 1024)
    [small] = poison(1, rng=rng)
    whole, head = sorted(pair.fingerprints)
    assert parked([pair, small], [whole]) == (1, 0)
    assert parked([pair, small], [whole, head, *small.fingerprints]) == (2, 1)
    assert parked([pair, small], []) == (0, 0)


def test_poison_is_the_same_for_the_same_seed_and_each_payload_distinct() -> None:
    """Same seed, same bad bytes; every poison payload differs from the others (parked once per content)."""
    first = poison(9, rng=random.Random(11))
    assert [b.payload for b in first] == [b.payload for b in poison(9, rng=random.Random(11))]
    assert len({b.payload for b in first}) == 9
    assert {b.kind for b in first} == {"not-edi", "truncated", "total-too-large"}
