"""Least privilege: `edinbox init` is the only command with DDL; `run` works as a role that may only read and write."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from edinbox.hub.demo._traffic import generate
from edinbox.sources.spool import publish


def edinbox(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the command in a subprocess, with no EDINBOX_ variable from the outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    return subprocess.run(
        [sys.executable, "-m", "edinbox.cli", *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def as_user(url: str, user: str) -> str:
    """`url` with another user name (trust authentication: no password)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


@pytest.fixture
def runtime_role(postgres_url: str, unique_name: str) -> Iterator[str]:
    """A fresh LOGIN role with no privileges of its own, dropped with whatever it was granted afterwards."""
    role = f"{unique_name}_run"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    yield role
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(unique_name)))
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_runtime_role_granted_by_init_runs_the_hub_without_ddl(
    postgres_url: str, unique_name: str, runtime_role: str, tmp_path: Path
) -> None:
    """`init --grant ROLE` as the owner, then `run` as ROLE (DML only) settles traffic and creates the invoices."""
    table = ["--table", f"{unique_name}.inbox"]
    granted = edinbox("init", "--db", postgres_url, *table, "--grant", runtime_role)
    assert granted.returncode == 0, granted.stderr
    assert f"granted {runtime_role}" in granted.stdout
    spool = tmp_path / "spool"
    traffic = generate(30, duplicate_rate=0.3, seed=4)
    asyncio.run(publish(f"dir://{spool}", traffic.files))
    runtime = as_user(postgres_url, runtime_role)
    done = edinbox("run", "--db", runtime, *table, "--source", f"dir://{spool}", "--once", "--idle-timeout", "0.3")
    assert done.returncode == 0, done.stderr
    assert "permission denied" not in done.stderr
    stats = edinbox("stats", "--db", runtime, *table, "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["invoices"] == traffic.invoices
    with psycopg.connect(postgres_url) as conn:
        may_create = conn.execute("SELECT has_schema_privilege(%s, %s, 'CREATE')", (runtime_role, unique_name))
        assert may_create.fetchone() == (False,)  # exactly what run needs: no DDL


def test_run_against_an_empty_database_names_init_and_exits_1(
    postgres_url: str, unique_name: str, tmp_path: Path
) -> None:
    """`run` on a database without the hub's schema says in one line to run `edinbox init`, exits 1, creates nothing."""
    (tmp_path / "spool").mkdir()
    done = edinbox(
        "run", "--db", postgres_url, "--table", f"{unique_name}.inbox", "--source", f"dir://{tmp_path}/spool", "--once"
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "edinbox init" in lines[0]
    assert "spool" not in lines[0]
    with psycopg.connect(postgres_url) as conn:
        found = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (unique_name,)).fetchone()
    assert found == (0,)


def test_run_names_init_when_only_the_hub_tables_are_missing(tmp_path: Path) -> None:
    """A journal without the hub's tables (created by the library alone) is incomplete for `run`: init is named."""
    import sqlite3

    from edinbox import Inbox

    db = tmp_path / "hub.db"
    with Inbox(f"sqlite:///{db}", consumer="accounting") as inbox:
        inbox.create_schema()
    (tmp_path / "spool").mkdir()
    done = edinbox("run", "--db", f"sqlite:///{db}", "--source", f"dir://{tmp_path / 'spool'}", "--once")
    assert done.returncode == 1
    assert "application 'hub' has no tables" in done.stderr
    assert "edinbox init" in done.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'edinbox_hub_invoices'").fetchone() == (0,)


@pytest.mark.parametrize("usage", [False, True], ids=["no-grant", "schema-usage-only"])
def test_run_as_a_role_without_its_grants_exits_1_naming_the_grant(
    postgres_url: str, unique_name: str, runtime_role: str, tmp_path: Path, usage: bool
) -> None:
    """A role that may not use the schema or write the tables is a configuration error at start (exit 1), which
    doctor reports too, not an outage to wait out."""
    table = ["--table", f"{unique_name}.inbox"]
    assert edinbox("init", "--db", postgres_url, *table).returncode == 0
    if usage:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(*map(sql.Identifier, (unique_name, runtime_role)))
            )
    runtime = as_user(postgres_url, runtime_role)
    (tmp_path / "spool").mkdir()
    done = edinbox("run", "--db", runtime, *table, "--source", f"dir://{tmp_path / 'spool'}", "--once")
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "permission denied" in line
    assert "init --grant" in line
    doctor = edinbox("doctor", "--db", runtime, *table)
    assert doctor.returncode == 1


def test_grant_on_sqlite_is_refused_in_one_line(tmp_path: Path) -> None:
    """SQLite has no roles: `init --grant` says so and exits 1 (the schema itself is still created)."""
    done = edinbox("init", "--db", f"sqlite:///{tmp_path / 'hub.db'}", "--grant", "hub_runtime")
    assert done.returncode == 1
    assert "SQLite has no roles" in done.stderr
