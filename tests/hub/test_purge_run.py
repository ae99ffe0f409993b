"""`edinbox run --purge-every`: the journal is purged beside the batch loop, with the rules of `edinbox purge`.

On every database the hub settles traffic while its purger deletes old settled rows and keeps dead and recent ones;
across processes one purger runs at a time; a database outage in the middle of a purge (a private PostgreSQL or
MariaDB, stopped and started again) is logged once and waited out, the hub stays up, and the purge finishes after;
`edinbox purge` alone meets the same outage with a one-line error and exit status 1, and runs again to the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from edinbox import Message, PermanentError, Tx
from edinbox._urls import database_url
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.database._journal import open_inbox
from edinbox.hub.demo._traffic import PARTNERS, Doc, render
from edinbox.metrics import Metrics
from edinbox.sources.spool import publish
from hub.test_outage import HubProcess, first_row, spool_empty, wait_for
from hub_ops import init
from servers import PrivateDatabase

OLD = 300
"""Old settled rows the purger must delete."""


def invoices(n: int, *, start: int = 0) -> list[tuple[str, bytes]]:
    """`n` distinct one-line invoice interchanges."""
    return [
        (f"f{i}", render(Doc(PARTNERS[i % 2], f"{i:09d}", "invoice", f"OUT-{i}", lines=((1, Decimal("9.50")),))))
        for i in range(start, start + n)
    ]


def backdate(config: HubConfig, prefix: str, days: int) -> None:
    """Move the settled_at of the journal rows whose message id starts with `prefix` `days` into the past."""
    url = database_url(config.db)
    if url.dialect == "sqlite":
        with contextlib.closing(sqlite3.connect(url.target, isolation_level=None)) as connection:
            connection.execute(
                f"UPDATE {config.table} SET settled_at = settled_at - ? WHERE message_id LIKE ?",
                (days * 86400, f"{prefix}%"),
            )
    elif url.dialect == "mysql":
        import pymysql

        connection = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {config.table} SET settled_at = settled_at - INTERVAL %s DAY WHERE message_id LIKE %s",
                    (days, f"{prefix}%"),
                )
        finally:
            connection.close()
    else:
        with psycopg.connect(config.db, autocommit=True) as connection:
            connection.execute(
                f"UPDATE {config.table} SET settled_at = settled_at - make_interval(days => %s) "
                "WHERE message_id LIKE %s",
                (days, f"{prefix}%"),
            )


async def journal_rows(config: HubConfig) -> tuple[int, int, int]:
    """(old processed rows left, dead rows, recent rows) of the hub's consumer."""
    async with open_inbox(config) as inbox:
        records = await inbox.records(limit=100_000)
    old = sum(1 for r in records if r.message_id.startswith("old-"))
    dead = sum(1 for r in records if r.message_id.startswith("dead-"))
    recent = sum(1 for r in records if r.message_id.startswith("recent-"))
    return old, dead, recent


async def seed(config: HubConfig) -> None:
    """OLD processed rows and one dead row, all settled two days ago, and ten processed rows settled now."""

    def nothing(tx: Tx, message: Message) -> None:
        pass

    def refuse(tx: Tx, message: Message) -> None:
        raise PermanentError("refused for good")

    async with open_inbox(config) as inbox:
        await inbox.process_batch([Message(f"old-{i}", "S") for i in range(OLD)], _async(nothing))
        await inbox.process(Message("dead-1", "S"), _async(refuse))
    backdate(config, "old-", 2)
    backdate(config, "dead-", 2)
    async with open_inbox(config) as inbox:
        await inbox.process_batch([Message(f"recent-{i}", "S") for i in range(10)], _async(nothing))


def _async(handler: Callable[[Tx, Message], None]) -> Any:
    """The sync handler as the coroutine function AsyncInbox calls."""

    async def run(tx: Tx, message: Message) -> None:
        handler(tx, message)

    return run


async def test_run_purges_old_settled_rows_beside_the_traffic(
    hub_config: HubConfig, spool: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With --purge-every 1s and a throttle, the hub settles every invoice it receives while its purger deletes the
    300 processed rows older than the retention, over several periods, and keeps the dead row and the recent ones;
    the purge counters count each run and its rows."""
    config = hub_config.with_overrides(
        horizon="1d", retention="1d", purge_every="1s", purge_max_rate=200, batch_size=5, relay=False
    )
    await seed(config)
    assert await journal_rows(config) == (OLD, 1, 10)
    caplog.set_level(logging.INFO, logger="edinbox.hub")
    stop = asyncio.Event()
    metrics = Metrics()
    async with open_hub(config, stop=stop, metrics=metrics) as hub:
        running = asyncio.ensure_future(hub.run())
        for chunk in range(4):  # traffic arrives while the purge (300 rows at 200 rows/s) runs
            await publish(config.source, invoices(10, start=10 * chunk))
            await asyncio.sleep(0.4)
        deadline = time.monotonic() + 60
        while (await journal_rows(config))[0] or not spool_empty(spool) or len(purges(caplog)) < 2:
            assert time.monotonic() < deadline, "the purge or the traffic did not finish"
            assert not running.done()
            await asyncio.sleep(0.2)
        stop.set()
        totals = await running
    assert totals["processed"] == 40
    assert await journal_rows(config) == (0, 1, 10)
    assert sum(purge["rows"] for purge in purges(caplog)) == OLD
    labels = {"consumer": config.consumer}
    assert metrics.registry.get_sample_value("edinbox_purged_rows_total", labels) == OLD
    assert metrics.registry.get_sample_value("edinbox_purge_runs_total", labels) == len(purges(caplog))


def purges(caplog: pytest.LogCaptureFixture) -> list[dict[str, int]]:
    """The `purged` lines the hub logged, as their numeric fields."""
    found = []
    for record in caplog.records:
        message = record.getMessage()
        if message.startswith("purged "):
            fields = dict(part.split("=", 1) for part in message.split()[1:])
            found.append({k: int(v) for k, v in fields.items() if v.isdigit()})
    return found


@pytest.fixture
def database(private_database: PrivateDatabase) -> PrivateDatabase:
    """A fresh database on the module's private PostgreSQL or MariaDB server, initialised for the hub (`edinbox
    init`)."""
    asyncio.run(init(HubConfig(db=private_database.url)))
    return private_database


def execute(url: str, statement: str, params: tuple[Any, ...] = ()) -> int:
    """Run one statement on PostgreSQL or MariaDB (autocommit); the first column of its first row, if any."""
    row = first_row(url, statement, params)
    return int(row[0]) if row else 0


def fill_old(url: str, table: str, rows: int, *, consumer: str = "accounting") -> None:
    """`rows` processed journal rows settled 60 days ago, written in one statement."""
    if url.startswith(("mysql://", "mariadb://")):
        execute(
            url,
            f"INSERT INTO {table} (consumer, source, message_id, fingerprint, received_at, status, attempts, "
            "settled_at) SELECT %s, 'S', CONCAT('old-', seq), MD5(seq), UTC_TIMESTAMP(6) - INTERVAL 60 DAY, "
            f"'processed', 1, UTC_TIMESTAMP(6) - INTERVAL 60 DAY FROM seq_1_to_{int(rows)}",
            (consumer,),
        )
        return
    execute(
        url,
        f"INSERT INTO {table} (consumer, source, message_id, fingerprint, received_at, status, attempts, "
        "settled_at) SELECT %s, 'S', 'old-' || i, md5(i::text), now() - interval '60 days', 'processed', 1, "
        "now() - interval '60 days' FROM generate_series(1, %s) AS i",
        (consumer, rows),
    )


def old_rows(url: str, table: str) -> int:
    """Journal rows whose message id starts with old-."""
    return execute(url, f"SELECT count(*) FROM {table} WHERE message_id LIKE %s", ("old-%",))


@pytest.mark.skipif(sys.platform != "linux", reason="private database servers are started on Linux")
def test_a_database_outage_in_the_middle_of_a_purge_leaves_the_hub_up(database: PrivateDatabase, spool: Path) -> None:
    """The database (PostgreSQL, MariaDB) stopped while the periodic purge is deleting: one `purge-down` line however
    many periods the outage spans, the hub never exits, and once the server is back the purge finishes
    (`purge-back`) and the traffic settles, each invoice once."""
    source, url = f"dir://{spool}", database.url
    fill_old(url, "inbox", 20_000)
    asyncio.run(publish(source, invoices(20)))
    hub = HubProcess("--db", url, "--source", source, "--purge-every", "1s", "--purge-max-rate", "2000", "--no-relay")
    try:
        wait_for(lambda: old_rows(url, "inbox") < 18_000, timeout=120, what="the purge to start deleting")
        assert old_rows(url, "inbox") > 0  # stopped in the middle of the purge (10 s at 2,000 rows/s)
        database.stop()
        asyncio.run(publish(source, invoices(20, start=20)))
        wait_for(lambda: bool(hub.events("purge-down")), timeout=60, what="the purge-down line")
        time.sleep(3)  # several periods with the database down (not a synchronisation: the outage's length)
        assert hub.proc.poll() is None
        database.start()
        wait_for(lambda: bool(hub.events("purge-back")), timeout=120, what="the purge-back line")
        wait_for(lambda: old_rows(url, "inbox") == 0, timeout=120, what="the purge to finish")
        wait_for(lambda: spool_empty(spool), timeout=120, what="the traffic to settle")
        assert hub.proc.poll() is None
    finally:
        code = hub.stop()
    assert code == 0
    assert len(hub.events("purge-down")) == 1, hub.lines
    assert len(hub.events("purge-back")) == 1, hub.lines
    assert not [line for line in hub.lines if "Traceback" in line], "\n".join(hub.lines)
    assert execute(url, "SELECT count(*) FROM edinbox_hub_invoices") == 40
    assert execute(url, "SELECT count(DISTINCT number) FROM edinbox_hub_invoices") == 40


@pytest.mark.skipif(sys.platform != "linux", reason="private database servers are started on Linux")
def test_edinbox_purge_with_the_database_stopped_mid_purge(database: PrivateDatabase) -> None:
    """`edinbox purge` whose database (PostgreSQL, MariaDB) stops while it deletes exits 1 (a one-shot command
    reports a failed dependency as any other error) with one `Error:` line naming the batch's failure and no
    traceback; a second run, once the server is back, deletes the rest."""
    url = database.url
    fill_old(url, "inbox", 20_000)
    args = [sys.executable, "-m", "edinbox", "purge", "--db", url, "--older-than", "30d", "--max-rate", "2000"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    first = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: old_rows(url, "inbox") < 18_000, timeout=120, what="the purge to start deleting")
        database.stop()
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 1, (out, err)
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, err
    # the batch's failure, not the clean-up's ("failed to run purge_unlock: Not connected" hid it on MariaDB)
    assert "PostgreSQL failed" in errors[0] or "MariaDB failed" in errors[0], errors[0]
    assert "unlock" not in errors[0], errors[0]
    assert "Traceback" not in err
    assert "never retrieved" not in err  # the progress count's task used to be left failing behind the error
    assert len(err.strip().splitlines()[-1]) < 1000
    database.start()
    left = old_rows(url, "inbox")
    assert 0 < left < 18_000
    second = subprocess.run([*args, "--json"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["purged"] == left
    assert old_rows(url, "inbox") == 0


def test_two_purges_in_two_processes_never_run_together(postgres_url: str, unique_name: str) -> None:
    """While `edinbox purge --max-rate 200` deletes 4,000 rows in one process, `edinbox purge` in another deletes
    nothing and returns while the first still runs (the session lock holds across processes, and the second does
    not wait for it); the first one deletes them all."""
    table = f"{unique_name}.inbox"
    config = HubConfig(db=postgres_url, table=table)
    asyncio.run(init(config))
    try:
        fill_old(postgres_url, table, 4000)
        args = [sys.executable, "-m", "edinbox", "purge", "--db", postgres_url, "--table", table, "--json"]
        # 20 s of work for the first, in batches of 100 (rows go down all along, not by 1,000 every 5 s): time
        # enough for a second process to start and finish on a loaded machine
        first = subprocess.Popen([*args, "--max-rate", "200", "--batch-size", "100"], stdout=subprocess.PIPE, text=True)
        wait_for(lambda: old_rows(postgres_url, table) < 4000, timeout=30, what="the first purge to start")
        second = subprocess.run(args, capture_output=True, text=True, check=True, timeout=60)
        assert json.loads(second.stdout)["purged"] == 0
        assert first.poll() is None  # it did not wait for the first one's lock: the first one is still at work
        assert old_rows(postgres_url, table) > 0
        out, _ = first.communicate(timeout=60)
        assert first.returncode == 0
        assert json.loads(out)["purged"] == 4000
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {unique_name} CASCADE")
