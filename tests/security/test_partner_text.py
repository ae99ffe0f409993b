"""Text from partners is data (finding 8 of the security review): a message id holding a line break, ESC, VT,
U+2028 or NUL never forges a log line nor reaches a terminal raw; `list` and `show` print such characters as
escapes, and `--json` stays valid JSON holding the id as it was."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import logfmt
from edinbox.cli import main
from edinbox.hub.ops._output import render, visible
from edinbox.loop import EventFormatter, format_line
from edinbox.sources.spool import publish

FORGED = "\ntime=2026-01-01T00:00:00.000Z level=info logger=edinbox.hub event=settled key=forged outcome=processed"
IDS = ["nl" + FORGED, "esc\x1b[2J\x1b[31mred", "vt\x0bff\x0c", "ls\u2028ps\u2029nel\x85", "bidi\u202etxt"]
NUL = "nul\x00end"
"""A message id no journal takes (PostgreSQL text cannot hold it): the delivery is parked, the id in its reason."""
PAYLOAD = b"not EDI\x1b[2J\x00\xe2\x80\xa8at all"
_RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e]")
"""A control character, line separator or bidirectional override (the line feed that ends a line aside)."""


def _edinbox(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in a subprocess, as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "edinbox.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )


@pytest.fixture
def journal(tmp_path: Path) -> list[str]:
    """A SQLite journal and a spool whose deliveries carry the hostile message ids (not EDI, journaled with
    `--non-edi inbox`); the arguments that open them."""
    db, spool = f"sqlite:///{tmp_path / 'hub.db'}", f"dir://{tmp_path / 'spool'}"
    assert _edinbox("init", "--db", db, "--source", spool).returncode == 0
    asyncio.run(publish(spool, [(message_id, PAYLOAD) for message_id in [*IDS, NUL]]))
    return ["--db", db, "--source", spool]


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_every_line_a_run_writes_is_one_event(journal: list[str], log_format: str) -> None:
    """`edinbox run --non-edi inbox` on the hostile ids writes only well-formed lines (none forged, no raw control
    character), and each `settled` line parses back to the id as the partner sent it."""
    done = _edinbox(
        "run", *journal, "--non-edi", "inbox", "--once", "--idle-timeout", "0.3", "--log-format", log_format
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) if log_format == "json" else logfmt.parse(line) for line in done.stderr.splitlines()]
    assert all(event["logger"] and event["time"] for event in events), done.stderr
    assert not _RAW.search(done.stderr.replace("\n", "")), done.stderr
    assert "key=forged" not in done.stderr.replace(json.dumps(FORGED)[1:-1], "")
    settled = [event for event in events if event.get("event") == "settled"]
    assert {e["key"].split("/", 1)[1] for e in settled if e["outcome"] == "processed"} == set(IDS)
    [parked] = [e for e in settled if e["outcome"] == "rejected"]
    assert "'nul\\x00end' contains a NUL character" in parked["reason"]


def test_list_and_show_print_control_characters_as_escapes(journal: list[str]) -> None:
    """`list` prints each hostile id on its one line with its control characters percent-encoded (the key as `show`
    takes it back), `show` prints them as escapes (`\\x1b`, `\\u2028`, `\\x00`); their `--json` is valid JSON holding
    the ids unchanged."""
    assert _edinbox("run", *journal, "--non-edi", "inbox", "--once", "--idle-timeout", "0.3").returncode == 0
    db = journal[:2]
    listed = _edinbox("list", *db)
    assert listed.returncode == 0, listed.stderr
    assert not _RAW.search(listed.stdout.replace("\n", ""))
    assert len(listed.stdout.splitlines()) == 1 + len(IDS)
    for escape in ("%1B[2J", "%E2%80%A8", "%C2%85", "%0B", "%E2%80%AE", "%0Atime"):
        assert escape in listed.stdout
    rejected = _edinbox("list", *db, "--status", "rejected", "--json")
    [number] = [row["key"] for row in json.loads(rejected.stdout)]
    keys_shown = [number]
    rows = json.loads(_edinbox("list", *db, "--json").stdout)
    keys = {row["key"]: row["message_id"] for row in rows}
    assert set(keys.values()) == set(IDS)
    runner = CliRunner()
    for key in [*keys, *keys_shown]:  # in-process: a NUL cannot travel in a subprocess's arguments
        shown = runner.invoke(main, ["show", *db, key], catch_exceptions=False)
        assert shown.exit_code == 0, shown.output
        assert not _RAW.search(shown.output.replace("\n", "")), shown.output
        assert visible(key) in shown.output
        as_json = json.loads(runner.invoke(main, ["show", *db, key, "--json"], catch_exceptions=False).output)
        if key in keys:
            assert as_json["message_id"] == keys[key]


def test_the_formatter_and_the_tables_escape_what_they_are_given() -> None:
    """format_line, the formatter (logfmt and JSON) and the tables of the commands never let a control character, a
    line or paragraph separator or a bidirectional override through raw, whatever the field."""
    for value in IDS:
        record = logfmt.event_record("settled", {"key": value})
        text, as_json = EventFormatter().format(record), EventFormatter(json=True).format(record)
        for line in (format_line("settled", {"key": value}), text, as_json):
            assert not _RAW.search(line)
            assert "\n" not in line
        assert json.loads(as_json)["key"] == value
        assert logfmt.parse(text)["key"] == value
        table = render([{"key": value, "error": value}], as_json=False)
        assert not _RAW.search(table.replace("\n", ""))
        assert len(table.splitlines()) == 2
