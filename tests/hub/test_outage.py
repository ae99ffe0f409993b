"""The hub heals itself: a database outage (its own private server, stopped and restarted) is waited out.

Each test runs `edinbox run` as a real process over a spool with traffic, against a private PostgreSQL (or
MariaDB) on a free port, and asserts: the hub never exits on its own, every invoice is created exactly once, the
outage is two log lines (down, back), and the hub catches up soon after the server is back (bounded by the
backoff's own limits).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from edinbox.hub.config._model import HubConfig
from edinbox.hub.demo._traffic import PARTNERS, Doc, render
from edinbox.loop._outage import WAIT_JITTER, WAIT_MAX
from edinbox.sources.spool import publish
from hub.scrape import scrape
from hub_ops import init
from servers import PrivateDatabase, PrivatePostgres, PrivateRabbitMQ, free_port

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="private database servers are started on Linux")


class HubProcess:
    """`edinbox run` in a subprocess, its log lines collected as they come."""

    def __init__(self, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "edinbox.cli", "run", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def events(self, event: str) -> list[str]:
        """The log lines of one event (dependency-down, dependency-back, settled...)."""
        return [line for line in self.lines if f" event={event} " in f"{line} "]

    def stop(self) -> int:
        """SIGTERM, then the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        return self.ended()

    def ended(self, timeout: float = 60) -> int:
        """The exit status of a hub that ends by itself within `timeout` seconds; killed if it does not (the wait
        then raises TimeoutExpired)."""
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=60)
            self._reader.join(timeout=10)


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout` seconds (a guard, not a measurement)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def invoices(n: int, *, start: int = 0) -> list[tuple[str, bytes]]:
    """`n` distinct one-line invoice interchanges."""
    return [
        (f"f{i}", render(Doc(PARTNERS[i % 2], f"{i:09d}", "invoice", f"OUT-{i}", lines=((1, Decimal("9.50")),))))
        for i in range(start, start + n)
    ]


def spool_empty(spool: Path) -> bool:
    """Nothing left to settle: inbound/ and every claim folder in processing/ are empty."""
    inbound = list((spool / "inbound").iterdir()) if (spool / "inbound").exists() else []
    processing = spool / "processing"
    claimed = [f for d in processing.iterdir() if d.is_dir() for f in d.iterdir()] if processing.exists() else []
    return not inbound and not claimed


COUNTS = (
    "SELECT (SELECT count(*) FROM edinbox_hub_invoices), (SELECT count(DISTINCT number) FROM edinbox_hub_invoices),"
    " (SELECT count(*) FROM inbox WHERE status = 'processed')"
)


def first_row(url: str, statement: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """Run one statement on a PostgreSQL or MariaDB server (autocommit); its first row, if any."""
    if url.startswith(("mysql://", "mariadb://")):
        import pymysql

        from edinbox.stores._mysql_sql import connect_options

        options = {k: v for k, v in connect_options(url).items() if k != "client_flag"}
        connection = pymysql.connect(**options | {"autocommit": True})
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement, params)
                return cursor.fetchone() if cursor.description else None
        finally:
            connection.close()
    with psycopg.connect(url, autocommit=True) as pg:
        found = pg.execute(statement.encode(), params)
        return found.fetchone() if found.description else None


def counts(url: str) -> tuple[int, int, int]:
    """(invoices, distinct invoice numbers, processed journal rows) in the private server."""
    row = first_row(url, COUNTS)
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def down_for(line: str) -> float:
    """The outage length the hub logged in its dependency-back line."""
    match = re.search(r"down_for_s=([0-9.]+)", line)
    assert match, line
    return float(match[1])


@pytest.fixture
def database(private_database: PrivateDatabase) -> PrivateDatabase:
    """A fresh database on the module's private PostgreSQL or MariaDB server, initialised for the hub."""
    asyncio.run(init(HubConfig(db=private_database.url)))
    return private_database


def test_the_hub_waits_out_a_database_restart(database: PrivateDatabase, spool: Path) -> None:
    """The database stopped mid-run and restarted: the hub stays up, logs the outage twice, creates each invoice
    once (PostgreSQL and MariaDB)."""
    source = f"dir://{spool}"
    url = database.url.replace("mysql://", "mariadb://", 1)  # the scheme MariaDB users write
    asyncio.run(publish(source, invoices(150)))
    port = free_port()
    hub = HubProcess("--db", url, "--source", source, "--batch-size", "2", "--metrics-port", str(port))
    wait_for(lambda: len(hub.events("settled")) >= 20, timeout=60, what="the first settled batches")
    database.stop()
    stopped = time.monotonic()
    asyncio.run(publish(source, invoices(50, start=150)))  # traffic keeps coming while the database is down
    wait_for(lambda: bool(hub.events("dependency-down")), timeout=30, what="the dependency-down line")
    time.sleep(3)
    database.start()
    outage = time.monotonic() - stopped
    wait_for(lambda: spool_empty(spool), timeout=60, what="the hub to catch up")
    assert hub.proc.poll() is None  # it never exited on its own
    reconnects = {s.labels["dependency"]: s.value for s in scrape(port)["edinbox_source_reconnects"]}
    assert hub.stop() == 0
    assert counts(url) == (200, 200, 200)
    assert reconnects == {"database": 1.0}  # the outage, counted once when it ended
    [down] = hub.events("dependency-down")
    [back] = hub.events("dependency-back")
    assert "dependency=database" in down
    assert "dependency=database" in back
    # the recovery is noticed within one backoff pause (its cap plus jitter) of the server being back
    assert down_for(back) <= outage + WAIT_MAX + WAIT_JITTER + 1
    assert all(len(line) < 1000 for line in hub.lines)  # no traceback, no 15 KB error line
    assert not [line for line in hub.lines if "Traceback" in line or " level=error " in line]


def test_a_hub_started_while_the_database_is_down_waits_for_it(database: PrivateDatabase, spool: Path) -> None:
    """A hub started during an outage does not exit: it waits, then settles everything once the server is up
    (PostgreSQL and MariaDB)."""
    source = f"dir://{spool}"
    url = database.url.replace("mysql://", "mariadb://", 1)
    asyncio.run(publish(source, invoices(40)))
    database.stop()
    hub = HubProcess("--db", url, "--source", source)
    wait_for(lambda: bool(hub.events("dependency-down")), timeout=30, what="the dependency-down line")
    time.sleep(2)
    assert hub.proc.poll() is None
    database.start()
    wait_for(lambda: spool_empty(spool), timeout=60, what="the hub to settle the waiting traffic")
    assert hub.stop() == 0
    assert counts(url) == (40, 40, 40)
    assert len(hub.events("dependency-down")) == 1
    assert len(hub.events("dependency-back")) == 1


def test_give_up_after_exits_2_in_one_line(spool: Path) -> None:
    """With --give-up-after, a database that stays down ends the hub with exit status 2 and one error line."""
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    hub = HubProcess("--db", nowhere, "--source", f"dir://{spool}", "--give-up-after", "2s")
    code = hub.ended()
    assert code == 2
    errors = [line for line in hub.lines if line.startswith("Error:")]
    assert len(errors) == 1
    assert "gave up after 2s" in errors[0]
    assert len(hub.events("dependency-down")) == 1


def test_sigterm_while_waiting_for_the_database_exits_0(spool: Path) -> None:
    """A hub waiting out an outage stops at once on SIGTERM: nothing is in hand, nothing is lost."""
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    hub = HubProcess("--db", nowhere, "--source", f"dir://{spool}")
    wait_for(lambda: bool(hub.events("dependency-down")), timeout=30, what="the dependency-down line")
    assert hub.stop() == 0


def test_the_hub_waits_out_an_accounting_api_outage(spool: Path, tmp_path: Path) -> None:
    """The HTTP accounting API down at first: the hub logs it once, waits, then creates each invoice exactly once."""
    from edinbox.hub.demo.accounting_service import AccountingService

    db = f"sqlite:///{tmp_path / 'hub.db'}"
    asyncio.run(init(HubConfig(db=db)))
    source = f"dir://{spool}"
    asyncio.run(publish(source, invoices(12)))
    port = free_port()
    api = f"http://127.0.0.1:{port}/invoices"
    hub = HubProcess("--db", db, "--source", source, "--accounting", api, "--lease", "30s")
    wait_for(lambda: bool(hub.events("dependency-down")), timeout=30, what="the dependency-down line")
    time.sleep(1)
    with AccountingService(tmp_path / "accounting.db", port=port) as service:
        wait_for(lambda: spool_empty(spool), timeout=60, what="the hub to catch up")
        assert hub.proc.poll() is None
        assert hub.stop() == 0
        created = service.invoices()
    assert sorted(i["number"] for i in created) == sorted(f"OUT-{i}" for i in range(12))
    downs, backs = hub.events("dependency-down"), hub.events("dependency-back")
    assert len(downs) == len(backs) == 1, "\n".join(hub.lines)
    [down], [back] = downs, backs
    assert "dependency=accounting" in down
    assert "dependency=accounting" in back
    import sqlite3

    with sqlite3.connect(tmp_path / "hub.db") as conn:
        rows = conn.execute("SELECT status, attempts, count(*) FROM inbox GROUP BY status, attempts").fetchall()
    assert rows == [("processed", 1, 12)]  # the outage cost no attempt


async def test_the_pool_hands_out_working_connections_after_a_restart() -> None:
    """After a PostgreSQL restart the pool replaces its broken connections before handing them out: of overlapping
    calls only the one on the store's own connection (found broken on use) fails, and the next ones all work."""
    from edinbox import AsyncInbox, StoreError

    with PrivatePostgres() as server:
        async with AsyncInbox(server.url, consumer="c") as inbox:
            await inbox.create_schema()
            before = await asyncio.gather(*[inbox.stats() for _ in range(4)], return_exceptions=True)
            assert not [r for r in before if isinstance(r, BaseException)]
            server.stop()
            server.start()
            after = await asyncio.gather(*[inbox.stats() for _ in range(4)], return_exceptions=True)
            failed = [r for r in after if isinstance(r, BaseException)]
            assert len(failed) <= 1
            assert all(isinstance(r, StoreError) for r in failed)
            again = await asyncio.gather(*[inbox.stats() for _ in range(4)], return_exceptions=True)
            assert not [r for r in again if isinstance(r, BaseException)]


def test_the_hub_waits_out_a_broker_restart(tmp_path: Path) -> None:
    """Redis (a private server) stopped and restarted under a running hub: the source's outage is two log lines,
    the hub stays up, and every interchange published before and after is created once."""
    from edinbox.sources import publisher
    from servers import PrivateServer

    db = f"sqlite:///{tmp_path / 'hub.db'}"
    asyncio.run(init(HubConfig(db=db)))
    (tmp_path / "redis").mkdir()
    redis = PrivateServer("redis", tmp_path / "redis")
    redis.start()
    try:
        url = f"redis://127.0.0.1:{redis.port}/0?stream=edi&group=hub"
        send = publisher(url)
        asyncio.run(send(url, invoices(20)))
        hub = HubProcess("--db", db, "--source", url)
        wait_for(lambda: len(hub.events("settled")) == 20, timeout=60, what="the first wave")
        redis.kill()
        wait_for(lambda: bool(hub.events("dependency-down")), timeout=30, what="the dependency-down line")
        time.sleep(2)
        redis.start()
        asyncio.run(send(url, invoices(20, start=20)))
        wait_for(lambda: len(hub.events("settled")) == 40, timeout=60, what="the second wave")
        assert hub.proc.poll() is None
        assert hub.stop() == 0
    finally:
        redis.kill()
    [down] = hub.events("dependency-down")
    [back] = hub.events("dependency-back")
    assert "dependency=source" in down
    assert "dependency=source" in back
    import sqlite3

    with sqlite3.connect(tmp_path / "hub.db") as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices").fetchone() == (40, 40)


def test_the_hub_waits_out_a_rabbitmq_restart(
    tmp_path: Path, private_rabbitmq: PrivateRabbitMQ, unique_name: str
) -> None:
    """RabbitMQ (a private node) stopped while the hub holds a prefetched batch, then started again: the hub stays
    up, logs the source's outage once down and once back, and creates every invoice published before and after
    exactly once (the deliveries in hand at the stop are redelivered; those already committed are duplicates)."""
    from edinbox.sources import publisher

    db = f"sqlite:///{tmp_path / 'hub.db'}"
    asyncio.run(init(HubConfig(db=db)))
    rabbit = private_rabbitmq
    url = f"{rabbit.url}?queue={unique_name}&prefetch=50"
    send = publisher(url)
    asyncio.run(send(url, invoices(100)))
    hub = HubProcess("--db", db, "--source", url, "--batch-size", "5")
    try:
        wait_for(lambda: len(hub.events("settled")) >= 20, timeout=120, what="the first batches")
        rabbit.stop()
        wait_for(lambda: bool(hub.events("dependency-down")), timeout=60, what="the dependency-down line")
        assert hub.proc.poll() is None
        rabbit.start()
        asyncio.run(send(url, invoices(50, start=100)))
        wait_for(lambda: invoice_count(tmp_path / "hub.db") >= 150, timeout=120, what="every invoice")
        wait_for(lambda: bool(hub.events("dependency-back")), timeout=60, what="the dependency-back line")
        assert hub.proc.poll() is None
    finally:
        code = hub.stop()
    assert code == 0
    [down] = hub.events("dependency-down")
    [back] = hub.events("dependency-back")
    assert "dependency=source" in down
    assert "dependency=source" in back
    assert not [line for line in hub.lines if "Traceback" in line], "\n".join(hub.lines)
    # aio-pika logs three lines per reconnect attempt (one a second); each is let through once a minute
    drivers = [line for line in hub.lines if " logger=edinbox." not in line]
    assert len(drivers) < 20, "\n".join(drivers)
    import sqlite3

    with sqlite3.connect(tmp_path / "hub.db") as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT number) FROM edinbox_hub_invoices").fetchone() == (
            150,
            150,
        )
        rows = conn.execute("SELECT status, attempts, count(*) FROM inbox GROUP BY status, attempts").fetchall()
    assert rows == [("processed", 1, 150)]  # the outage cost no attempt


def invoice_count(db: Path) -> int:
    """Invoices in the hub's SQLite database."""
    import sqlite3

    with sqlite3.connect(db, timeout=30) as conn:
        return int(conn.execute("SELECT count(*) FROM edinbox_hub_invoices").fetchone()[0])


def test_a_step_that_reached_nothing_does_not_end_an_outage(caplog: pytest.LogCaptureFixture) -> None:
    """While the database is down, a step that received nothing (the batch not yet redelivered) logs no `back`:
    the outage is one `down` line and one `back` line, the latter only once a step settled deliveries again."""
    from edinbox import StoreError
    from edinbox.loop import reached as _reached
    from edinbox.loop._outage import Outage

    logger = logging.getLogger("edinbox.test.outage")
    caplog.set_level(logging.WARNING, logger=logger.name)
    outage = Outage(logger, give_up_after=None)
    script: list[int | None] = [None, 0, None, 0, 3]  # None: the database fails; n: a step that settled n

    async def step() -> int:
        handled = script.pop(0)
        if handled is None:
            raise StoreError("connection refused")
        return handled

    async def run() -> None:
        while script:
            await outage.call(step, proves=_reached)

    asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records if r.name == logger.name]
    assert [line.split()[0] for line in lines] == ["dependency-down", "dependency-back"]
    assert "dependency=database" in lines[1]


def test_steps_that_reached_nothing_do_not_restart_the_give_up_clock() -> None:
    """give_up_after 1 s and a database that stays down: the steps that received nothing between the failing ones (the
    batch held back by its nack delay) do not start the wait over, so the hub gives up about a second into the
    outage instead of never."""
    from datetime import timedelta

    from edinbox import StoreError
    from edinbox.loop import reached as _reached
    from edinbox.loop._outage import Outage

    outage = Outage(logging.getLogger("edinbox.test.outage"), give_up_after=timedelta(seconds=1))
    steps = 0

    async def step() -> int:
        nonlocal steps
        steps += 1
        if steps % 2:
            raise StoreError("connection refused")
        return 0  # nothing received: the database was not reached

    async def run(began: float) -> None:
        while time.monotonic() - began < 10:
            await outage.call(step, proves=_reached)

    began = time.monotonic()
    with pytest.raises(StoreError):
        asyncio.run(run(began))
    assert time.monotonic() - began < 5


async def stop_during(step: Any, *, when: asyncio.Event, grace: float = 3.0) -> tuple[object, float]:
    """Run `step` through an Outage with a stop event set as soon as `when` is: what the call returned (or the
    Stopped it raised) and how long after the stop it ended."""
    from edinbox.loop import reached as _reached
    from edinbox.loop._outage import Outage, Stopped

    outage = Outage(logging.getLogger("edinbox.test.outage"), give_up_after=None, stop_grace=grace)
    stop = asyncio.Event()
    call = asyncio.ensure_future(outage.call(step, stop=stop, proves=_reached))
    await when.wait()
    stop.set()
    stopped = time.monotonic()
    try:
        result: object = await call
    except Stopped as exc:
        result = exc
    return result, time.monotonic() - stopped


def test_a_stop_lets_the_step_that_reaches_the_returning_database_finish() -> None:
    """SIGTERM while the database is down but a step is running (it may be the one reaching the database as it
    returns): the step finishes within the grace and its result is returned (its batch commits and is acked), rather
    than being cancelled, rolled back and redelivered."""
    from edinbox import StoreError

    attempts: list[int] = []
    reaching, settled = asyncio.Event(), asyncio.Event()

    async def step() -> int:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise StoreError("connection refused")
        reaching.set()  # the second attempt reaches the database, which is back
        await asyncio.sleep(0.3)
        settled.set()
        return 4

    result, after = asyncio.run(stop_during(step, when=reaching))
    assert result == 4
    assert settled.is_set()
    assert after < 3.0


def test_a_stop_between_attempts_or_after_the_grace_ends_the_wait() -> None:
    """SIGTERM during the pause between two failed attempts stops at once (nothing is in hand); an attempt that hangs
    past the grace is cancelled: Stopped either way."""
    from edinbox import StoreError
    from edinbox.loop._outage import Stopped

    failed = asyncio.Event()

    async def failing() -> int:
        failed.set()
        raise StoreError("connection refused")

    result, after = asyncio.run(stop_during(failing, when=failed))
    assert isinstance(result, Stopped)
    assert after < 1.0
    calls: list[int] = []
    hanging = asyncio.Event()

    async def hangs() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise StoreError("connection refused")
        hanging.set()
        await asyncio.sleep(3600)
        return 1

    result, after = asyncio.run(stop_during(hangs, when=hanging, grace=0.3))
    assert isinstance(result, Stopped)
    assert 0.3 <= after < 2.0
