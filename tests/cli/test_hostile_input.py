"""Every command given hostile numbers and URLs: one `Error:` line and a non-zero exit, never a traceback, and never
an outage or a message charged for what is a typo in the settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from edinbox.cli import main

HUGE = "9" * 30
"""A whole number far beyond any 64-bit integer."""

LONG = "c" * 300
"""A consumer name over the limit."""

_RUN = ("run", "--once")

CASES: list[tuple[str, ...]] = [
    # the accounting API (finding 5): out of range, negative, unclosed bracket, no host, another scheme
    (*_RUN, "--accounting", "http://127.0.0.1:99999/invoices"),
    (*_RUN, "--accounting", "http://127.0.0.1:-5/invoices"),
    (*_RUN, "--accounting", "http://[::1:9/"),
    (*_RUN, "--accounting", "http:///invoices"),
    (*_RUN, "--accounting", "http://u:secret@/invoices"),
    (*_RUN, "--accounting", "ftp://u:secret@/invoices"),
    (*_RUN, "--accounting", "http://127.0.0.1:0/invoices"),
    (*_RUN, "--accounting", "http://bad host/invoices"),
    # the hub's own numbers
    (*_RUN, "--batch-size", "0"),
    (*_RUN, "--batch-size", "10001"),
    (*_RUN, "--batch-size", HUGE),
    (*_RUN, "--batch-size", "-1"),
    (*_RUN, "--poll-timeout", "0"),
    (*_RUN, "--poll-timeout", "1e300"),
    (*_RUN, "--poll-timeout", "nan"),
    (*_RUN, "--poll-timeout", "inf"),
    (*_RUN, "--idle-timeout", "-1"),
    (*_RUN, "--idle-timeout", "1e300"),
    (*_RUN, "--max-attempts", "0"),
    (*_RUN, "--max-attempts", HUGE),
    (*_RUN, "--horizon", "99999999999d"),
    (*_RUN, "--horizon", f"{HUGE}w"),
    (*_RUN, "--horizon", "-1d"),
    (*_RUN, "--lease", "0s"),
    (*_RUN, "--retention", "99999999999w"),
    (*_RUN, "--give-up-after", "99999999999w"),
    (*_RUN, "--purge-every", "99999999999w"),
    (*_RUN, "--purge-max-rate", "-1"),
    (*_RUN, "--purge-max-rate", "nan"),
    (*_RUN, "--max-payload", "0"),
    (*_RUN, "--max-payload", "2GiB"),
    (*_RUN, "--max-payload", f"{HUGE}TB"),
    (*_RUN, "--metrics-port", "65536"),
    (*_RUN, "--metrics-port", "-1"),
    (*_RUN, "--metrics-host", "a host"),
    (*_RUN, "--consumer", LONG),
    (*_RUN, "--consumer", "a\x1bb"),
    # source URLs (finding 6): ports, prefetch, Redis database numbers, option ranges, a missing host
    (*_RUN, "--source", "amqp://127.0.0.1:99999/?queue=q"),
    (*_RUN, "--source", "amqp://127.0.0.1/?queue=q&prefetch=0"),
    (*_RUN, "--source", "amqp://127.0.0.1/?queue=q&prefetch=65536"),
    (*_RUN, "--source", f"amqp://127.0.0.1/?queue=q&prefetch={HUGE}"),
    (*_RUN, "--source", "amqp://127.0.0.1/?queue=q&prefetch=1e3"),
    (*_RUN, "--source", "amqp://127.0.0.1/?queue=q&heartbeat=70000"),
    (*_RUN, "--source", "amqp://[::1:9/?queue=q"),
    (*_RUN, "--source", "redis://127.0.0.1:6379/99999999999?stream=s"),
    (*_RUN, "--source", "redis://127.0.0.1:6379/-1?stream=s"),
    (*_RUN, "--source", "redis://127.0.0.1:6379/x?stream=s"),
    (*_RUN, "--source", "redis://127.0.0.1:70000/0?stream=s"),
    (*_RUN, "--source", "redis://127.0.0.1:6379/0?stream=s&claim_idle=1e300"),
    (*_RUN, "--source", "nats://127.0.0.1:0?stream=s&subject=x"),
    (*_RUN, "--source", "nats://127.0.0.1:4222?stream=s&subject=x&max_ack_pending=99999999999"),
    (*_RUN, "--source", "nats://127.0.0.1:4222?stream=s&subject=x&ack_wait=inf"),
    (*_RUN, "--source", "kafka://127.0.0.1:99999?topic=t"),
    (*_RUN, "--source", "kafka://127.0.0.1:9092,127.0.0.1:-1?topic=t"),
    (*_RUN, "--source", "kafka://?topic=t"),
    (*_RUN, "--source", "kafka://127.0.0.1:9092?topic=t&mock=100000"),
    (*_RUN, "--source", "dir:///tmp?claim_timeout=1e300"),
    (*_RUN, "--source", "nowhere://127.0.0.1/"),
    # database URLs
    (*_RUN, "--db", "postgresql://postgres@127.0.0.1:99999/test"),
    (*_RUN, "--db", "postgresql://postgres@127.0.0.1:5432,127.0.0.1:0/test"),
    (*_RUN, "--db", "postgresql://postgres@[::1/test"),
    (*_RUN, "--db", "mysql://root@127.0.0.1:0/test"),
    (*_RUN, "--db", "postgresql:///test?host=127.0.0.1&port=99999"),
    (*_RUN, "--db", "postgresql://postgres@127.0.0.1/test?bogus=1"),
    (*_RUN, "--db", "postgresql://postgres@127.0.0.1/test?connect_timeout=soon"),
    # the operator's commands
    ("list", "--limit", "0"),
    ("list", "--limit", "100001"),
    ("list", "--limit", HUGE),
    ("purge", "--older-than", "99999999999w"),
    ("purge", "--older-than", f"{HUGE}d"),
    ("purge", "--batch-size", HUGE),
    ("purge", "--max-rate", "0"),
    ("show", f"rejected/{HUGE}"),
    ("show", "rejected/9223372036854775808"),
    ("requeue", f"rejected/{HUGE}"),
    ("forget", "--yes", f"rejected/{HUGE}"),
    ("replay", f"rejected/{HUGE}"),
    ("relay", "--once", "--limit", HUGE),
    ("stats", "--consumer", LONG),
    ("doctor", "--source", "kafka://127.0.0.1:99999?topic=t"),
    ("doctor", "--horizon", f"{HUGE}s"),
    ("config", "--source", "amqp://127.0.0.1:0/?queue=q"),
    ("migrate", "--db", "postgresql://postgres@127.0.0.1:65536/test"),
    ("init", "--db", "postgresql://postgres@127.0.0.1:65536/test"),
    ("demo", "--messages", HUGE),
    ("demo", "--seed", "-1"),
    ("demo", "--duplicate-rate", "2"),
    ("demo", "--duplicate-rate", "nan"),
    ("demo", "--crash-rate", "nan"),
    ("demo", "--workers", "9"),
    ("chaos", "--source", "dir:///tmp/x", "--db", "sqlite:///x.db", "--timeout", "1e300"),
    ("chaos", "--source", "dir:///tmp/x", "--db", "sqlite:///x.db", "--messages", HUGE),
    ("chaos", "--source", "dir:///tmp/x", "--db", "sqlite:///x.db", "--kill-every", "1e300"),
    ("chaos", "--source", "dir:///tmp/x", "--db", "sqlite:///x.db", "--timeout", "nan"),
    ("chaos", "--source", "dir:///tmp/x", "--db", "sqlite:///x.db", "--drain-idle", "nan"),
    ("console", "--port", "70000"),
    ("publish", "--to", "amqp://127.0.0.1:99999/?queue=q", "hub.toml"),
    ("publish", "--to", "kafka://127.0.0.1:1?topic=t&mock=0", "hub.toml"),
]


@pytest.fixture(scope="module")
def hub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a journal and a spool folder made by `edinbox init`, and a settings file naming both."""
    folder = tmp_path_factory.mktemp("hostile")
    db, source = f"sqlite:///{folder / 'hub.db'}", f"dir://{folder / 'spool'}"
    result = CliRunner().invoke(main, ["init", "--db", db, "--source", source], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (folder / "hub.toml").write_text(f'[hub]\ndb = "{db}"\nsource = "{source}"\n')
    return folder


def refused(result: Result) -> str:
    """The one `Error:` line of a command that refused its input: exit 1, no traceback, nothing else said."""
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    return errors[0]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a)[:70] for a in CASES])
def test_a_hostile_number_or_url_is_one_error_line(hub_dir: Path, args: tuple[str, ...]) -> None:
    """Each command refuses an out-of-range number or a malformed URL with exit 1 and one `Error:` line (a click
    usage error included), never a traceback, before it touches a database or a broker."""
    here = Path.cwd()
    os.chdir(hub_dir)  # `publish` names a file of this folder; `demo` and `chaos` never get to write here
    try:
        command, *rest = args
        takes_config = command not in ("demo", "chaos", "publish")
        config = ["--config", str(hub_dir / "hub.toml")] if takes_config else []
        result = CliRunner().invoke(main, [command, *config, *rest], env={"EDINBOX_DB": None})
    finally:
        os.chdir(here)
    line = refused(result)
    assert "secret" not in result.output, line


def test_an_accounting_url_with_no_host_is_not_waited_out(hub_dir: Path) -> None:
    """`http:///x` was an outage that never ended: it is a configuration error naming the setting."""
    result = CliRunner().invoke(
        main, ["run", "--once", "--config", str(hub_dir / "hub.toml"), "--accounting", "http:///x"]
    )
    assert (
        refused(result)
        == "Error: --accounting: the accounting URL 'http:///x': a host is required (scheme://host:port/...)"
    )
