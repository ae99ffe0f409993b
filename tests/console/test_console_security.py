"""The console's access rules without a browser: loopback unless a token is given, and the token on every page."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from edinbox._errors import ConfigurationError
from edinbox.console import check_bind, create_app
from edinbox.hub import HubConfig
from edinbox.hub._ops import init


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::", "example.com"])  # noqa: S104 - refused binds
def test_a_non_loopback_bind_needs_a_token(host: str) -> None:
    """Any address but loopback is refused without a token, and allowed with one."""
    with pytest.raises(ConfigurationError, match="--token"):
        check_bind(host, None)
    check_bind(host, "s3cret")


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_binds_need_no_token(host: str) -> None:
    """Loopback addresses serve without a token."""
    check_bind(host, None)


def refusal(*args: str) -> str:
    """Run `edinbox console` with `args`, which must exit 1 with one line on stderr; that line."""
    proc = subprocess.run(
        [sys.executable, "-m", "edinbox.cli", "console", *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1
    return proc.stderr


def test_console_command_refuses_to_start_on_all_interfaces_without_a_token(tmp_path: Path) -> None:
    """`edinbox console --host 0.0.0.0` without --token exits 1 with one line naming --token, serving nothing."""
    assert "--token" in refusal("--db", f"sqlite:///{tmp_path}/h.db", "--host", "0.0.0.0")  # noqa: S104


def test_with_a_token_every_page_asks_for_it(tmp_path: Path) -> None:
    """With a token: pages redirect to the login, a wrong token is refused, the right one (form or bearer) opens."""
    config = HubConfig(db=f"sqlite:///{tmp_path / 'h.db'}")
    asyncio.run(init(config))
    with TestClient(create_app(config, token="s3cret"), follow_redirects=False) as client:
        assert client.get("/").status_code == 303
        assert client.get("/").headers["location"] == "/login"
        assert client.post("/action", data={"action": "forget", "key": "a/b"}).status_code == 401
        assert client.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        login = client.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', login.text)
        assert csrf is not None
        wrong = client.post("/login", data={"csrf": csrf.group(1), "token": "guess"})
        assert wrong.status_code == 401
        right = client.post("/login", data={"csrf": csrf.group(1), "token": "s3cret"})
        assert right.status_code == 303
        assert client.get("/").status_code == 200
        assert client.get("/dashboard").status_code == 200


def test_console_command_refuses_a_database_without_the_schema(tmp_path: Path) -> None:
    """`edinbox console` on a database `init` never prepared exits 1 with one line naming `edinbox init`."""
    assert "edinbox init" in refusal("--db", f"sqlite:///{tmp_path}/empty.db")
