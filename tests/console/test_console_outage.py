"""The console with its database down (a private PostgreSQL or MariaDB, stopped and started again): pages answer 503
with one masked line and recover by themselves, and a console started during an outage waits for the database
instead of exiting."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from console.conftest import free_port, run
from edinbox.hub import HubConfig
from hub_ops import init
from servers import PrivateDatabase, PrivateMariaDB

SECRET = "s3cret-pw"
"""A password that must never be shown (trust authentication ignores it)."""


PAGES = {"/": 200, "/dashboard": 200, "/parked/dead": 200, "/audit": 200, "/message?key=X12:ZZ:A>ZZ:B/000000001": 404}
"""One page of each kind and what it answers with the database up (the message page's key does not exist)."""


@pytest.fixture
def private_db(private_database: PrivateDatabase) -> PrivateDatabase:
    """A fresh database on the module's private PostgreSQL or MariaDB, whose server the test stops and starts."""
    return private_database


def _config(db: PrivateDatabase, tmp_path: Path) -> HubConfig:
    if isinstance(db.server, PrivateMariaDB):  # MariaDB checks passwords: a user that has this one
        import pymysql

        connection = pymysql.connect(host="127.0.0.1", port=db.port, user="root", autocommit=True)
        try:
            with connection.cursor() as cursor:
                cursor.execute("CREATE USER IF NOT EXISTS 'hub'@'%%' IDENTIFIED BY %s", (SECRET,))
                cursor.execute("GRANT ALL ON *.* TO 'hub'@'%'")
        finally:
            connection.close()
        url = db.url.replace("root@", f"hub:{SECRET}@")
    else:
        url = db.url.replace("postgres@", f"postgres:{SECRET}@")
    spool = tmp_path / "spool"
    spool.mkdir(exist_ok=True)
    return HubConfig(db=url, source=f"dir://{spool}", give_up_after=None)


def _wait_for(url: str, status: int, *, timeout: float = 40) -> httpx.Response:
    deadline = time.monotonic() + timeout
    last: httpx.Response | None = None
    while time.monotonic() < deadline:
        try:
            last = httpx.get(url, timeout=5)
            if last.status_code == status:
                return last
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} never answered {status} (last: {last.status_code if last else 'no answer'})")


def test_pages_answer_503_while_the_database_is_down_and_recover(private_db: PrivateDatabase, tmp_path: Path) -> None:
    """With the database stopped, every page is a 503 saying the database is unreachable (no password, user, host or
    port; a Retry-After); once it is back, the same pages answer 200 without restarting the console."""
    import uvicorn

    from edinbox.console import create_app

    config = _config(private_db, tmp_path)
    run(init(config))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(f"{base}/", 200)
        private_db.stop()
        for path in PAGES:
            response = httpx.get(f"{base}{path}", timeout=30)
            assert response.status_code == 503, (path, response.status_code)
            assert response.headers["Retry-After"] == "5"
            assert "unavailable, try again shortly: the database is unreachable" in response.text
            assert SECRET not in response.text
            assert "127.0.0.1" not in response.text  # neither the database's host nor its port nor its user
            assert str(private_db.port) not in response.text
            assert "hub@" not in response.text
            assert "postgres@" not in response.text
        private_db.start()
        for path, status in PAGES.items():
            _wait_for(f"{base}{path}", status)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_console_started_during_an_outage_waits_then_serves(private_db: PrivateDatabase, tmp_path: Path) -> None:
    """`edinbox console` started with its database down logs the outage once and keeps waiting (no exit); when
    the database is back it logs the end of the outage and serves pages."""
    config = _config(private_db, tmp_path)
    run(init(config))
    private_db.stop()
    port = free_port()
    env = {**os.environ, "EDINBOX_DB": config.db, "EDINBOX_SOURCE": config.source}
    command = [sys.executable, "-m", "edinbox", "console", "--port", str(port)]
    log = tmp_path / "console.log"
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60  # the console may take seconds to start on a loaded machine
        while "dependency-down" not in log.read_text():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the console never logged the outage"
            time.sleep(0.2)
        time.sleep(2)  # a few retries with the database still down
        assert process.poll() is None, log.read_text()
        private_db.start()
        _wait_for(f"http://127.0.0.1:{port}/", 200)
    finally:
        process.terminate()
        process.wait(timeout=20)
    logged = log.read_text()
    assert logged.count("dependency-down") == 1, logged
    assert logged.count("dependency-back") == 1, logged
    assert SECRET not in logged
