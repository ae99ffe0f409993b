"""One database path: one URL parser, the hub's tables through the journal's store, one commit per batch."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from edinbox._urls import database_url
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.demo._traffic import PARTNERS, Doc, render
from edinbox.sources.spool import publish
from hub_ops import stats


def _doc(control: str, number: str) -> bytes:
    from decimal import Decimal

    return render(Doc(PARTNERS[0], control, "invoice", number, lines=((1, Decimal("5.00")),)))


def test_a_percent_escaped_sqlite_path_is_one_file_for_everything(tmp_path: Path) -> None:
    """`sqlite:///my%20db.db` puts the journal and the hub's tables in the one file `my db.db`, nothing elsewhere."""
    spool = tmp_path / "spool"
    work = tmp_path / "work"
    work.mkdir()
    import asyncio

    asyncio.run(publish(f"dir://{spool}", [("a", _doc("000000001", "P-1"))]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for args in (["init"], ["run", "--source", f"dir://{spool}", "--once", "--idle-timeout", "0.2"]):
        done = subprocess.run(
            [sys.executable, "-m", "edinbox.cli", *args, "--db", "sqlite:///my%20db.db"],
            cwd=work, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert sorted(p for p in os.listdir(work) if not p.endswith(("-wal", "-shm"))) == ["my db.db"]
    import sqlite3

    with contextlib.closing(sqlite3.connect(work / "my db.db")) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"inbox", "edinbox_hub_invoices", "edinbox_hub_rejected", "edinbox_hub_counters"} <= tables
        assert conn.execute("SELECT count(*) FROM edinbox_hub_invoices").fetchone() == (1,)


@pytest.mark.parametrize(
    ("url", "dialect", "target"),
    [
        ("sqlite:///my%20db.db", "sqlite", "my db.db"),
        ("sqlite:////var/lib/hub%231/hub.db?mode=rwc", "sqlite", "/var/lib/hub#1/hub.db"),
        ("sqlite://", "sqlite", ":memory:"),
        ("postgresql://app:p%40ss@db/hub", "postgresql", "postgresql://app:p%40ss@db/hub"),
        ("postgres://db/hub", "postgresql", "postgres://db/hub"),
    ],
)
def test_the_one_database_url_parser(url: str, dialect: str, target: str) -> None:
    """Every part of the package reads a database URL through `database_url`: dialect and target, decoded once."""
    parsed = database_url(url)
    assert (parsed.dialect, parsed.target) == (dialect, target)


class _Counting:
    """Counts the connection holds and commits of the journal's store while a hub settles one batch."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.holds = 0
        self.commits = 0
        self.unit = store.unit

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[Any]:
        self.holds += 1
        async with self.unit() as unit:
            commit = unit.commit

            async def counted() -> None:
                self.commits += 1
                await commit()

            unit.commit = counted
            try:
                yield unit
            finally:
                del unit.commit


async def test_a_batch_costs_one_connection_and_one_commit(hub_config: HubConfig, spool: Path) -> None:
    """New invoices, a duplicate, a parked payload and an ack in one batch: one connection hold, one commit."""
    ack = render(Doc(PARTNERS[0], "000000009", "ack", "X"))
    payloads = [
        ("a", _doc("000000001", "B-1")),
        ("b", _doc("000000002", "B-2")),
        ("a2", _doc("000000001", "B-1")),
        ("junk", b"not EDI"),
        ("ack", ack),
    ]
    await publish(hub_config.source, payloads)
    async with open_hub(hub_config) as hub:
        counting = _Counting(hub.inbox._store)
        hub.inbox._store.unit = counting.hold  # type: ignore[method-assign]
        assert await hub.step() == 5
    assert (counting.holds, counting.commits) == (1, 1)
    counts = await stats(hub_config)
    assert (counts["processed"], counts["duplicate"], counts["rejected"], counts["bypassed"]) == (2, 1, 1, 1)
    assert counts["invoices"] == 2


def test_the_hub_has_no_database_layer_of_its_own() -> None:
    """No module of the hub imports a database driver or holds SQL: every statement is a named query."""
    import re

    root = Path(__file__).resolve().parents[2] / "src" / "edinbox" / "hub"
    for path in root.rglob("*.py"):
        if path.name == "accounting_service.py":  # the demo's accounting API: another program, its own database
            continue
        text = path.read_text()
        assert not re.search(r"^\s*(import|from) (psycopg|sqlite3|aiosqlite)\b", text, re.MULTILINE), path
        assert not re.search(r"\b(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|CREATE TABLE)\b", text), path


def test_the_hub_and_the_cli_import_no_private_module_of_stores_or_sources() -> None:
    """Layers: the hub and the command line reach the stores through the journal API or the stores' package (its
    row binders) and the sources by their package, never through a private module."""
    import ast

    src = Path(__file__).resolve().parents[2] / "src" / "edinbox"
    for path in [*(src / "hub").rglob("*.py"), *(src / "cli").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                private = node.module.startswith(("edinbox.stores.", "edinbox.sources._"))  # the packages' faces may
                assert not private, (path.name, node.module)


@pytest.mark.parametrize("command", ["init", "run", "stats"])
def test_one_table_name_rule_for_the_journal_and_the_hub(tmp_path: Path, command: str) -> None:
    """A 50-character table name is refused by every command with the journal's rule (1-48), not by a second one."""
    from click.testing import CliRunner

    from edinbox.cli import main

    args = [command, "--db", f"sqlite:///{tmp_path / 'hub.db'}", "--table", "t" * 50]
    if command != "init":  # past the checks that the database and the spool exist: the table name is what is wrong
        (tmp_path / "hub.db").touch()
        (tmp_path / "spool").mkdir()
    if command == "run":
        args += ["--source", f"dir://{tmp_path / 'spool'}", "--once"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "use 1-48 letters" in result.output
    if command == "init":
        assert not (tmp_path / "hub.db").exists()  # refused before anything was created
    else:
        assert (tmp_path / "hub.db").stat().st_size == 0  # nothing was written into it


async def test_before_commit_shares_the_batch_transaction(tmp_path: Path) -> None:
    """The hook the hub's bookkeeping uses sees every outcome and commits with the batch; when it fails, the batch's
    journal rows and effects roll back with it and no attempt is charged."""
    from edinbox import AsyncInbox, Message, Outcome, StoreError

    async with AsyncInbox(f"sqlite:///{tmp_path / 'j.db'}", consumer="c") as inbox:
        await inbox.create_schema()
        await inbox.transaction(lambda tx: tx.connection.execute("CREATE TABLE effects (id TEXT)"))
        seen: list[list[Outcome]] = []

        async def handler(tx: Any, messages: list[Message]) -> None:
            for message in messages:
                await tx.connection.execute("INSERT INTO effects VALUES (?)", (message.message_id,))

        async def failing(tx: Any, outcomes: list[Outcome]) -> None:
            seen.append(list(outcomes))
            raise StoreError("the bookkeeping failed")

        batch = [Message("1", "s", b"a"), Message("2", "s", b"b"), Message("1", "s", b"a")]
        with pytest.raises(StoreError):
            await inbox.process_batch(batch, handler, before_commit=failing)
        assert seen == [[Outcome.PROCESSED, Outcome.PROCESSED, Outcome.DUPLICATE]]
        assert (await inbox.stats()).total == 0
        rows = await inbox.transaction(lambda tx: tx.connection.execute("SELECT count(*) FROM effects"))
        assert await rows.fetchone() == (0,)

        async def keep(tx: Any, outcomes: list[Outcome]) -> None:
            seen.append(list(outcomes))

        assert await inbox.process_batch(batch, handler, before_commit=keep) == seen[-1]
        assert (await inbox.stats()).processed == 2


def test_operator_reads_take_no_write_lock(tmp_path: Path) -> None:
    """`stats`, `list` and `doctor` only read: they answer while a hub holds SQLite's write lock, instead of waiting
    for it (the 30 s busy timeout would exceed the guard)."""
    import sqlite3

    from click.testing import CliRunner

    from edinbox.cli import main

    db = ["--db", f"sqlite:///{tmp_path / 'hub.db'}"]
    assert CliRunner().invoke(main, ["init", *db]).exit_code == 0
    writer = sqlite3.connect(tmp_path / "hub.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a hub in the middle of a batch
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        for args in (["stats", "--json"], ["list", "--status", "rejected"], ["doctor"]):
            done = subprocess.run(
                [sys.executable, "-m", "edinbox.cli", *args, *db],
                env=env, capture_output=True, text=True, timeout=20, check=False,
            )  # fmt: skip
            assert done.returncode == 0, (args, done.stdout, done.stderr)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
