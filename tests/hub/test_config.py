"""The hub's configuration: TOML file, overrides, routes, durations and the fault point."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from edinbox import ConfigurationError
from edinbox.hub import HubConfig, load_config, parse_duration, parse_fault


def test_toml_file_sets_hub_and_routes(tmp_path: Path) -> None:
    """[hub] keys and [routes] entries from the file land in the config, other routes keep their defaults."""
    path = tmp_path / "hub.toml"
    path.write_text(
        '[hub]\ndb = "postgresql://hub:secret@db/hub"\nsource = "dir:///srv/edi"\nbatch_size = 5\n'
        '[routes]\northers = "bypass"\nDESADV = "bypass"\n'
    )
    config = load_config(path)
    assert (config.db, config.source, config.batch_size) == ("postgresql://hub:secret@db/hub", "dir:///srv/edi", 5)
    assert config.route("desadv") == "bypass"
    assert config.route("INVOIC") == "inbox"
    assert config.route("810") == "inbox"
    assert config.route("997") == "bypass"
    assert config.route("CONTRL") == "bypass"
    assert config.route("ORDERS") == "inbox"  # unknown types take the default route


def test_flags_override_the_file_and_unset_flags_do_not(tmp_path: Path) -> None:
    """with_overrides replaces only the values given (None means the flag was not set)."""
    path = tmp_path / "hub.toml"
    path.write_text('[hub]\nconsumer = "from-file"\nbatch_size = 7\n')
    config = load_config(path).with_overrides(consumer="from-flag", batch_size=None)
    assert (config.consumer, config.batch_size) == ("from-flag", 7)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[hub]\nbatch_size = 0\n", "batch_size"),
        ("[hub]\nunknown_key = 1\n", "unknown key 'unknown_key' in \\[hub\\]"),
        ("[hub]\nbatch_sise = 1\n", "did you mean 'batch_size'"),
        ('[route]\nINVOIC = "inbox"\n', "unknown section \\[route\\] \\(did you mean 'routes'\\?\\)"),
        ('[hub]\nbatch_size = "twenty"\n', "\\[hub\\] batch_size: expected a whole number, got 'twenty'"),
        ("[hub]\nbatch_size = 2.5\n", "\\[hub\\] batch_size: expected a whole number, got 2.5"),
        ("[hub]\nhorizon = 7\n", "\\[hub\\] horizon: expected a duration with its unit"),
        ('[hub]\nretention = "30"\n', "retention: expected a duration with its unit"),
        ("[hub]\ndb = 5\n", "db: expected text"),
        ('[routes]\nINVOIC = "teleport"\n', "\\[routes\\]: INVOIC: expected 'inbox' or 'bypass', got 'teleport'"),
        ("[hub\n", "not valid TOML"),
        ('[hub]\nnon_edi = "maybe"\n', "non_edi"),
        ('[hub]\ngive_up_after = "soon"\n', "give_up_after: expected a duration"),
    ],
)
def test_bad_configuration_is_refused_with_a_reason(tmp_path: Path, text: str, message: str) -> None:
    """A configuration that cannot work raises ConfigurationError naming the problem."""
    path = tmp_path / "hub.toml"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=message):
        load_config(path)


def test_give_up_after_comes_from_the_file_and_defaults_to_never(tmp_path: Path) -> None:
    """`give_up_after` in [hub] bounds how long the hub waits out one outage; unset, it waits for ever."""
    path = tmp_path / "hub.toml"
    path.write_text('[hub]\ngive_up_after = "10m"\n')
    assert load_config(path).give_up_after == timedelta(minutes=10)
    assert HubConfig().give_up_after is None


def test_durations_are_timedeltas_once_read(tmp_path: Path) -> None:
    """Every duration setting is a timedelta (None for "never") as soon as the settings are read, from a file, a
    keyword or an override alike, and dumps back to the text a file gives (so `config --show` and the relay child
    read what was written)."""
    path = tmp_path / "hub.toml"
    path.write_text(
        '[hub]\nretry_first = "30s"\nhorizon = "2w"\nretention = "1.5h"\nduplicate_window = "12h"\n'
        'purge_every = "off"\nlease = "90s"\ngive_up_after = "2m"\n'
    )
    config = load_config(path)
    assert (config.retry_first, config.horizon, config.retention) == (
        timedelta(seconds=30),
        timedelta(weeks=2),
        timedelta(minutes=90),
    )
    assert (config.duplicate_window, config.purge_every) == (timedelta(hours=12), None)
    assert (config.lease, config.give_up_after) == (timedelta(seconds=90), timedelta(minutes=2))
    dumped = config.model_dump()
    assert (dumped["horizon"], dumped["retention"], dumped["lease"]) == ("14d", "90m", "90s")
    assert (dumped["purge_every"], HubConfig().model_dump()["give_up_after"]) == ("", "")
    assert HubConfig(**dumped) == config
    assert config.with_overrides(retention=timedelta(days=40), horizon="3d").retention == timedelta(days=40)
    assert HubConfig(horizon=timedelta(hours=6)).horizon == timedelta(hours=6)
    for bad in ({"lease": "0s"}, {"purge_every": timedelta(0)}, {"horizon": timedelta(days=-1)}):
        with pytest.raises(ValueError, match="duration"):
            HubConfig(**bad)


def test_missing_file_is_a_configuration_error(tmp_path: Path) -> None:
    """A config path that does not exist is reported, not a traceback."""
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_config(tmp_path / "nope.toml")


def test_durations() -> None:
    """Durations need their unit (s, m, h, d, w): a bare number is refused, as anything else."""
    assert parse_duration("30d") == timedelta(days=30)
    assert parse_duration("12h") == timedelta(hours=12)
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("2w") == timedelta(weeks=2)
    for bad in ("soon", "90", "7 days", ""):
        with pytest.raises(ConfigurationError, match="with its unit"):
            parse_duration(bad)


def test_fault_spec_parsing() -> None:
    """after_commit:N (and after_send:N, relay_start:N) with N >= 1 arms the fault point; empty disarms it."""
    assert parse_fault(None) is None
    assert parse_fault("") is None
    fault = parse_fault("after_commit:3")
    assert fault is not None
    assert fault.after == 3
    relay = parse_fault("relay_start:2")
    assert relay is not None
    assert (relay.point, relay.after) == ("relay_start", 2)
    for bad in ("after_commit:0", "after_commit", "before_commit:1", "after_commit:x"):
        with pytest.raises(ConfigurationError):
            parse_fault(bad)


def test_fault_point_kills_the_process_after_the_nth_commit() -> None:
    """The armed fault point SIGKILLs the process right after the N-th commit and not before."""
    code = (
        "from edinbox.hub import parse_fault\n"
        "f = parse_fault('after_commit:2')\n"
        "for i in range(1, 4):\n"
        "    print('commit', i, flush=True)\n"
        "    f.committed()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == -9
    assert out.stdout.split("\n")[:2] == ["commit 1", "commit 2"]
    assert "commit 3" not in out.stdout


def test_default_config_is_valid() -> None:
    """The defaults describe a runnable hub on the embedded database."""
    config = HubConfig()
    assert config.db.startswith("sqlite:///")
    assert config.batch_size >= 1
