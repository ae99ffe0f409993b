"""`edinbox migrate` on a hub whose journal an older edinbox wrote: `run` refuses it by name, `migrate` upgrades it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from cli.test_cli import cli, edinbox
from edinbox._core import MIGRATIONS

FROZEN = Path(__file__).resolve().parents[1] / "inbox" / "schema_v1" / "sqlite.sql"


def test_run_names_migrate_and_migrate_upgrades_once(tmp_path: Path) -> None:
    """A version-1 journal: `run` exits 1 saying to run `edinbox migrate`; `migrate` upgrades it, then has nothing
    to do; `run` then starts."""
    path = tmp_path / "hub.db"
    db = f"sqlite:///{path}"
    assert cli("init", "--db", db).exit_code == 0  # the hub's tables, and a journal we replace by version 1
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE inbox")
        conn.execute("DROP TABLE inbox_version")
        conn.execute("DROP TABLE inbox_outbox")  # version 1 had no outbox: version 3 adds it
        body = "\n".join(line for line in FROZEN.read_text().splitlines() if not line.startswith("--"))
        for statement in body.format(table="inbox", key_index="inbox_key", version_table="inbox_version").split(";"):
            conn.execute(statement)
    spool = f"dir://{tmp_path / 'spool'}"
    (tmp_path / "spool").mkdir()
    refused = edinbox("run", "--db", db, "--source", spool, "--once", "--idle-timeout", "0.1")
    assert refused.returncode == 1
    assert "run `edinbox migrate`" in refused.stderr
    first = cli("migrate", "--db", db, "--json")
    assert first.exit_code == 0, first.output
    assert [step["version"] for step in json.loads(first.output)["applied"]] == sorted(MIGRATIONS)
    again = cli("migrate", "--db", db)
    assert "nothing to migrate" in again.output
    started = edinbox("run", "--db", db, "--source", spool, "--once", "--idle-timeout", "0.1")
    assert started.returncode == 0, started.stderr
