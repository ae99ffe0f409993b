"""The hub's MariaDB connections killed under it (`KILL CONNECTION` from another session, the server running on).

`edinbox run --db mysql://root@127.0.0.1:3306/<db>` settles a spool's traffic while another session kills every
connection of that database, again and again: mid-batch, at the commit, while idle. Each kill is a transient
failure: the hub never exits, nothing is charged, and every invoice is created exactly once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from edinbox.hub.config._model import HubConfig
from edinbox.sources.spool import publish
from hub.test_outage import HubProcess, counts, first_row, invoices, spool_empty, wait_for
from hub_ops import init
from services import drop_database, mariadb_admin, require_service


@pytest.fixture
def database(unique_name: str) -> Iterator[str]:
    """A fresh database on the shared MariaDB, initialised for the hub; its URL. Dropped afterwards."""
    require_service("mariadb")
    mariadb_admin(f"CREATE DATABASE `{unique_name}`")
    url = f"mysql://root@127.0.0.1:3306/{unique_name}"
    asyncio.run(init(HubConfig(db=url)))
    yield url
    drop_database(unique_name)


def kill_connections(name: str, *, until: threading.Event, every: float) -> int:
    """Kill every connection using database `name` (not this session's), each `every` seconds until `until` is set;
    return how many were killed."""
    killed = 0
    connection = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)
    try:
        with connection.cursor() as cursor:
            while not until.wait(every):
                cursor.execute(
                    "SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()", (name,)
                )
                for (number,) in cursor.fetchall():
                    try:
                        cursor.execute(f"KILL CONNECTION {int(number)}")
                        killed += 1
                    except pymysql.MySQLError:  # it closed meanwhile
                        continue
    finally:
        connection.close()
    return killed


def test_the_hub_waits_out_its_connections_killed_mid_run(database: str, spool: Path) -> None:
    """Every connection of the hub killed each 0.2 s for 3 s while traffic keeps coming and it settles 2-delivery
    batches: the hub stays up, logs the database's outages, and creates each of the 400 invoices once, each journal
    row at attempt 1."""
    name = database.rsplit("/", 1)[1]
    source = f"dir://{spool}"
    asyncio.run(publish(source, invoices(100)))
    hub = HubProcess("--db", database, "--source", source, "--batch-size", "2")
    try:
        wait_for(lambda: len(hub.events("settled")) >= 10, timeout=60, what="the first settled batches")
        stop = threading.Event()
        killed: list[int] = []
        killer = threading.Thread(target=lambda: killed.append(kill_connections(name, until=stop, every=0.2)))
        killer.start()
        for wave in range(15):  # traffic keeps coming while the connections are killed
            asyncio.run(publish(source, invoices(20, start=100 + 20 * wave)))
            time.sleep(0.2)
        stop.set()
        killer.join()
        assert killed[0] >= 3  # the chaos happened (the hub backs off after each kill: fewer to kill under load)
        wait_for(lambda: spool_empty(spool), timeout=60, what="the hub to catch up")
        assert hub.proc.poll() is None  # it never exited on its own
    finally:
        code = hub.stop()
    assert code == 0
    assert hub.events("dependency-down"), "\n".join(hub.lines)
    assert counts(database) == (400, 400, 400)
    assert first_row(database, "SELECT count(*) FROM inbox WHERE attempts <> 1") == (0,)
    assert not [line for line in hub.lines if "Traceback" in line or " level=error " in line], "\n".join(hub.lines)
