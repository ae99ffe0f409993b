"""The hub's log is machine-readable line by line: `edinbox run --log-format json` writes one JSON object per line,
`--log-format text` one logfmt line, for every line it writes (start, settled, purge, stop, and other loggers'
records), so a log shipper parses a hub's log without a pattern of its own."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import logfmt
from edinbox.hub.demo._traffic import PARTNERS, Doc, render
from edinbox.sources.spool import publish

PARSERS: dict[str, Callable[[str], dict[str, Any]]] = {"json": json.loads, "text": logfmt.parse}


def _edinbox(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in a subprocess, as an operator runs it."""
    command = [sys.executable, "-m", "edinbox.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def spool(tmp_path: Path) -> list[str]:
    """A SQLite hub's arguments, its spool holding two invoices, one conflicting reuse of a control number and one
    file that is not EDI (with a line break and an escape in it)."""
    db, source = f"sqlite:///{tmp_path / 'hub.db'}", f"dir://{tmp_path / 'spool'}"
    assert _edinbox("init", "--db", db, "--source", source).returncode == 0

    def doc(control: str, amount: str) -> bytes:
        return render(Doc(PARTNERS[0], control, "invoice", f"N-{control}", lines=((1, Decimal(amount)),)))

    files = [("a", doc("000000001", "10.00")), ("b", doc("000000002", "10.00")), ("c", doc("000000002", "99.00"))]
    asyncio.run(publish(source, [*files, ("junk", b"not EDI\n\x1b[2J at all")]))
    return ["--db", db, "--source", source]


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_every_line_of_a_run_parses(spool: list[str], log_format: str) -> None:
    """Every stdout and stderr line of `edinbox run --once` parses (`json.loads`, or a logfmt parser) to an object with
    time, level and logger: the start first, the four settled messages (processed, conflict, rejected), the purge,
    the stop last with the totals as fields."""
    done = _edinbox("run", *spool, "--once", "--idle-timeout", "0.2", "--log-format", log_format)
    assert done.returncode == 0, done.stderr
    lines = [*done.stdout.splitlines(), *done.stderr.splitlines()]
    parse = PARSERS[log_format]
    records = [parse(line) for line in lines]
    assert all({"time", "level", "logger"} <= set(record) for record in records), lines
    events = [record.get("event") for record in records]
    assert events[0] == "started"
    assert events[-1] == "stopped"
    outcomes = sorted(r["outcome"] for r in records if r.get("event") == "settled")
    assert outcomes == ["conflict", "processed", "processed", "rejected"]
    [stopped] = [r for r in records if r.get("event") == "stopped"]
    assert str(stopped["processed"]) == "2"


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_drivers_line_and_a_warning_are_one_parsed_line_each(log_format: str) -> None:
    """With the hub's logging configured, another library's record with an exception and a Python warning are each
    one line that parses, the exception's type and first line under `error`, the message under `message`."""
    script = f"""
import logging, warnings
from edinbox.hub.config._log import configure
configure(["amqp://guest:s3cret@mq/"], level=logging.INFO, json={log_format == "json"})
try:
    raise ConnectionResetError("reset by peer\\nsecond line")
except ConnectionResetError:
    logging.getLogger("edinbox.hub").exception("probe to amqp://guest:s3cret@mq/ failed")
logging.getLogger("aiormq.connection").warning("reader %s exited", "amqp://guest:s3cret@mq/")
warnings.warn("old\\nAPI", DeprecationWarning, stacklevel=1)
"""
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "s3cret" not in done.stderr
    records = [PARSERS[log_format](line) for line in done.stderr.splitlines()]
    assert [r["logger"] for r in records] == ["edinbox.hub", "aiormq.connection", "py.warnings"], done.stderr
    assert records[0]["error"] == "ConnectionResetError: reset by peer"
    assert records[0]["traceback"].startswith("Traceback")
    assert records[1]["message"] == "reader amqp://guest:***@mq/ exited"
    assert "DeprecationWarning: old" in records[2]["message"]


def test_the_example_of_the_logging_page_writes_json_lines() -> None:
    """docs/logging.md's example, run as written, makes the loop's events JSON lines in a program of one's own."""
    page = (Path(__file__).parents[2] / "docs" / "logging.md").read_text()
    [example] = re.findall(r"```python\n(.*?)```", page, re.S)
    event = (
        'from edinbox.loop import log_event\nlog_event(logging.getLogger("edinbox.loop"), 20, "settled", {"ms": 1.5})'
    )
    done = subprocess.run(
        [sys.executable, "-c", f"{example}\n{event}"], capture_output=True, text=True, timeout=60, check=True
    )
    [line] = done.stderr.splitlines()
    assert json.loads(line) | {"time": None} == {
        "time": None,
        "level": "info",
        "logger": "edinbox.loop",
        "event": "settled",
        "ms": 1.5,
    }


def test_a_run_that_fails_ends_on_a_json_line(tmp_path: Path) -> None:
    """In JSON, a run that stops on an error (here a database without the hub's schema) ends on an `exited` event with
    its exit status and the error, not on a bare `Error:` line."""
    sqlite3.connect(tmp_path / "empty.db").close()
    (tmp_path / "spool").mkdir()
    args = ["--db", f"sqlite:///{tmp_path / 'empty.db'}", "--source", f"dir://{tmp_path / 'spool'}"]
    done = _edinbox("run", *args, "--once", "--log-format", "json")
    assert done.returncode == 1
    records = [json.loads(line) for line in done.stderr.splitlines()]
    assert records[-1]["event"] == "exited"
    assert records[-1]["status"] == 1
    assert "edinbox init" in records[-1]["error"]
