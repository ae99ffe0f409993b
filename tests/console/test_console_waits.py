"""What waits and what was traced, as an operator sees it: `list`, `show` and the console's message page show a
failed message's retry time and a processed message's trace id."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from console.conftest import run, serving
from edinbox import Inbox, Message, Retry, Tx
from edinbox.cli import main
from edinbox.console import create_app
from edinbox.hub import HubConfig
from hub_ops import init

SOURCE = "X12:ZZ:ACME>ZZ:HUB"
TRACE_ID, SPAN_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


def _refuse(tx: Tx, message: Message) -> None:
    raise RuntimeError("accounting is down")


def test_list_show_and_the_console_show_the_retry_time_and_the_trace(tmp_path: Path) -> None:
    """A message that failed and waits an hour: `list --json` and `show` give its retry_at, the console's page says
    it waits until then; a message processed under a trace: `show` prints its traceparent and the console's page its
    trace id and span id."""
    config = HubConfig(db=f"sqlite:///{tmp_path / 'hub.db'}", source=f"dir://{tmp_path / 'spool'}")
    run(init(config))
    retry = Retry(immediate=0, first=timedelta(hours=1))
    with Inbox(config.db, consumer=config.consumer, table=config.table, retry=retry) as inbox:
        with pytest.raises(RuntimeError):
            inbox.process(Message("000000701", SOURCE, b"x"), _refuse)
        inbox.process(Message("000000702", SOURCE, b"y"), lambda tx, message: None)
        waiting = inbox.get(SOURCE, "000000701")
    with sqlite3.connect(tmp_path / "hub.db") as db:  # as a traced settle writes it (tests/hub/test_traces.py)
        db.execute("UPDATE inbox SET trace = ? WHERE message_id = '000000702'", (f"00-{TRACE_ID}-{SPAN_ID}-01",))
    assert waiting is not None
    assert waiting.retry_at is not None
    db = ("--db", config.db)
    listed = CliRunner().invoke(main, ["list", *db, "--json"], catch_exceptions=False).output
    rows = {row["message_id"]: row for row in json.loads(listed)}
    assert rows["000000701"]["retry_at"][:19] == waiting.retry_at.isoformat()[:19]
    assert rows["000000702"]["retry_at"] is None
    shown = {m: CliRunner().invoke(main, ["show", *db, rows[m]["key"]]).output for m in rows}
    assert re.search(r"^retry_at +" + waiting.retry_at.isoformat()[:16], shown["000000701"], re.MULTILINE)
    assert re.search(rf"^trace +00-{TRACE_ID}-{SPAN_ID}-01$", shown["000000702"], re.MULTILINE)
    with serving(create_app(config)) as url:
        pages = {m: httpx.get(f"{url}/message", params={"key": rows[m]["key"]}, timeout=30).text for m in rows}
    assert re.search(r'id="retry-at">[^<]*' + str(waiting.retry_at.year), pages["000000701"])
    assert 'id="trace"' not in pages["000000701"]
    assert re.search(rf'id="trace"><code>{TRACE_ID}</code> \(span <code>{SPAN_ID}</code>', pages["000000702"])
    assert 'id="retry-at"' not in pages["000000702"]
