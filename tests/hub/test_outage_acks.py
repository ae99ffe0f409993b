"""Acknowledgments through a database restart: `edinbox run` with a partner agreement (its relay in a child process)
against a private PostgreSQL stopped and started mid-run. Both the hub and its relay child wait the outage out."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from edinbox.hub.config._model import HubConfig
from edinbox.hub.demo._traffic import PARTNERS
from edinbox.sources.spool import publish
from hub_ops import init
from servers import PrivatePostgres

from .test_outage import HubProcess, counts, first_row, invoices, spool_empty, wait_for

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="private database servers are started on Linux")


def arrived(out: Path) -> list[str]:
    """The producer ids (outbox keys) of every file in the partners' outbound spools, one entry per file."""
    found: list[str] = []
    for partner in PARTNERS:
        folder = out / partner.id / "inbound"
        if folder.is_dir():
            found += [unquote(name.split("~", 1)[1].removesuffix(".edi").split("#")[0]) for name in os.listdir(folder)]
    return found


@contextlib.contextmanager
def acknowledging(spool: Path, tmp_path: Path, traffic: int) -> Iterator[tuple[PrivatePostgres, list[str]]]:
    """A private PostgreSQL with the hub's schema, `traffic` invoices waiting in `spool`, and the arguments of
    `edinbox run` acknowledging every partner into `tmp_path / "out"`."""
    (tmp_path / "hub.toml").write_text(f'[partners."*"]\noutbound = "dir://{tmp_path}/out/{{id}}"\n', encoding="utf-8")
    with PrivatePostgres() as database:
        asyncio.run(init(HubConfig(db=database.url)))
        asyncio.run(publish(f"dir://{spool}", invoices(traffic)))
        yield database, ["--config", str(tmp_path / "hub.toml"), "--db", database.url, "--source", f"dir://{spool}"]


def outbox(url: str) -> tuple[int, int]:
    """(outbox rows, rows marked sent)."""
    row = first_row(url, "SELECT count(*), count(sent_at) FROM inbox_outbox")
    assert row is not None
    return int(row[0]), int(row[1])


def test_the_hub_and_its_relay_child_wait_out_a_database_restart(spool: Path, tmp_path: Path) -> None:
    """PostgreSQL stopped mid-run for 3 s, then started: the hub and its relay child stay up (no `relay-exited`),
    each invoice is created once, and every acknowledgment is marked sent and reaches its partner under its key; a
    key sent twice (sent, not yet marked, as the database went away) is the one copy the partner's inbox drops."""
    out, source = tmp_path / "out", f"dir://{spool}"
    with acknowledging(spool, tmp_path, 120) as (database, args):
        url = database.url
        hub = HubProcess(*args, "--batch-size", "2")
        try:
            wait_for(lambda: outbox(url)[1] >= 10, timeout=60, what="the first acknowledgments sent")
            database.stop()
            asyncio.run(publish(source, invoices(40, start=120)))  # traffic keeps coming while the database is down
            wait_for(lambda: bool(hub.events("dependency-down")), timeout=30, what="the dependency-down line")
            wait_for(lambda: bool(hub.events("relay-down")), timeout=30, what="the relay's down line")
            time.sleep(2)  # several retries of each, the backoff growing
            database.start()
            wait_for(lambda: spool_empty(spool), timeout=90, what="the hub to catch up")
            wait_for(lambda: outbox(url)[0] == outbox(url)[1], timeout=60, what="every acknowledgment sent")
            assert hub.proc.poll() is None  # it never exited on its own
            assert hub.stop() == 0
        finally:
            if hub.proc.poll() is None:
                hub.proc.kill()
        assert counts(url) == (160, 160, 160)
        total, sent = outbox(url)
        keys = {str(k) for (k,) in _rows(url, "SELECT key FROM inbox_outbox")}
    assert total == sent >= 160
    assert set(arrived(out)) == keys  # nothing lost; a key may arrive twice, never a key that was not committed
    assert not hub.events("relay-exited"), "\n".join(hub.lines)
    assert not [line for line in hub.lines if "Traceback" in line or " level=error " in line], "\n".join(hub.lines)


def _rows(url: str, statement: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        return pg.execute(statement.encode()).fetchall()


def test_a_hub_and_relay_child_started_while_the_database_is_down_wait_for_it(spool: Path, tmp_path: Path) -> None:
    """`edinbox run` with acknowledgments started during an outage: neither the hub nor its relay child exits or
    restarts (no `relay-exited`); once the server is up each invoice is created once and acknowledged."""
    out = tmp_path / "out"
    with acknowledging(spool, tmp_path, 30) as (database, args):
        url = database.url
        database.stop()
        hub = HubProcess(*args)
        try:
            wait_for(lambda: bool(hub.events("dependency-down")), timeout=30, what="the dependency-down line")
            time.sleep(2)  # the relay child is up and meets the outage too
            assert hub.proc.poll() is None
            database.start()
            wait_for(lambda: spool_empty(spool), timeout=60, what="the hub to settle the waiting traffic")
            wait_for(lambda: outbox(url)[0] >= 30 and outbox(url)[0] == outbox(url)[1], timeout=60, what="every ack")
            assert hub.stop() == 0
        finally:
            if hub.proc.poll() is None:
                hub.proc.kill()
        assert counts(url) == (30, 30, 30)
        keys = {str(k) for (k,) in _rows(url, "SELECT key FROM inbox_outbox")}
    assert set(arrived(out)) == keys
    assert not hub.events("relay-exited"), "\n".join(hub.lines)
    assert not [line for line in hub.lines if "Traceback" in line or " level=error " in line], "\n".join(hub.lines)
