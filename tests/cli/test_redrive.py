"""Re-drive: a conflict or a rejected payload goes back through the hub (requeue, replay), on the spool and RabbitMQ;
`show` previews payloads and writes their raw bytes; `forget` and `purge` clear parked payloads."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.test_cli import _doc, cli, edinbox
from edinbox.hub.deliveries._items import HEAD
from edinbox.hub.ops._preview import MAX_HEX
from edinbox.sources.spool import publish
from services import require_service
from sources.test_rabbitmq import BROKER, drop


def _run_hub(db: str, source: str, *extra: str) -> None:
    """One `edinbox run --once` until the source is idle."""
    out = edinbox("run", "--db", db, "--source", source, "--once", "--idle-timeout", "1", *extra)
    assert out.returncode == 0, out.stderr


def _json(*args: str) -> Any:
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _invoices(db_path: Path, number: str) -> list[tuple[str, str]]:
    with sqlite3.connect(db_path) as conn:
        return conn.execute("SELECT number, total FROM edinbox_hub_invoices WHERE number = ?", (number,)).fetchall()


def _redrive_loop(db: str, db_path: Path, source: str, *, publish_to: Any) -> None:
    """Conflict, then requeue and replay the corrected payload: the key settles once more, one invoice in all."""
    publish_to([("a", _doc("000000007", "R-7")), ("b", _doc("000000007", "R-7", amount="99.00"))])
    _run_hub(db, source)
    [row] = _json("list", "--db", db, "--status", "conflict")
    key = row["key"]
    refused = cli("replay", "--db", db, "--source", source, key)
    assert refused.exit_code == 1
    assert f"edinbox requeue {key}" in refused.output  # replaying a conflict as it stands would change nothing
    assert cli("requeue", "--db", db, key).exit_code == 0
    assert _json("show", "--db", db, key)["status"] == "requeued"
    replayed = cli("replay", "--db", db, "--source", source, key)
    assert replayed.exit_code == 0, replayed.output
    assert f"as {key}" in replayed.output  # its original key: the interchange key as producer id
    _run_hub(db, source)
    shown = _json("show", "--db", db, key)
    assert shown["status"] == "processed"
    assert shown["attempts"] == 1
    assert len(_invoices(db_path, "R-7")) == 1
    stats = _json("stats", "--db", db)
    assert (stats["processed"], stats["conflict"], stats["resent"]) == (1, 1, 1)  # the replay met the invoice key


def test_redrive_loop_on_the_spool(tmp_path: Path) -> None:
    """On the spool: conflict -> requeue -> replay (into the hub's own source) -> processed, still one invoice."""
    db_path = tmp_path / "hub.db"
    db, spool = f"sqlite:///{db_path}", f"dir://{tmp_path / 'spool'}"
    assert cli("init", "--db", db).exit_code == 0
    _redrive_loop(db, db_path, spool, publish_to=lambda messages: asyncio.run(publish(spool, messages)))


@pytest.fixture
def rabbit_queue() -> Iterator[str]:
    """A fresh RabbitMQ queue URL; the queue and its dead letters are deleted afterwards."""
    require_service("rabbitmq")
    name = "redrive" + uuid.uuid4().hex[:12]
    yield f"{BROKER}?queue={name}"
    asyncio.run(drop(name))


def test_redrive_loop_on_rabbitmq(tmp_path: Path, rabbit_queue: str) -> None:
    """Through RabbitMQ: the replayed payload carries its interchange key as AMQP message_id and settles once."""
    from edinbox.sources.rabbitmq import publish as publish_amqp

    db_path = tmp_path / "hub.db"
    db = f"sqlite:///{db_path}"
    assert cli("init", "--db", db).exit_code == 0
    _redrive_loop(db, db_path, rabbit_queue, publish_to=lambda m: asyncio.run(publish_amqp(rabbit_queue, m)))


@pytest.fixture
def parked(tmp_path: Path) -> dict[str, Any]:
    """A SQLite hub that rejected a text payload and a 1 MB binary one."""
    spool = f"dir://{tmp_path / 'spool'}"
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    binary = bytes(range(256)) * 4096
    asyncio.run(publish(spool, [("note.txt", b"no EDI here\nsecond line"), ("blob.bin", binary)]))
    assert cli("init", "--db", db).exit_code == 0
    _run_hub(db, spool)
    rows = {r["delivery"]: r["key"] for r in _json("list", "--db", db, "--status", "rejected")}
    assert len(rows) == 2
    keys = {("text" if "note" in delivery else "binary"): key for delivery, key in rows.items()}
    return {"db": db, "spool": spool, "binary": binary, "keys": keys, "path": tmp_path / "hub.db"}


def test_show_previews_binary_as_hex_and_writes_raw_bytes(parked: dict[str, Any], tmp_path: Path) -> None:
    """`show` of a 1 MB binary payload prints a bounded hex preview; `--payload FILE` writes the bytes kept (the
    first HEAD of them: the spool keeps the whole file, and `replay` refuses the cut copy, naming where it is)."""
    key = parked["keys"]["binary"]
    shown = cli("show", "--db", parked["db"], key)
    assert shown.exit_code == 0, shown.output
    assert len(shown.output) < 4000
    assert f"payload ({HEAD} bytes, binary):" in shown.output
    assert "00000000  00 01 02 03" in shown.output
    assert shown.output.count("\n  000") == MAX_HEX // 16
    target = tmp_path / "out.bin"
    written = cli("show", "--db", parked["db"], key, "--payload", str(target))
    assert written.exit_code == 0
    assert target.read_bytes() == parked["binary"][:HEAD]
    refused = cli("replay", "--db", parked["db"], "--source", parked["spool"], key)
    assert refused.exit_code == 1
    assert "rejected folder" in refused.output
    text = _json("show", "--db", parked["db"], parked["keys"]["text"])
    assert (text["payload"], text["payload_kind"]) == ("no EDI here\nsecond line", "text")


def test_show_prints_edi_one_segment_per_line(tmp_path: Path) -> None:
    """An EDI payload is shown as its segments, one per line, as written."""
    db_path = tmp_path / "hub.db"
    db, spool = f"sqlite:///{db_path}", f"dir://{tmp_path / 'spool'}"
    assert cli("init", "--db", db).exit_code == 0
    doc = _doc("000000008", "S-8")
    asyncio.run(publish(spool, [("a", doc), ("b", _doc("000000008", "S-8", amount="5.00"))]))
    _run_hub(db, spool)
    [row] = _json("list", "--db", db, "--status", "conflict")
    shown = cli("show", "--db", db, row["key"])
    block = shown.output.split("conflict_payload (", 1)[1].splitlines()[1:]
    tags = [line.strip()[:3] for line in block]
    assert tags[0] in ("ISA", "UNA", "UNB")
    assert tags[-1] in ("IEA", "UNZ")
    assert len(block) > 5


def test_a_rejected_payload_is_replayed_then_forgotten(parked: dict[str, Any]) -> None:
    """After the cause is fixed (`--non-edi inbox`), `replay rejected/N` brings the payload back through the hub
    under its producer id, and `forget rejected/N` removes the parked row."""
    db, key = parked["db"], parked["keys"]["text"]
    done = _json("replay", "--db", db, "--source", parked["spool"], key)
    assert done["message_id"] == "note.txt"
    _run_hub(db, parked["spool"], "--non-edi", "inbox")
    [row] = _json("list", "--db", db, "--status", "processed")
    assert row["key"].endswith("/note.txt")
    assert cli("forget", "--db", db, key, "--yes").exit_code == 0
    assert cli("show", "--db", db, key).exit_code == 1
    again = cli("forget", "--db", db, key, "--yes")
    assert again.exit_code == 1
    assert "no row" in again.output


def test_purge_removes_rejected_payloads_past_retention(parked: dict[str, Any]) -> None:
    """`purge` deletes parked payloads rejected longer ago than --older-than, and keeps the recent ones."""
    with sqlite3.connect(parked["path"]) as conn:
        conn.execute(
            "UPDATE edinbox_hub_rejected SET rejected_at = '2020-01-01T00:00:00.000Z' WHERE id = ?",
            (int(parked["keys"]["binary"].split("/")[1]),),
        )
    result = cli("purge", "--db", parked["db"], "--older-than", "30d")
    assert result.exit_code == 0, result.output
    assert "and 1 rejected payloads" in result.output
    left = [r["key"] for r in _json("list", "--db", parked["db"], "--status", "rejected")]
    assert left == [parked["keys"]["text"]]


def test_requeue_of_a_rejected_payload_points_to_replay(parked: dict[str, Any]) -> None:
    """A parked payload is not a journal row: `requeue rejected/N` says to replay it instead."""
    result = cli("requeue", "--db", parked["db"], parked["keys"]["text"])
    assert result.exit_code == 1
    assert "edinbox replay" in result.output
