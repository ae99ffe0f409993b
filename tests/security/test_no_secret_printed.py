"""Nothing leaks (finding 1 of the security review): every command, run as an operator runs it, with URLs carrying a
generated password (and Kafka secret options), prints that password in no spelling (as written, percent-encoded,
decoded, JSON-escaped) on stdout, on stderr, in its JSON, in its logs or in the console's pages; whether the servers
take the password, refuse it, or cannot be reached.

Two passwords only (one written out, one generated): each runs about fifteen commands against real servers (the pure
function is proven on thousands in test_mask.py). `run` and `console` run as processes of their own, so the lines
they log are the ones an operator reads; the others run in this process, their drivers' log records captured at
DEBUG."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from psycopg import sql

from edinbox.cli import main
from servers import free_port
from services import POSTGRES_URL, require_service

# the characters that broke masking before: URL delimiters, quotes, `%`, a blank, non-ASCII
_ALPHABET = st.sampled_from("abcdefghijkXYZ0123456789@/:?#%&;= '\"é€")
PASSWORDS = st.text(alphabet=_ALPHABET, min_size=10, max_size=16).filter(lambda p: len(set(p)) >= 6)


def spellings(password: str) -> set[str]:
    """The ways a password can be printed: as written, percent-encoded, JSON- or repr-escaped, and its tail after
    an `@` (which a parser may take for the host)."""
    found = {password, quote(password, safe=""), quote(password), json.dumps(password)[1:-1], repr(password)[1:-1]}
    tail = password.rsplit("@", 1)[-1]
    if len(tail) >= 6:
        found.add(tail)
    return found


def edinbox(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    """Run a command; everything it printed (stdout and stderr) after its exit status."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "edinbox.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})},
        check=False,
    )
    return f"-> {done.returncode} in {time.monotonic() - started:.1f} s\n{done.stdout}\n{done.stderr}"


def console(db: str, folder: Path) -> str:
    """Start `edinbox console` on a database that is down, read its start line, fetch a page (the 503 one), stop
    it; what it printed and served."""
    port = free_port()
    with subprocess.Popen(
        [sys.executable, "-m", "edinbox.cli", "console", "--db", db, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=(folder / "console.err").open("w"),
        text=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    ) as process:
        assert process.stdout is not None
        start = process.stdout.readline()
        page = ""
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
                    page = response.read().decode()
            except urllib.error.HTTPError as error:
                page = f"{error.code} {error.read().decode()}"
            except OSError:
                time.sleep(0.1)
                continue
            break
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=30)
    return f"{start}{rest}{page}{(folder / 'console.err').read_text()}"


def outputs(password: str, folder: Path) -> list[str]:
    """What every command printed, each given URLs holding `password`; the schema the commands made is dropped."""
    name = f"t{os.getpid()}_{time.monotonic_ns()}"
    try:
        return _outputs(password, folder, name)
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as pg:
            pg.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _outputs(password: str, folder: Path, name: str) -> list[str]:
    """What every command printed, each given URLs holding `password`, the journal in schema `name`."""
    encoded = quote(password, safe="")
    table = f"{name}.inbox"  # a schema of its own: the hub's tables beside it are this test's alone
    pg = f"postgresql://postgres:{encoded}@127.0.0.1:5432/test"  # trust: any password is taken
    socket_pg = f"postgresql://postgres:{password}@/test?host=/var/run/postgresql"  # as written: taken or refused
    down_pg = f"postgresql://postgres:{encoded}@127.0.0.1:1/test"
    refused_mq = f"amqp://guest:{encoded}@127.0.0.1:5672/?queue={name}&open_timeout=2"
    kafka = (
        f"kafka://127.0.0.1:1?topic={name}&group=g&security.protocol=sasl_plaintext&sasl.mechanism=PLAIN"
        f"&sasl.username=u&sasl.password={encoded}&ssl.key.password={encoded}"
    )
    spool = f"dir://{folder / 'spool'}"
    accounting = {"EDINBOX_ACCOUNTING": f"http://u:{encoded}@127.0.0.1:1/x"}  # shown by `config`
    no_host = {"EDINBOX_ACCOUNTING": f"http://u:{encoded}@/x"}  # refused: the error names it
    toml = folder / "hub.toml"
    toml.write_text(f'[hub]\ndb = {json.dumps(pg)}\nsource = {json.dumps(kafka)}\ntable = "{table}"\n')
    (folder / "one.edi").write_bytes(b"not EDI")
    printed = [edinbox("init", "--db", pg, "--table", table, "--source", spool)]
    (folder / "spool" / "inbound" / "one.edi").write_bytes(b"not EDI")
    commands: list[tuple[str, ...]] = [
        ("config", "--show", "--config", str(toml)),
        ("config", "--json", "--config", str(toml)),
        ("config", "--show", "--db", socket_pg, "--source", refused_mq),
        ("doctor", "--db", socket_pg, "--table", table, "--source", refused_mq),
        ("doctor", "--json", "--config", str(toml)),
        ("doctor", "--json", "--db", down_pg),
        ("stats", "--db", down_pg),
        ("stats", "--json", "--db", f"mysql://root:{encoded}@127.0.0.1:3306/test"),
        ("list", "--db", f"redis://:{encoded}@/0"),
        (
            "run",
            "--db",
            pg,
            "--table",
            table,
            "--source",
            spool,
            "--once",
            "--idle-timeout",
            "0.2",
            "--non-edi",
            "inbox",
        ),
        ("run", "--db", socket_pg, "--table", table, "--source", refused_mq, "--once", "--log-format", "json"),
        ("run", "--db", down_pg, "--source", spool, "--once", "--give-up-after", "1s"),
        ("run", "--db", pg, "--source", spool, "--once", "--accounting", f"http://u:{encoded}@/x"),  # no host: refused
        ("run", "--db", pg, "--table", table, "--source", kafka, "--once", "--give-up-after", "2s"),
        ("relay", "--db", pg, "--table", table, "--once", "--give-up-after", "5s"),
        ("relay", "--db", down_pg, "--once", "--give-up-after", "1s"),
        ("publish", "--to", refused_mq, "--raw", str(folder / "one.edi")),
        ("publish", "--to", kafka, "--raw", str(folder / "one.edi")),
        ("publish", "--json", "--to", f"redis://:{encoded}@127.0.0.1:1/0?stream=s", "--raw", str(folder / "one.edi")),
    ]
    slow = [c for c in commands if c[0] == "run"]  # a process of its own: the log lines `edinbox run` writes
    with ThreadPoolExecutor(4) as pool:
        done = [pool.submit(edinbox, *args) for args in slow]
        shown = pool.submit(console, down_pg, folder)
        for args in (c for c in commands if c[0] != "run"):  # in this process: quicker, the same boundaries
            result = CliRunner(env=accounting).invoke(main, list(args), catch_exceptions=False)
            printed.append(f"-> {result.exit_code}\n{result.output}")
        result = CliRunner(env=no_host).invoke(main, ["config", "--show"], catch_exceptions=False)
        printed.append(f"-> {result.exit_code}\n{result.output}")
        printed += [future.result() for future in done] + [shown.result()]
    return printed


@settings(
    max_examples=1,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each example runs every command
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(password=PASSWORDS)
@example(password="p@s/ :w0rd%zz\"'é")
def test_no_command_prints_a_password(
    password: str, tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Configured through flags, the TOML file or a variable, for a server that takes the password, refuses it or is
    down: no command prints any spelling of the password (the URLs it prints show `***`)."""
    for service in ("postgres", "rabbitmq", "mariadb"):
        require_service(service)
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        printed = outputs(password, tmp_path_factory.mktemp("leak"))
    text = "\n".join([*printed, caplog.text])
    for spelling in spellings(password):
        assert spelling not in text, f"{spelling!r} printed:\n{text}"
    assert text.count("***") >= 15, text  # the URLs were printed, masked: the commands did run
    assert "outcome=processed" in "".join(printed), printed  # the run settled the file
