"""The `edinbox` command as a user runs it: the hub and the operator's commands (the demo is in `test_cli_demo`)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from edinbox.cli import main
from edinbox.hub.demo._traffic import PARTNERS, Doc, render
from edinbox.sources.spool import publish


def edinbox(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the installed command in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "edinbox.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def cli(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Result:
    """Run a command in-process with click's runner."""
    return CliRunner().invoke(main, list(args), env=env, input=input, catch_exceptions=False)


def stats_json(*db_args: str) -> dict[str, Any]:
    """`edinbox stats --json` parsed (one JSON object)."""
    result = cli("stats", *db_args, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert isinstance(data, dict)
    return data


def _doc(control: str, number: str, amount: str = "10.00") -> bytes:
    from decimal import Decimal

    return render(Doc(PARTNERS[0], control, "invoice", number, lines=((1, Decimal(amount)),)))


@pytest.fixture
def hub(tmp_path: Path) -> dict[str, Any]:
    """A SQLite hub that settled: two invoices, one conflict, one parked payload."""
    spool = tmp_path / "spool"
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    asyncio.run(
        publish(
            f"dir://{spool}",
            [
                ("a", _doc("000000001", "A-1")),
                ("b", _doc("000000002", "A-2")),
                ("c", _doc("000000002", "A-2", amount="99.00")),  # control number reused: conflict
                ("junk", b"this is not EDI"),
            ],
        )
    )
    result = cli("init", "--db", db)
    assert result.exit_code == 0, result.output
    out = edinbox("run", "--db", db, "--source", f"dir://{spool}", "--once", "--idle-timeout", "0.2")
    assert out.returncode == 0, out.stderr
    return {"db": db, "spool": spool, "log": out.stderr}


def test_run_logs_one_structured_line_per_settled_message(hub: dict[str, Any]) -> None:
    """Each settled message gets one `settled` line with its key, outcome and duration."""
    lines = [line for line in hub["log"].splitlines() if " event=settled " in line]
    assert len(lines) == 4
    assert sum("outcome=processed" in line for line in lines) == 2
    assert sum("outcome=conflict" in line for line in lines) == 1
    assert sum("outcome=rejected" in line for line in lines) == 1
    assert all("key=" in line and "ms=" in line for line in lines)


def test_stats_json_is_one_object_with_integer_counts(hub: dict[str, Any]) -> None:
    """`stats --json` prints one JSON object with the integer counts scripts rely on."""
    data = stats_json("--db", hub["db"])
    assert {k: data[k] for k in ("processed", "duplicate", "conflict", "dead", "rejected", "invoices")} == {
        "processed": 2,
        "duplicate": 0,
        "conflict": 1,
        "dead": 0,
        "rejected": 1,
        "invoices": 2,
    }
    assert data["oldest_row_age_seconds"] >= 0
    human = cli("stats", "--db", hub["db"])
    assert human.exit_code == 0
    assert "invoices" in human.output


def test_list_show_requeue_and_forget(hub: dict[str, Any]) -> None:
    """Operators find the conflict and the parked payload, inspect them, requeue and forget keys."""
    db = ("--db", hub["db"])
    conflict = json.loads(cli("list", *db, "--status", "conflict", "--json").output)
    [row] = conflict
    key = row["key"]
    assert key.endswith("/000000002")
    table = cli("list", *db).output.splitlines()
    assert table[0].split()[:2] == ["KEY", "STATUS"]
    assert any(line.startswith(key) and "conflict" in line for line in table[1:])
    shown = json.loads(cli("show", *db, key, "--json").output)
    assert shown["status"] == "conflict"
    assert [i["number"] for i in shown["invoices"]] == ["A-2"]

    parked = json.loads(cli("list", *db, "--status", "rejected", "--json").output)
    assert len(parked) == 1
    detail = json.loads(cli("show", *db, parked[0]["key"], "--json").output)
    assert detail["payload"] == "this is not EDI"

    assert cli("requeue", *db, key).exit_code == 0
    assert json.loads(cli("list", *db, "--status", "conflict", "--json").output) == []
    assert cli("requeue", *db, key).exit_code == 1  # nothing dead or conflicting any more

    first = json.loads(cli("list", *db, "--status", "processed", "--json").output)
    processed_key = next(r["key"] for r in first if r["key"].endswith("/000000001"))
    assert cli("forget", *db, processed_key, "--yes").exit_code == 0
    assert cli("show", *db, processed_key).exit_code == 1
    assert "no row" in cli("show", *db, processed_key).output


def test_purge_respects_the_horizon(hub: dict[str, Any]) -> None:
    """purge deletes nothing young, and refuses an age below the redelivery horizon."""
    ok = cli("purge", "--db", hub["db"], "--older-than", "30d")
    assert ok.exit_code == 0, ok.output
    assert "purged 0 rows" in ok.output
    refused = cli("purge", "--db", hub["db"], "--older-than", "1h")
    assert refused.exit_code == 1
    assert "horizon" in refused.output
    assert stats_json("--db", hub["db"])["journal_rows"] == 2  # two keys; the conflict sits on the second


def test_doctor_passes_then_fails_without_the_unique_key(hub: dict[str, Any], tmp_path: Path) -> None:
    """doctor is green on a sound hub and exits 1 when the journal's unique key is gone."""
    good = cli("doctor", "--db", hub["db"], "--source", f"dir://{hub['spool']}", "--json")
    assert good.exit_code == 0, good.output
    statuses = {c["check"]: c["status"] for c in json.loads(good.output)}
    ok = dict.fromkeys(["database", "invoice key", "journal", "purge", "source", "retention"], "ok")
    assert statuses == {**ok, "partners": "warn"}  # no agreement: everyone gets in, which doctor says
    human = cli("doctor", "--db", hub["db"])
    assert human.output.splitlines()[0].split() == ["CHECK", "STATUS", "DETAIL"]
    conn = sqlite3.connect(tmp_path / "hub.db")
    indexes = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='inbox'")]
    assert "inbox_key" in indexes  # the journal's unique key is a named index that an operator can drop
    for name in indexes:
        if not name.startswith("sqlite_autoindex"):
            conn.execute(f'DROP INDEX "{name}"')
    conn.commit()
    conn.close()
    bad = cli("doctor", "--db", hub["db"], "--json")
    assert bad.exit_code == 1
    checks = {c["check"]: c for c in json.loads(bad.output)}
    assert checks["journal"]["status"] == "fail"
    assert "edinbox init" in json.dumps(checks["journal"])  # the remedy is named as the operator's command


def test_doctor_fails_when_retention_is_shorter_than_the_horizon(hub: dict[str, Any]) -> None:
    """Retention below the redelivery horizon would forget keys that can still come back: doctor says so."""
    result = cli("doctor", "--db", hub["db"], "--retention", "1d", "--horizon", "7d", "--json")
    assert result.exit_code == 1
    checks = {c["check"]: c for c in json.loads(result.output)}
    assert checks["retention"]["status"] == "fail"


def test_settings_come_from_file_then_environment_then_flags(hub: dict[str, Any], tmp_path: Path) -> None:
    """The TOML file sets the database, EDINBOX_ variables override it, and flags override both."""
    config = tmp_path / "hub.toml"
    config.write_text(f'[hub]\ndb = "{hub["db"]}"\n')
    assert cli("stats", "--config", str(config), "--json").exit_code == 0
    missing = f"sqlite:///{tmp_path / 'elsewhere' / 'none.db'}"
    from_env = cli("stats", "--config", str(config), "--json", env={"EDINBOX_DB": missing})
    assert from_env.exit_code == 1  # the environment won: that database does not exist
    flag = cli("stats", "--config", str(config), "--db", hub["db"], "--json", env={"EDINBOX_DB": missing})
    assert flag.exit_code == 0
    assert json.loads(flag.output)["invoices"] == 2


def test_help_lists_the_environment_variables() -> None:
    """`run --help` shows the EDINBOX_ variable of every setting."""
    result = cli("run", "--help")
    for name in ("EDINBOX_DB", "EDINBOX_SOURCE", "EDINBOX_CONSUMER", "EDINBOX_BATCH_SIZE", "EDINBOX_IDLE_TIMEOUT"):
        assert name in result.output


@pytest.mark.parametrize("command", sorted(main.commands))
def test_every_option_of_every_command_shows_its_variable(command: str) -> None:
    """Each command's --help names the EDINBOX_ variable of each of its options (the CLI's only input besides flags)."""
    result = cli(command, "--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for param in main.commands[command].params:
        if isinstance(param, click.Option) and param.name and not param.hidden:  # a hidden option is a refusal
            variable = param.envvar or f"EDINBOX_{command.upper()}_{param.name.upper()}"
            assert f"{variable}]" in text or f"{variable};" in text, (param.opts, variable)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["stats", "--db", "oracle://hub:s3cret@db/hub"], "unsupported database URL 'oracle://hub:***@db/hub'"),
        (["stats", "--db", "postgresql://hub:s3cret@127.0.0.1:1/hub"], "postgresql://hub:***@127.0.0.1:1/hub"),
        (["run", "--source", "bogus://hub:s3cret@h/q", "--once"], "unknown source URL 'bogus://hub:***@h/q'"),
        (["run", "--source", "dir://{tmp}/spool?colour=red", "--once"], "unknown option(s) colour"),
    ],
)
def test_bad_database_or_source_url_is_one_masked_sentence(args: list[str], expected: str, tmp_path: Path) -> None:
    """A wrong --db or --source URL exits 1 with a sentence naming the URL, its password masked."""
    if args[0] == "run":
        db = ["--db", f"sqlite:///{tmp_path / 'hub.db'}"]
        assert cli("init", *db).exit_code == 0
        args = [arg.replace("{tmp}", str(tmp_path)) for arg in args] + db
    result = cli(*args)
    assert result.exit_code == 1
    assert expected in result.output
    assert "s3cret" not in result.output
    assert "Traceback" not in result.output


def test_run_without_a_source_is_a_clear_error(tmp_path: Path) -> None:
    """`run` with no source says what to pass instead of failing obscurely."""
    assert cli("init", "--db", f"sqlite:///{tmp_path / 'x.db'}").exit_code == 0
    result = cli("run", "--db", f"sqlite:///{tmp_path / 'x.db'}", "--once")
    assert result.exit_code == 1
    assert "--source" in result.output


def test_run_masks_the_database_password_in_its_logs(tmp_path: Path, postgres_url: str, pg_table: str) -> None:
    """The hub logs its database URL at start, with the password replaced by ***."""
    with_password = postgres_url.replace("postgres@", "postgres:s3cret@")  # trust auth ignores it
    spool = tmp_path / "spool"
    asyncio.run(publish(f"dir://{spool}", [("a", _doc("000000001", "A-1"))]))
    assert cli("init", "--db", postgres_url, "--table", pg_table).exit_code == 0
    out = edinbox(
        "run",
        "--db",
        with_password,
        "--table",
        pg_table,
        "--source",
        f"dir://{spool}",
        "--once",
        "--idle-timeout",
        "0.2",
    )
    assert out.returncode == 0, out.stderr
    assert "outcome=processed" in out.stderr
    assert "s3cret" not in out.stderr
    assert "postgres:***@" in out.stderr


def test_run_flags_for_routes_and_non_edi_payloads(tmp_path: Path) -> None:
    """--route and --non-edi change what the hub does; a bad route is a usage error."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    spool = tmp_path / "spool"
    assert cli("init", "--db", db, "--source", f"dir://{spool}").exit_code == 0
    bad = cli("run", "--db", db, "--source", f"dir://{spool}", "--route", "INVOIC=teleport", "--once")
    assert bad.exit_code == 1  # configuration
    assert "teleport" in bad.output
    asyncio.run(publish(f"dir://{spool}", [("evt-1", b"plain text"), ("evt-1", b"plain text")]))
    asyncio.run(publish(f"dir://{spool}", [("inv", _doc("000000003", "A-3"))]))
    args = ("--db", db, "--source", f"dir://{spool}", "--once", "--idle-timeout", "0.2")
    result = cli("run", *args, "--non-edi", "inbox", "--route", "810=bypass")
    assert result.exit_code == 0, result.output
    data = stats_json("--db", db)
    assert (data["processed"], data["duplicate"], data["bypassed"], data["invoices"]) == (1, 1, 1, 0)


def test_purge_deletes_old_rows_and_the_invoice_key_still_guards(hub: dict[str, Any]) -> None:
    """With a zero horizon, purge forgets every processed key; a late redelivery then meets the invoice key."""
    db = ("--db", hub["db"])
    purged = cli("purge", *db, "--older-than", "0s", "--horizon", "0s")
    assert purged.exit_code == 0, purged.output
    assert "purged 2 rows" in purged.output  # the processed row and its kept payload; the conflict row is kept
    assert stats_json(*db)["journal_rows"] == 1
    asyncio.run(publish(f"dir://{hub['spool']}", [("late", _doc("000000001", "A-1"))]))
    out = edinbox("run", *db, "--source", f"dir://{hub['spool']}", "--once", "--idle-timeout", "0.2")
    assert out.returncode == 0, out.stderr
    data = stats_json(*db)
    assert (data["invoices"], data["resent"]) == (2, 1)


def test_run_from_a_config_file(tmp_path: Path) -> None:
    """`edinbox run --config hub.toml` takes the database, source, consumer and routes from the file."""
    spool = tmp_path / "spool"
    config = tmp_path / "hub.toml"
    config.write_text(
        f'[hub]\ndb = "sqlite:///{tmp_path / "hub.db"}"\nsource = "dir://{spool}"\nconsumer = "payables"\n'
        'idle_timeout = 0.2\n[routes]\n"810" = "inbox"\n'
    )
    asyncio.run(publish(f"dir://{spool}", [("a", _doc("000000011", "C-1")), ("b", _doc("000000011", "C-1"))]))
    assert cli("init", "--config", str(config)).exit_code == 0
    out = edinbox("run", "--config", str(config), "--once")
    assert out.returncode == 0, out.stderr
    assert "consumer=payables" in out.stderr
    data = stats_json("--config", str(config))
    assert (data["consumer"], data["processed"], data["duplicate"], data["invoices"]) == ("payables", 1, 1, 1)


def test_run_help_documents_the_exit_statuses_and_give_up_after() -> None:
    """`run --help` says what 0, 1 and 2 mean and names --give-up-after with its variable and TOML key's meaning."""
    text = " ".join(cli("run", "--help").output.split())
    assert "0 stopped or drained" in text
    assert "1 configuration" in text
    assert "2 gave up" in text
    assert "--give-up-after" in text
    assert "EDINBOX_GIVE_UP_AFTER" in text
