"""Keys holding `/`, `%`, spaces or control characters are addressable: `list` prints them percent-encoded, and
`show`, `requeue`, `forget` and the console's pages take exactly what it prints."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from click.testing import CliRunner, Result
from starlette.testclient import TestClient

from edinbox import Inbox, Message
from edinbox.cli import main
from edinbox.hub import HubConfig
from edinbox.hub.ops._redrive import join_key, split_key

SOURCE = "X12:ZZ:ACME/EU>ZZ:HUB"
MESSAGE_ID = "INV/2026/0042 50%\n"


def cli(*args: str) -> Result:
    """Run a command in-process with click's runner."""
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A hub database holding one conflict row whose source and message id both hold `/`."""
    url = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", url).exit_code == 0
    config = HubConfig(db=url)
    with Inbox(url, consumer=config.consumer, table=config.table) as inbox:
        inbox.process(Message(MESSAGE_ID, SOURCE, b"first"), lambda tx, m: None)
        inbox.process(Message(MESSAGE_ID, SOURCE, b"other"), lambda tx, m: None)  # a conflict
    return url


@pytest.mark.parametrize(
    ("source", "message_id"),
    [
        ("X12:ZZ:ACME>ZZ:HUB", "000000905"),
        ("amqp:a/b", "1/2"),
        ("dir:spool", "100%2F done"),
        ("kafka:t", "tab\there\u202e\x00"),
        ("redis:s", "caf\udce9"),
    ],
)
def test_a_joined_key_splits_back_into_its_parts(source: str, message_id: str) -> None:
    """`split_key(join_key(s, m))` gives back (s, m) for any text, the key has one `/` and no whitespace, and a
    plain key is printed as it is."""
    key = join_key(source, message_id)
    assert split_key(key) == (source, message_id)
    assert key.count("/") == 1
    assert not any(c.isspace() or not c.isprintable() for c in key)
    assert join_key("X12:ZZ:ACME>ZZ:HUB", "000000905") == "X12:ZZ:ACME>ZZ:HUB/000000905"


def test_list_prints_a_key_that_show_requeue_and_forget_take(db: str) -> None:
    """The key `list` prints for a row whose source and message id hold `/` (and a space, `%`, a newline) is one
    pasteable token that `show`, `requeue` and `forget` reach."""
    [row] = json.loads(cli("list", "--db", db, "--json").output)
    key = row["key"]
    assert key == "X12:ZZ:ACME%2FEU>ZZ:HUB/INV%2F2026%2F0042%2050%25%0A"
    table = cli("list", "--db", db).output
    assert key in table.split()
    shown = json.loads(cli("show", "--db", db, key, "--json").output)
    assert (shown["source"], shown["message_id"], shown["status"], shown["key"]) == (
        SOURCE,
        MESSAGE_ID,
        "conflict",
        key,
    )
    assert cli("requeue", "--db", db, key).exit_code == 0
    assert json.loads(cli("show", "--db", db, key, "--json").output)["status"] == "requeued"
    assert cli("forget", "--db", db, key, "--yes").exit_code == 0
    assert cli("show", "--db", db, key).exit_code == 1


def test_a_key_with_several_raw_slashes_is_refused_in_one_line(db: str) -> None:
    """A key typed with a raw `/` inside a part is ambiguous: one line saying to write it as %2F, exit 1, nothing
    changed."""
    raw = f"{SOURCE}/{MESSAGE_ID.strip()}"
    for command in (("show",), ("requeue",), ("forget", "--yes")):
        result = CliRunner().invoke(main, [command[0], "--db", db, raw, *command[1:]])
        assert result.exit_code == 1, result.output
        assert "%2F" in result.output
        assert len(result.output.strip().splitlines()) == 1
    assert json.loads(cli("list", "--db", db, "--json").output)[0]["status"] == "conflict"


def test_the_console_reaches_a_key_holding_slashes(db: str) -> None:
    """The console's message page for the printed key (percent-encoded in its URL) shows the row; the search
    results link to that page."""
    from edinbox.console import create_app

    [row] = json.loads(cli("list", "--db", db, "--json").output)
    with TestClient(create_app(HubConfig(db=db)), base_url="http://127.0.0.1") as client:
        page = client.get(f"/message?{urlencode({'key': row['key']})}")
        assert page.status_code == 200, page.text
        assert "INV/2026/0042" in page.text
        assert "conflict" in page.text
        links = re.findall(r'href="(/message\?key=[^"]+)"', client.get("/").text)
        assert links, "the search page lists the row"
        followed = client.get(html.unescape(links[0]))
        assert followed.status_code == 200
        assert "INV/2026/0042" in followed.text
        conflicts = client.get("/parked/conflict")
        assert conflicts.status_code == 200
        assert "<td>ZZ:ACME/EU</td>" in conflicts.text  # the partner of the decoded source
        links = re.findall(r'href="(/message\?key=[^"]+)"', conflicts.text)
        assert links
        assert all(client.get(html.unescape(link)).status_code == 200 for link in links)


@pytest.mark.parametrize("number", ["9223372036854775808", "9" * 5000, "١٢"])
def test_a_parked_payload_number_out_of_range_is_one_line(db: str, number: str) -> None:
    """`show rejected/<a number no id can have>` (over 64 bits, thousands of digits, non-ASCII digits) is one
    `Error:` line and exit 1, never a traceback."""
    result = CliRunner().invoke(main, ["show", "--db", db, f"rejected/{number}"])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.output.startswith("Error:")
    assert "rejected/<number>" in result.output
