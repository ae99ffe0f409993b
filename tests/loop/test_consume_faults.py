"""`edinbox.consume` as a library user runs it, in a process of its own: every effect once through duplicates and
SIGKILLs, a database restart under it, and a prompt stop on SIGTERM whatever it is doing."""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from edinbox import Inbox
from edinbox.sources.rabbitmq import publish as amqp_publish
from edinbox.sources.spool import publish as spool_publish
from servers import PrivatePostgres
from services import require_service
from sources.test_rabbitmq import drop

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"
APP = Path(__file__).with_name("consumer_app.py")
STOP_WITHIN = 3.0
"""Seconds a consumer may take to exit after SIGTERM (a couple, with a loaded machine's margin)."""


def prepare(db: str, table: str) -> None:
    """The journal (as `create_schema()` makes it) and the business table beside it, with no unique key of its own."""
    with Inbox(db, consumer="app", table=table) as inbox:
        inbox.create_schema()
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (message_id text NOT NULL)").format(sql.Identifier(f"{table}_effects")))


def effects(db: str, table: str) -> tuple[int, int]:
    """Rows in the business table, and how many distinct messages they are for."""
    query = sql.SQL("SELECT count(*), count(DISTINCT message_id) FROM {}").format(sql.Identifier(f"{table}_effects"))
    with psycopg.connect(db, autocommit=True, connect_timeout=2) as conn:
        rows, distinct = conn.execute(query).fetchone() or (0, 0)
    return int(rows), int(distinct)


def start(source: str, db: str, table: str, *, pause: float = 0.0) -> subprocess.Popen[str]:
    """Start the consumer process and wait for its `started` line (its imports done)."""
    proc = subprocess.Popen(
        [sys.executable, str(APP), source, db, table, str(pause)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    return proc


def stopped_within(proc: subprocess.Popen[str]) -> float:
    """SIGTERM the consumer and return how long it took to exit; it must exit cleanly (status 0)."""
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the consumer did not stop on SIGTERM: {err[-2000:]}")
    took = time.monotonic() - began
    assert proc.returncode == 0, err[-2000:]
    assert "stopped" in out
    return took


def wait_for(condition: object, *, timeout: float, what: str) -> None:
    """Poll `condition()` until it is true, failing with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def with_duplicates(count: int, *, share: float = 0.2) -> list[tuple[str, bytes]]:
    """`count` messages and `share` of them published a second time, shuffled."""
    ids = [f"order-{i}" for i in range(count)]
    copies = ids + random.sample(ids, int(count * share))
    random.shuffle(copies)
    return [(i, f"payload of {i}".encode()) for i in copies]


@pytest.fixture
def queue(unique_name: str) -> Iterator[str]:
    """A fresh RabbitMQ queue on the shared broker, deleted afterwards."""
    require_service("rabbitmq")
    yield f"{RABBITMQ}?queue={unique_name}"
    asyncio.run(drop(unique_name))


def test_every_effect_once_through_duplicates_and_sigkills(postgres_url: str, unique_name: str, queue: str) -> None:
    """300 messages on RabbitMQ, 20 % of them published twice, consumed by processes SIGKILLed one after another
    while they work (each once it has added a few dozen effects, at a random moment after): each message's effect
    is in the business table exactly once, and the last consumer stops cleanly on SIGTERM."""
    require_service("postgres")
    prepare(postgres_url, unique_name)
    asyncio.run(amqp_publish(queue, with_duplicates(300)))
    kills = 0
    while kills < 3:
        proc = start(queue, postgres_url, unique_name, pause=0.005)
        wanted = effects(postgres_url, unique_name)[1] + 30
        wait_for(lambda n=wanted: effects(postgres_url, unique_name)[1] >= n, timeout=30, what="a few dozen effects")
        time.sleep(random.uniform(0.0, 0.3))
        proc.kill()
        proc.communicate()
        kills += 1
    assert effects(postgres_url, unique_name)[1] < 300, "the kills came too late to cut into the work"
    last = start(queue, postgres_url, unique_name)
    wait_for(lambda: effects(postgres_url, unique_name)[1] == 300, timeout=30, what="every message's effect")
    time.sleep(1.0)  # the redeliveries of what the kills left unacked: duplicates now
    assert stopped_within(last) < STOP_WITHIN
    assert effects(postgres_url, unique_name) == (300, 300)


def test_a_database_restart_under_the_consumer_loses_nothing(unique_name: str, queue: str) -> None:
    """A private PostgreSQL stopped for three seconds under a busy consumer: it does not exit, it picks up where it
    was once the database is back, and every effect is there once; stopped again with messages waiting, SIGTERM
    ends the consumer within a couple of seconds, and a new one finishes the work."""
    with PrivatePostgres() as pg:
        prepare(pg.url, unique_name)
        asyncio.run(amqp_publish(queue, with_duplicates(150)))
        proc = start(queue, pg.url, unique_name, pause=0.01)
        try:
            wait_for(lambda: effects(pg.url, unique_name)[1] >= 20, timeout=20, what="the first effects")
            pg.stop()
            time.sleep(3.0)
            assert proc.poll() is None, "the consumer exited during the outage"
            pg.start()
            wait_for(lambda: effects(pg.url, unique_name)[1] == 150, timeout=30, what="every effect after the restart")
            pg.stop()
            asyncio.run(amqp_publish(queue, [(f"late-{i}", b"late") for i in range(20)]))
            time.sleep(1.5)  # the consumer meets the outage with these in hand
            assert proc.poll() is None
            assert stopped_within(proc) < STOP_WITHIN
        finally:
            if proc.poll() is None:
                proc.kill()
        pg.start()
        again = start(queue, pg.url, unique_name)
        wait_for(lambda: effects(pg.url, unique_name)[1] == 170, timeout=20, what="the late messages' effects")
        stopped_within(again)
        assert effects(pg.url, unique_name) == (170, 170)


def test_sigterm_stops_an_idle_consumer_and_one_mid_batch(postgres_url: str, unique_name: str, tmp_path: Path) -> None:
    """SIGTERM stops a consumer waiting on an empty spool within a couple of seconds; one mid-batch finishes the
    batch in hand (its effects committed, nothing redone) and stops as promptly."""
    require_service("postgres")
    prepare(postgres_url, unique_name)
    source = f"dir://{tmp_path}"
    idle = start(source, postgres_url, unique_name)
    time.sleep(1.0)
    assert stopped_within(idle) < STOP_WITHIN
    asyncio.run(spool_publish(source, [(f"slow-{i}", b"slow") for i in range(4)]))
    busy = start(source, postgres_url, unique_name, pause=0.4)
    time.sleep(0.8)  # in the handler of the batch of four (1.6 s)
    assert effects(postgres_url, unique_name)[0] == 0
    assert stopped_within(busy) < STOP_WITHIN
    assert effects(postgres_url, unique_name) == (4, 4)
