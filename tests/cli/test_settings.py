"""Checks before touching data: settings, extras, missing databases and spool folders, one line and exit 1, nothing
created; and `edinbox config --show / --example`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from edinbox.cli import main
from edinbox.hub import HubConfig
from edinbox.hub.config._settings import load_settings


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run a command in-process with click's runner (stderr kept apart)."""
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def one_error_line(result: Result) -> str:
    """The single `Error: ...` line of a refused command (exit 1, no traceback)."""
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[route]\nINVOIC = "inbox"\n', "unknown section [route] (did you mean 'routes'?)"),
        ("[hub]\nconsumr = 'x'\n", "unknown key 'consumr' in [hub] (did you mean 'consumer'?)"),
        ('[hub]\nbatch_size = "twenty"\n', "[hub] batch_size: expected a whole number, got 'twenty'"),
        ("[hub]\nbatch_size = 2.5\n", "[hub] batch_size: expected a whole number, got 2.5"),
        ("[hub]\nhorizon = 7\n", "[hub] horizon: expected a duration with its unit (30s, 15m, 12h, 7d, 2w), got 7"),
        ("[hub]\npurge_max_rate = 0\n", "[hub] purge_max_rate: expected a positive number of rows per second"),
        ('[hub]\npurge_every = "often"\n', "[hub] purge_every: expected a duration with its unit"),
    ],
)
def test_a_bad_file_is_one_line_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str
) -> None:
    """An unknown section or key (closest name suggested) or a value of the wrong type: one line, exit 1, and
    neither the database nor the spool folder is created, even by `init`."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hub.toml").write_text(text)
    for command in (["stats"], ["init", "--source", "dir:spool"]):
        line = one_error_line(cli(*command, "--config", "hub.toml", "--db", "sqlite:///h.db"))
        assert expected in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hub.toml"]


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["purge", "--older-than", "30"], {}, "--older-than: expected a duration with its unit"),
        (["stats"], {"EDINBOX_MAX_ATTEMPTS": "many"}, "EDINBOX_MAX_ATTEMPTS: expected a whole number, got 'many'"),
        (["doctor", "--horizon", "7"], {}, "--horizon: expected a duration with its unit"),
        (["stats", "--consumer", ""], {}, "--consumer: expected a non-empty name, got ''"),
        (["purge", "--max-rate", "0"], {}, "--max-rate: expected a positive number of rows per second"),
        (["purge", "--max-rate", "-5"], {}, "--max-rate: expected a positive number of rows per second"),
        (["purge", "--max-rate", "fast"], {}, "--max-rate: expected a positive number of rows per second"),
        (["purge"], {"EDINBOX_PURGE_MAX_RATE": "nan"}, "EDINBOX_PURGE_MAX_RATE: expected a positive number"),
        (["run", "--purge-every", "0s"], {}, "--purge-every: expected a duration longer than zero"),
        (["run", "--purge-every", "1"], {}, "--purge-every: expected a duration with its unit"),
        (["run", "--purge-max-rate", "fast"], {}, "--purge-max-rate: expected a positive number of rows per second"),
    ],
)
def test_a_bad_flag_or_variable_is_named_as_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], expected: str
) -> None:
    """A duration without its unit and a wrong type are refused naming the flag or variable that set them."""
    monkeypatch.chdir(tmp_path)
    assert expected in one_error_line(cli(*args, env=env))
    assert list(tmp_path.iterdir()) == []


def test_run_refuses_a_periodic_purge_below_the_horizon_before_it_connects(tmp_path: Path) -> None:
    """`run --purge-every` with a retention shorter than the horizon is one line and exit 1 before the hub starts;
    `purge --max-rate inf` (no limit) is accepted."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db, "--source", f"dir://{tmp_path / 'spool'}").exit_code == 0
    line = one_error_line(
        cli("run", "--db", db, "--source", f"dir://{tmp_path / 'spool'}", "--purge-every", "1h", "--retention", "1d")
    )
    assert "refusing to purge rows younger than the redelivery horizon" in line
    assert cli("purge", "--db", db, "--max-rate", "inf", "--json").exit_code == 0


@pytest.mark.parametrize("command", [["stats"], ["list"], ["show", "X12:ZZ:A>ZZ:B/1"], ["doctor"], ["purge"]])
def test_commands_other_than_init_never_create_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """A SQLite file that does not exist is one line naming `init`, for the default path and a typo alike."""
    monkeypatch.chdir(tmp_path)
    assert "no database edinbox.db" in one_error_line(cli(*command))
    assert "no database typo.db" in one_error_line(cli(*command, "--db", "sqlite:///typo.db"))
    assert list(tmp_path.iterdir()) == []


def test_a_missing_spool_folder_is_refused_and_only_init_creates_it(tmp_path: Path) -> None:
    """`run --once` and `doctor` on a spool folder that does not exist exit 1 without creating it; `init` does."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db).exit_code == 0
    deep = tmp_path / "typo" / "deep" / "er"
    for command in (["run", "--once"], ["doctor"]):
        line = one_error_line(cli(*command, "--db", db, "--source", f"dir://{deep}"))
        assert f"the spool folder {deep} does not exist" in line
        assert not (tmp_path / "typo").exists()
    assert cli("init", "--db", db, "--source", f"dir://{deep}").exit_code == 0
    assert {p.name for p in deep.iterdir()} >= {"inbound", "archive", "rejected"}


def test_relative_paths_follow_one_rule_for_databases_and_spools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sqlite://NAME` and `dir://NAME` are both refused (a host, not a path); `dir:spool` and `sqlite:///hub.db`
    are relative to the current folder."""
    monkeypatch.chdir(tmp_path)
    assert "invalid SQLite URL 'sqlite://hub.db'" in one_error_line(cli("init", "--db", "sqlite://hub.db"))
    assert "invalid spool URL 'dir://relspool'" in one_error_line(
        cli("init", "--db", "sqlite:///hub.db", "--source", "dir://relspool")
    )
    assert list(tmp_path.iterdir()) == []
    assert cli("init", "--db", "sqlite:///hub.db", "--source", "dir:relspool").exit_code == 0
    assert (tmp_path / "hub.db").is_file()
    assert (tmp_path / "relspool" / "inbound").is_dir()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("amqp://guest:guest@127.0.0.1/?queu=edi.in", "unknown option queu= (did you mean queue=?)"),
        ("nats://127.0.0.1:4222?stream=S&subjet=edi.in", "unknown option subjet= (did you mean subject=?)"),
        ("dir:spool?claim_timout=5", "unknown option(s) claim_timout (did you mean claim_timeout=?)"),
    ],
)
def test_a_misspelt_url_option_is_named_with_the_closest_one(tmp_path: Path, source: str, expected: str) -> None:
    """A misspelt option of a source URL is reported as unknown, with the valid option it is closest to."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db).exit_code == 0
    line = one_error_line(cli("run", "--once", "--db", db, "--source", source))
    assert expected in line
    assert "guest:guest" not in line


_WITHOUT = "import sys; sys.modules[{name!r}] = None; from edinbox.cli import main; main()"


def without(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command run in a Python where `module` cannot be imported (as when its extra is not installed)."""
    code = _WITHOUT.format(name=module)
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False, cwd=cwd, timeout=60
    )


@pytest.mark.parametrize(
    "args",
    [
        ["stats", "--db", "postgresql://hub:s3cret@127.0.0.1:1/hub"],
        ["init", "--db", "postgresql://hub:s3cret@127.0.0.1:1/hub"],
        ["purge", "--db", "postgresql://hub:s3cret@127.0.0.1:1/hub"],
        ["forget", "--yes", "a/1", "--db", "postgresql://hub:s3cret@127.0.0.1:1/hub"],
    ],
)
def test_a_missing_database_driver_names_the_extra(tmp_path: Path, args: list[str]) -> None:
    """Without psycopg every command on PostgreSQL says which extra to install, in one line, exit 1."""
    done = without("psycopg", *args, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == "Error: postgresql:// needs psycopg: pip install 'edinbox[postgres]'"


def test_a_missing_http_client_stops_run_before_any_delivery(tmp_path: Path) -> None:
    """`run --accounting http://...` without httpx exits 1 before it opens the source: the file stays in inbound/."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db, "--source", f"dir://{tmp_path / 'spool'}").exit_code == 0
    (tmp_path / "spool" / "inbound" / "invoice.edi").write_bytes(b"UNA:+.? 'UNB+UNOC:3+A+B+261202:1030+1'")
    args = ["run", "--once", "--db", db, "--source", "dir:spool", "--accounting", "http://127.0.0.1:9/invoices"]
    done = without("httpx", *args, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: http:// needs httpx: pip install 'edinbox[http]'"
    assert (tmp_path / "spool" / "inbound" / "invoice.edi").exists()
    assert list((tmp_path / "spool" / "archive").iterdir()) == []


def test_a_missing_broker_driver_names_the_extra(tmp_path: Path) -> None:
    """`run` on amqp:// without aio-pika says which extra to install."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db).exit_code == 0
    done = without("aio_pika", "run", "--once", "--db", db, "--source", "amqp://127.0.0.1/?queue=q", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: amqp:// needs aio_pika: pip install 'edinbox[rabbitmq]'"


def test_config_show_names_each_value_origin_with_passwords_masked(tmp_path: Path) -> None:
    """`config --show` gives each setting's value and whether it came from the file, a variable, a flag or the
    default; a database password never shows."""
    (tmp_path / "hub.toml").write_text('[hub]\nbatch_size = 7\ntable = "edi.inbox"\n[routes]\nDESADV = "bypass"\n')
    env = {"EDINBOX_TABLE": "from_env", "EDINBOX_LEASE": "2m"}
    result = cli(
        "config", "--config", str(tmp_path / "hub.toml"), "--db", "postgresql://hub:s3cret@db/hub", "--json", env=env
    )
    assert result.exit_code == 0, result.output
    rows = {row["setting"]: (row["value"], row["origin"]) for row in json.loads(result.output)}
    assert rows["db"] == ("postgresql://hub:***@db/hub", "flag")
    assert rows["table"] == ("from_env", "variable")
    assert rows["lease"] == ("2m", "variable")
    assert rows["batch_size"] == (7, "file")
    assert rows["routes.DESADV"] == ("bypass", "file")
    assert rows["horizon"] == ("7d", "default")
    assert "s3cret" not in result.output
    human = cli("config", "--show", "--db", "postgresql://hub:s3cret@db/hub")
    assert "s3cret" not in human.output
    assert any(line.split()[:1] == ["db"] and line.split()[-1] == "flag" for line in human.output.splitlines())


def test_dead_letters_are_a_setting_shown_masked_and_checked(tmp_path: Path) -> None:
    """`dead_letters` (EDINBOX_DEAD_LETTERS, --dead-letters) is shown by `config` with its password masked and
    reported by `doctor`; a destination that cannot say why a message died (a spool folder) is one line naming it."""
    db, url = f"sqlite:///{tmp_path / 'hub.db'}", "amqp://hub:s3cret@127.0.0.1/?queue=errors"
    shown = cli("config", "--json", env={"EDINBOX_DEAD_LETTERS": url})
    rows = {row["setting"]: (row["value"], row["origin"]) for row in json.loads(shown.output)}
    assert rows["dead_letters"] == ("amqp://hub:***@127.0.0.1/?queue=errors", "variable")
    assert cli("init", "--db", db).exit_code == 0
    doctor = cli("doctor", "--db", db, "--dead-letters", url, "--json")
    checks = {row["check"]: (row["status"], row["detail"]) for row in json.loads(doctor.output)}
    assert checks["dead letters"][0] == "ok"
    assert "amqp://hub:***@127.0.0.1/?queue=errors" in checks["dead letters"][1]
    assert "s3cret" not in shown.output + doctor.output
    refused = one_error_line(cli("run", "--db", db, "--dead-letters", f"dir://{tmp_path}"))
    assert "--dead-letters" in refused
    assert "cannot carry" in refused


def test_config_example_loads_back_as_the_defaults(tmp_path: Path) -> None:
    """The commented hub.toml of `config --example` is generated from the model: every setting is in it, and
    loading it gives exactly the defaults."""
    result = cli("config", "--example")
    assert result.exit_code == 0
    path = tmp_path / "hub.toml"
    path.write_text(result.output)
    for name in HubConfig.model_fields:
        assert f"\n{name} = " in result.output or name in ("routes", "partners")
    assert '\n# [partners."ZZ:ACME"]\n' in result.output  # an agreement's keys, commented: none by default
    assert load_settings(path).config == HubConfig()
    assert set(load_settings(path).origins.values()) == {"file"}


def test_stats_of_a_consumer_without_rows_says_so(tmp_path: Path) -> None:
    """`stats --consumer nobody` prints its zeros and one note on stderr that the consumer has no rows; exit 0."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db).exit_code == 0
    done = subprocess.run(
        [sys.executable, "-m", "edinbox", "stats", "--db", db, "--consumer", "nobody", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["received"] == 0
    assert done.stderr.strip() == "note: consumer 'nobody' has no rows in inbox (is --consumer right?)"


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_mixed_case_table_names_work_in_stats_and_doctor(
    tmp_path: Path, request: pytest.FixtureRequest, dialect: str
) -> None:
    """`--table Edi.Inbox` (PostgreSQL) or `--table EdiInbox` (SQLite) works in init, stats and doctor."""
    if dialect == "sqlite":
        db, table, schema = f"sqlite:///{tmp_path / 'hub.db'}", "EdiInbox", ""
    else:
        db, schema = request.getfixturevalue("postgres_url"), "Edi" + request.getfixturevalue("unique_name")
        table = f"{schema}.Inbox"
    try:
        assert cli("init", "--db", db, "--table", table).exit_code == 0
        stats = cli("stats", "--db", db, "--table", table, "--json")
        assert stats.exit_code == 0, stats.output
        doctor = cli("doctor", "--db", db, "--table", table, "--json")
        assert doctor.exit_code == 0, doctor.output
        rows = {row["check"]: row["status"] for row in json.loads(doctor.output)}
        assert rows.pop("partners") == "warn"  # no [partners]: every sender gets in
        assert set(rows.values()) == {"ok"}
    finally:
        if schema:
            import psycopg
            from psycopg import sql

            with psycopg.connect(db, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_the_library_names_the_extra_too(tmp_path: Path) -> None:
    """`Inbox("postgresql://...")` without psycopg raises ConfigurationError naming the extra, not
    ModuleNotFoundError."""
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from edinbox import ConfigurationError, Inbox\n"
        "try:\n"
        "    Inbox('postgresql://hub@127.0.0.1:1/hub', consumer='c')\n"
        "except ConfigurationError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.stdout.strip() == "postgresql:// needs psycopg: pip install 'edinbox[postgres]'", done.stderr


def test_doctor_only_looks_at_an_existing_spool_folder(tmp_path: Path) -> None:
    """`doctor --source dir:...` on an existing folder reports it and creates nothing in it (no inbound/, no claim
    folder), as every read-only command."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db).exit_code == 0
    spool = tmp_path / "spool"
    spool.mkdir()
    result = cli("doctor", "--db", db, "--source", f"dir://{spool}", "--json")
    assert result.exit_code == 0, result.output
    assert {row["check"]: row["status"] for row in json.loads(result.output)}["source"] == "ok"
    assert list(spool.iterdir()) == []
