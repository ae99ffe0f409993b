"""Settings are checked before anything runs: URLs parsed and range-checked without I/O, the settings file read
safely, and a Kafka or Redis source that cannot work said so by `doctor` and `run` instead of looking idle."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from edinbox import ConfigurationError
from edinbox._urls import Address, addresses
from edinbox.cli import main
from edinbox.hub import HubConfig
from servers import free_port
from services import require_service


def edinbox(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the command in a subprocess, as an operator would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    return subprocess.run(
        [sys.executable, "-m", "edinbox.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def one_error(output: str) -> str:
    """The one `Error:` line of `output`, which holds no traceback."""
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, output
    return errors[0]


def cli(*args: str) -> Result:
    """Run a command in-process."""
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(
    ("url", "options", "expected"),
    [
        ("postgresql://user:PW@/db?host=/run/postgresql", {"many": True}, []),
        ("postgresql://u@a:5432,b:5433/db", {"many": True}, [Address("a", 5432), Address("b", 5433)]),
        ("redis://:PW@/0", {}, []),
        ("amqp://u:p%40ss@rabbit:5672/%2f", {}, [Address("rabbit", 5672)]),
        ("http://[::1]:8080/invoices", {"host": True}, [Address("[::1]", 8080)]),
        ("https://bücher.example/x", {"host": True}, [Address("bücher.example", None)]),
        ("kafka://k1:9092,k2:9093", {"many": True, "host": True}, [Address("k1", 9092), Address("k2", 9093)]),
    ],
)
def test_well_formed_addresses_are_read(url: str, options: dict[str, bool], expected: list[Address]) -> None:
    """Hosts and ports a driver accepts (libpq's socket form, several hosts, IPv6, a host-less Redis URL) pass."""
    assert addresses(url, what="URL", **options) == expected


@pytest.mark.parametrize(
    ("url", "options", "expected"),
    [
        ("http://h:99999/x", {}, "the port '99999' is not a number from 1 to 65535"),
        ("http://h:-5/x", {}, "the port '-5' is not a number from 1 to 65535"),
        ("http://h:0/x", {}, "the port '0' is not a number from 1 to 65535"),
        ("http://h:/x", {}, "the port '' is not a number from 1 to 65535"),
        ("http://[::1:9/", {}, "Invalid IPv6 URL"),
        ("http://[zz]/", {}, "'zz' does not appear to be an IPv4 or IPv6 address"),
        ("http:///x", {"host": True}, "a host is required"),
        ("http://u:p w@/x", {}, "a space or control character before the path must be percent-encoded"),
        ("kafka://a:1,b:65536", {"many": True}, "the port '65536'"),
        ("http://a,b/x", {}, "'a,b' is not a host name"),
    ],
)
def test_malformed_addresses_are_configuration_errors(url: str, options: dict[str, bool], expected: str) -> None:
    """A port out of 1-65535, a broken IPv6 literal, a missing host where one is required or a raw space is a
    ConfigurationError saying which, with the user and password never shown."""
    with pytest.raises(ConfigurationError, match="URL") as caught:
        addresses(url, what="URL", **options)
    assert expected in str(caught.value)
    assert "p w" not in str(caught.value)


def test_a_byte_order_mark_in_the_settings_file_is_accepted(tmp_path: Path) -> None:
    """A hub.toml saved with a UTF-8 byte-order mark (as some editors do) is read like one without."""
    path = tmp_path / "hub.toml"
    path.write_bytes(b"\xef\xbb\xbf[hub]\nbatch_size = 7\n")
    result = cli("config", "--config", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert '"setting": "batch_size", "value": 7, "origin": "file"' in result.output


def test_invalid_utf8_in_the_settings_file_names_the_file_and_the_byte(tmp_path: Path) -> None:
    """A settings file that is not UTF-8 is one line naming the file and the offset of the bad byte."""
    path = tmp_path / "hub.toml"
    path.write_bytes(b'[hub]\nconsumer = "a\xff"\n')
    result = cli("config", "--config", str(path))
    assert result.exit_code == 1
    assert one_error(result.output) == f"Error: {path} is not UTF-8: invalid byte at offset 19"


def test_a_fifo_as_the_settings_file_is_refused_without_blocking(tmp_path: Path) -> None:
    """`--config` naming a FIFO (or any file that is not a regular one) is refused at once: opening it would wait
    for a writer for ever."""
    fifo = tmp_path / "hub.toml"
    os.mkfifo(fifo)
    done = edinbox("config", "--config", str(fifo), timeout=60)
    assert done.returncode == 1
    assert one_error(done.stderr) == f"Error: the configuration {fifo} is not a regular file"


def test_an_unknown_key_in_an_agreement_names_the_key_and_the_agreement(tmp_path: Path) -> None:
    """A misspelt key in `[partners."..."]` is one line naming the agreement and the closest key, not a Python
    `__init__()` error."""
    path = tmp_path / "hub.toml"
    path.write_text('[partners."ZZ:ACME"]\noutbond = "dir:///srv/out"\n')
    result = cli("config", "--config", str(path))
    assert result.exit_code == 1
    line = one_error(result.output)
    assert line == f"Error: {path} [partners]: ZZ:ACME: unknown key 'outbond' (did you mean 'outbound'?)"
    assert "__init__" not in result.output


def test_an_outbound_destination_is_checked_with_the_settings() -> None:
    """A partner's outbound URL with a port out of range is refused when the settings are read, not when the
    relay first sends to it."""
    with pytest.raises(ConfigurationError, match=r"partners: ZZ:ACME: source URL .* the port '99999'"):
        HubConfig(partners={"ZZ:ACME": {"outbound": "amqp://127.0.0.1:99999/?queue=acks.{id}"}})


def test_the_source_is_checked_for_this_consumer_and_batch_size() -> None:
    """The source URL is checked as the hub would open it: a consumer that cannot name a Kafka group is caught,
    and the largest batch size still gets a default prefetch AMQP can carry."""
    with pytest.raises(ConfigurationError, match=r"source: .*cannot be a group name"):
        HubConfig(source="kafka://127.0.0.1:9092?topic=t", consumer="two words")
    config = HubConfig(source="amqp://127.0.0.1/?queue=q", batch_size=10000)
    assert config.batch_size == 10000


def test_an_accounting_url_typo_stops_run_at_start_with_nothing_parked(tmp_path: Path) -> None:
    """`run --accounting http://...:99999/...` used to start, fail every invoice five times and park it dead: it now
    exits 1 with one line before it receives anything, and the delivery stays in the spool."""
    db, spool = f"sqlite:///{tmp_path / 'hub.db'}", tmp_path / "spool"
    assert cli("init", "--db", db, "--source", f"dir://{spool}").exit_code == 0
    (spool / "inbound" / "one.edi").write_bytes(b"UNA:+.? 'UNB+UNOC:3+ACME+HUB+240101:1200+1'UNZ+0+1'")
    for url in ("http://127.0.0.1:99999/invoices", "http://127.0.0.1:-5/invoices", "http://[::1:9/", "http:///x"):
        done = edinbox("run", "--once", "--db", db, "--source", f"dir://{spool}", "--accounting", url)
        assert done.returncode == 1, done.stderr
        assert one_error(done.stderr).startswith("Error: --accounting: ")
        assert "started" not in done.stderr
    assert [p.name for p in (spool / "inbound").iterdir()] == ["one.edi"]
    assert not list((spool / "rejected").iterdir())
    with sqlite3.connect(tmp_path / "hub.db") as conn:
        assert conn.execute("SELECT count(*) FROM inbox").fetchone() == (0,)


def test_doctor_says_a_kafka_source_with_no_broker_fails(tmp_path: Path) -> None:
    """`doctor --source kafka://127.0.0.1:<closed port>` said "source ok": it now asks a broker for its metadata and
    reports the source failed (exit 1)."""
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db).exit_code == 0
    done = edinbox("doctor", "--db", db, "--source", f"kafka://127.0.0.1:{free_port()}?topic=t", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert '"check": "source", "status": "fail", "detail": "no Kafka broker answered' in done.stdout


def test_run_once_against_kafka_with_no_broker_is_an_outage_not_a_drain(tmp_path: Path) -> None:
    """`run --once` against brokers that are down exited 0 as if it had drained the topic: it now waits the outage
    out like the other sources (a `dependency-down` line) and `--give-up-after` ends it with exit 2."""
    db, spool = f"sqlite:///{tmp_path / 'hub.db'}", f"dir://{tmp_path / 'spool'}"
    assert cli("init", "--db", db, "--source", spool).exit_code == 0
    source = f"kafka://127.0.0.1:{free_port()}?topic=t"
    done = edinbox("run", "--once", "--db", db, "--source", source, "--give-up-after", "3s")
    assert done.returncode == 2, done.stderr
    assert "dependency-down dependency=source" in done.stderr
    assert one_error(done.stderr).startswith("Error: gave up after 3s: no Kafka broker answered")


def test_a_redis_database_the_server_lacks_is_a_configuration_error(tmp_path: Path) -> None:
    """A Redis database number beyond the server's (16 by default) was an outage waited out for ever: `doctor`
    reports it and `run` exits 1 with one line."""
    require_service("redis")
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db).exit_code == 0
    source = "redis://127.0.0.1:6379/999?stream=edinbox-no-such-db"
    done = edinbox("doctor", "--db", db, "--source", source)
    assert done.returncode == 1
    assert "the server has no such database number" in done.stdout
    done = edinbox("run", "--once", "--db", db, "--source", source, "--give-up-after", "30s")
    assert done.returncode == 1, done.stderr
    assert "no such database number" in one_error(done.stderr)
    assert "dependency-down" not in done.stderr


def test_a_rabbitmq_virtual_host_the_broker_lacks_is_a_configuration_error(tmp_path: Path, unique_name: str) -> None:
    """An `amqp://` URL naming a virtual host the broker does not have was an outage waited out: `run` exits 1
    with one line saying the broker refused the virtual host."""
    require_service("rabbitmq")
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    assert cli("init", "--db", db).exit_code == 0
    source = f"amqp://guest:guest@127.0.0.1:5672/{unique_name}?queue={unique_name}"
    done = edinbox("run", "--once", "--db", db, "--source", source, "--give-up-after", "30s")
    assert done.returncode == 1, done.stderr
    assert "the broker refused the virtual host" in one_error(done.stderr)
    assert "dependency-down" not in done.stderr
