"""`edinbox console` over TLS, its token read from a file: HTTPS answers, and the session cookie is `Secure` with
the `__Host-` prefix (no sibling domain can plant it), never the token."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from console.conftest import free_port
from edinbox.hub import HubConfig
from hub_ops import init

TOKEN = "a-token-from-a-file-0123456789"


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made by the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is missing")
    cert, key = folder / "console.pem", folder / "console.key"
    request = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
    subprocess.run(
        ["openssl", *request, "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def test_console_serves_tls_with_secure_session_cookies(tmp_path: Path) -> None:
    """With --certfile/--keyfile and --token-file the console serves HTTPS; the login needs the file's token (its
    line break dropped) and sets a `__Host-` cookie marked Secure that holds a signed session, not the token."""
    cert, key = _certificate(tmp_path)
    config = HubConfig(db=f"sqlite:///{tmp_path / 'h.db'}")
    asyncio.run(init(config))
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    command = [sys.executable, "-m", "edinbox", "console", "--db", config.db, "--port", str(port)]
    command += ["--token-file", str(token_file), "--certfile", str(cert), "--keyfile", str(key)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"https://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, verify=ssl.create_default_context(cafile=str(cert)), timeout=10) as client:
            deadline = time.monotonic() + 60
            while True:
                assert process.poll() is None, process.stdout.read() if process.stdout else ""
                try:
                    login = client.get("/login")
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "the console never answered over TLS"
                    time.sleep(0.3)
            first = login.headers["set-cookie"]
            assert first.startswith("__Host-edinbox_session=")
            assert "Secure" in first
            found = re.search(r'name="csrf" value="([^"]+)"', login.text)
            assert found is not None
            signed = client.post("/login", data={"csrf": found.group(1), "token": TOKEN}, follow_redirects=False)
            assert signed.status_code == 303
            cookie = signed.headers["set-cookie"]
            assert cookie.startswith("__Host-edinbox_session=")
            assert "Secure" in cookie
            assert "HttpOnly" in cookie
            assert TOKEN not in cookie
            assert client.get("/audit").status_code == 200
        with pytest.raises(httpx.TransportError):  # TLS only: plain HTTP on the port gets no page
            httpx.get(f"http://127.0.0.1:{port}/login", timeout=10)
    finally:
        process.terminate()
        process.wait(timeout=20)
