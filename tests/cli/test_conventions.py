"""Command-line conventions: `python -m edinbox`, `--version`, `--json` everywhere, `[default: ...]` in help, one
format for timestamps and durations, no Python `None`, documented variable names, publish's warnings and names."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from edinbox.cli import main
from edinbox.hub.ops._output import human_duration, render


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run a command in-process with click's runner."""
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def _interchange(control: str, *, trailer: bool = True) -> bytes:
    """A small X12 810 interchange, with or without its IEA trailer."""
    head = (
        f"ISA*00*{'':10}*00*{'':10}*ZZ*{'ACME':<15}*ZZ*{'HUB':<15}*261202*1030*U*00401*{control}*0*T*>~"
        "GS*IN*ACME*HUB*20261202*1030*1*X*004010~"
    )
    body = "ST*810*0001~BIG*20261202*INV-1~TDS*10000~SE*4*0001~GE*1*1~"
    return (head + body + (f"IEA*1*{control}~" if trailer else "")).encode()


def test_python_dash_m_and_version() -> None:
    """`python -m edinbox --version` runs the same command and prints its version."""
    done = subprocess.run([sys.executable, "-m", "edinbox", "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert done.stdout.startswith("edinbox, version ")


@pytest.mark.parametrize("command", sorted(main.commands))
def test_every_command_takes_json_and_shows_defaults_as_such(command: str) -> None:
    """Each command has --json, and each option with a default shows it as `[default: ...]`, never a bare `[1.5]`."""
    params = {p.name for p in main.commands[command].params}
    assert "as_json" in params, command
    text = " ".join(cli(command, "--help").output.split())
    for param in main.commands[command].params:
        default = param.default
        if isinstance(param, click.Option) and isinstance(default, int | float | str) and not param.is_flag:
            assert f"default: {param.default}" in text, (command, param.name)


@pytest.mark.parametrize("command", sorted(main.commands))
def test_help_shows_default_durations_as_the_options_take_them(command: str) -> None:
    """A duration's default reads `15s` or `7d` in `--help`, as the option takes it, never `0:00:15` or
    `7 days, 0:00:00`; a setting without a default reads `none`, never Python's `None`."""
    text = " ".join(cli(command, "--help").output.split())
    assert "0:00" not in text
    assert "day," not in text
    assert "default: None" not in text
    if command == "run":
        for shown in ("default: 15s", "default: 7d", "default: 5m", "default: 30d", "default: 1h"):
            assert shown in text


def test_journal_commands_speak_json(tmp_path: Path) -> None:
    """`purge`, `requeue` and `forget` print one JSON object with --json (and requeue/forget exit 1 on no row)."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db, "--json").exit_code == 0
    purged = cli("purge", "--db", db, "--json")
    assert purged.exit_code == 0
    assert json.loads(purged.stdout) == {"purged": 0, "rejected": 0, "older_than": "30d"}
    from edinbox import Inbox, Message

    with Inbox(db, consumer="accounting") as inbox:
        inbox.process(Message(message_id="1", source="S"), lambda tx, message: None)
    forgot = cli("forget", "S/1", "--yes", "--db", db, "--json")
    assert json.loads(forgot.stdout) == {"key": "S/1", "done": "forgot"}
    assert cli("requeue", "S/1", "--db", db, "--json").exit_code == 1


def test_output_uses_iso_timestamps_short_durations_and_no_python_none() -> None:
    """Human output prints `-` for a missing value, `journal.processed` lines instead of a JSON dict, ISO 8601 UTC
    timestamps and durations like 7d; JSON carries the same timestamp."""
    when = datetime(2026, 12, 3, 2, 11, 56, tzinfo=UTC)
    data = {"error": None, "journal": {"processed": 3}, "at": when, "oldest_row_age_seconds": 90061.0}
    text = render(data, as_json=False)
    assert "None" not in text
    assert "{" not in text
    assert any(line.split() == ["journal.processed", "3"] for line in text.splitlines())
    assert "2026-12-03T02:11:56+00:00" in text
    assert "1d1h1m1s" in text
    assert json.loads(render(data, as_json=True))["at"] == "2026-12-03T02:11:56+00:00"
    assert [human_duration(timedelta(days=7)), human_duration(timedelta(seconds=30))] == ["7d", "30s"]
    assert "day" not in human_duration(timedelta(days=1, seconds=5))
    assert [human_duration(4.48124), human_duration(0.25), human_duration(59.96)] == ["4.48s", "0.25s", "60s"]


def test_show_and_stats_print_no_none_and_no_embedded_dict(tmp_path: Path) -> None:
    """`show` of a processed row and the human `stats` table contain neither `None` nor a JSON dict."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db).exit_code == 0
    from edinbox import Inbox, Message

    with Inbox(db, consumer="accounting") as inbox:
        inbox.process(Message(message_id="1", source="S"), lambda tx, message: None)
    shown = cli("show", "S/1", "--db", db)
    stats = cli("stats", "--db", db)
    for result in (shown, stats):
        assert result.exit_code == 0, result.output
        assert "None" not in result.output
        assert "{" not in result.output
    assert "journal.processed" in stats.output


def test_demo_dir_variable_follows_the_documented_rule() -> None:
    """`demo --dir` reads EDINBOX_DEMO_DIR (EDINBOX_<COMMAND>_<OPTION>), as docs/hub.md says."""
    [param] = [p for p in main.commands["demo"].params if p.name == "workdir"]
    assert param.envvar == "EDINBOX_DEMO_DIR"
    assert "EDINBOX_DEMO_DIR" in Path(__file__).parents[2].joinpath("docs", "hub.md").read_text()


def test_publish_warns_of_an_interchange_without_trailer(tmp_path: Path) -> None:
    """An interchange without its trailer goes out under `<file>@<offset>` with a warning on stderr."""
    spool = tmp_path / "spool"
    spool.mkdir()
    (tmp_path / "cut.x12").write_bytes(_interchange("000000001", trailer=False))
    result = cli("publish", str(tmp_path / "cut.x12"), "--to", f"dir://{spool}")
    assert result.exit_code == 0, result.output
    assert "warning: cut.x12@0: an interchange without its trailer has no key" in result.stderr
    assert "warning" not in result.stdout


def test_raw_files_keep_one_extension(tmp_path: Path) -> None:
    """`publish --raw order.x12` writes one inbound file with a single extension, and the key reads back."""
    spool = tmp_path / "spool"
    spool.mkdir()
    (tmp_path / "order.x12").write_bytes(b"not edi at all")
    result = cli("publish", "--raw", str(tmp_path / "order.x12"), "--to", f"dir://{spool}", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["messages"] == [{"key": "order.x12", "bytes": 14}]
    [name] = [p.name for p in (spool / "inbound").iterdir()]
    assert name.count(".") == 1
    assert name.endswith("~order%2Ex12.edi")


def test_durations_in_errors_read_as_the_options_take_them(tmp_path: Path) -> None:
    """A purge below the horizon is refused with `older_than=1d < horizon=7d`, never `1 day, 0:00:00`."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db).exit_code == 0
    result = cli("purge", "--db", db, "--older-than", "1d")
    assert result.exit_code == 1
    assert "older_than=1d < horizon=7d" in result.output
    assert "day," not in result.output
