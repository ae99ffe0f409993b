"""The command on the install `make demo` makes (the `cli` extra and nothing else): every module of the command line
and the hub loads without another extra's driver, and the hub's own commands run end to end on SQLite and a spool."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

EXTRA_MODULES = {
    "postgres": ("psycopg", "psycopg_pool"),
    "mysql": ("pymysql", "asyncmy"),
    "rabbitmq": ("aio_pika",),
    "nats": ("nats",),
    "redis": ("redis",),
    "kafka": ("confluent_kafka",),
    "faststream": ("faststream",),
    "sqlalchemy": ("sqlalchemy",),
    "django": ("django",),
    "http": ("httpx", "h11"),
    "metrics": ("prometheus_client",),
    "otel": ("opentelemetry",),
    "console": ("starlette", "jinja2", "uvicorn", "multipart", "python_multipart"),
    "sftp": ("asyncssh",),
    "as2": ("cryptography", "asn1crypto", "h11", "httpx"),
}
"""The top-level modules each extra other than `cli` installs (what a `cli`-only install lacks)."""

ABSENT = sorted({module for modules in EXTRA_MODULES.values() for module in modules})

OWN_EXTRA = {"edinbox.hub.demo._http_server": "http", "edinbox.hub.demo.accounting_service": "http"}
"""Modules of the hub that are an extra's by design, and the extra their import error names."""

PRELUDE = f"import sys\nfor name in {ABSENT!r}:\n    sys.modules[name] = None\n"
"""Python run first in each subprocess: every other extra's module made unimportable, as on a `cli`-only install."""

INVOIC = (
    "UNB+UNOC:3+4000001000005:14+4000002000002:14+261130:1205+INV0000000905'UNH+1+INVOIC:D:96A:UN:EAN008'"
    "BGM+380+INV-905+9'DTM+137:20261130:102'NAD+SU+4000001000005::9++ACME GMBH'NAD+BY+4000002000002::9++HUB CO AG'"
    "CUX+2:EUR:4'LIN+1++W-1:EN'QTY+47:2'MOA+203:100.00'PRI+AAA:50.00'UNS+S'MOA+77:119.00'MOA+176:19.00'"
    "UNT+14+1'UNZ+1+INV0000000905'"
)
"""One EDIFACT invoice with its trailer, as a partner sends it."""


def _lean(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` in a new interpreter in which no extra but `cli` can be imported."""
    return subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, cwd=cwd, check=False)


def _edinbox(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `edinbox ARGS` on a `cli`-only install."""
    code = f"from edinbox.cli import main\nmain({list(args)!r}, prog_name='edinbox')"
    return _lean(code, cwd)


def test_the_list_of_extras_is_every_extra_but_cli() -> None:
    """The modules made absent here stand for every extra of pyproject.toml except `cli` and `all`."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRA_MODULES) == set(extras) - {"cli", "all"}


def test_every_command_and_hub_module_imports_without_other_extras(tmp_path: Path) -> None:
    """Each module of `edinbox.cli` and `edinbox.hub` loads with only the `cli` extra installed; the demo's
    accounting service, the `http` extra's, says in one line which extra to install."""
    code = (
        "import importlib, json, pkgutil, edinbox, edinbox.cli, edinbox.hub\n"
        "failed = {}\n"
        "for package in (edinbox.cli, edinbox.hub):\n"
        "    for module in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        if module.name.endswith('__main__'):  # runs the command\n"
        "            continue\n"
        "        try:\n"
        "            importlib.import_module(module.name)\n"
        "        except (ImportError, edinbox.ConfigurationError) as exc:\n"
        "            failed[module.name] = str(exc)\n"
        "print(json.dumps(failed))\n"
    )
    done = _lean(code, tmp_path)
    assert done.returncode == 0, done.stderr
    failed = json.loads(done.stdout)
    assert set(failed) == set(OWN_EXTRA), failed
    for module, extra in OWN_EXTRA.items():
        assert f"pip install 'edinbox[{extra}]'" in failed[module]


@pytest.mark.parametrize("command", ["--help", "run --help", "console --help", "demo --help"])
def test_help_works_without_other_extras(tmp_path: Path, command: str) -> None:
    """`edinbox --help` and the help of the hub, the console and the demo print usage, no traceback."""
    done = _edinbox(tmp_path, *command.split())
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: edinbox")
    assert "Traceback" not in done.stderr


def test_the_hub_runs_on_sqlite_and_a_spool_without_other_extras(tmp_path: Path) -> None:
    """init, publish, run --once and stats work with only the `cli` extra: the interchange becomes one invoice."""
    db, spool = f"sqlite:///{tmp_path / 'hub.db'}", f"dir://{tmp_path / 'spool'}"
    (tmp_path / "one.edi").write_text(INVOIC)
    steps = [
        ("init", "--db", db, "--source", spool),
        ("publish", "--to", spool, str(tmp_path / "one.edi")),
        ("run", "--once", "--idle-timeout", "0.2", "--db", db, "--source", spool),
    ]
    for step in steps:
        done = _edinbox(tmp_path, *step)
        assert done.returncode == 0, (step, done.stderr)
    stats = _edinbox(tmp_path, "stats", "--db", db, "--json")
    assert stats.returncode == 0, stats.stderr
    totals = json.loads(stats.stdout)
    assert (totals["processed"], totals["invoices"]) == (1, 1)


def test_the_console_names_its_extra_before_saying_where_it_listens(tmp_path: Path) -> None:
    """`edinbox console` without the `console` extra exits 1 with one line naming the extra, and prints no address
    it is not going to serve."""
    done = _edinbox(tmp_path, "console", "--port", "18999")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == "Error: the console needs starlette: pip install 'edinbox[console]'\n"
