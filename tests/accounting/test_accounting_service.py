"""The accounting service over real HTTP: one invoice per Idempotency-Key, whatever the retries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from edinbox.hub.demo.accounting_service import AccountingService

INVOICE = {"seller": "ACME", "number": "INV-1", "kind": "invoice", "issue_date": "2026-11-30", "total": "119.00"}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[AccountingService]:
    """The service on a free loopback port, its invoices in a fresh SQLite file."""
    with AccountingService(tmp_path / "accounting.db") as running:
        yield running


def post(service: AccountingService, body: object, key: str | None) -> httpx.Response:
    """POST an invoice (a dict as JSON, bytes as they are) with an optional Idempotency-Key."""
    headers = {"Idempotency-Key": key} if key is not None else {}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(service.url, content=content, headers={**headers, "Content-Type": "application/json"})


def test_same_key_returns_the_first_response_and_creates_one_invoice(service: AccountingService) -> None:
    """A retried POST with the same key and body answers the first response, flagged replayed, and creates nothing."""
    first = post(service, INVOICE, "k-1")
    again = post(service, INVOICE, "k-1")
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json() == {"id": 1, "created": True}
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"
    listed = httpx.get(service.url).json()
    assert [(i["id"], i["number"]) for i in listed] == [(1, "INV-1")]


def test_same_key_with_another_body_is_422(service: AccountingService) -> None:
    """Reusing a key for a different invoice is refused with 422 and changes nothing."""
    assert post(service, INVOICE, "k-1").status_code == 201
    other = post(service, {**INVOICE, "total": "120.00"}, "k-1")
    assert other.status_code == 422
    assert "another body" in other.json()["error"]
    assert [i["total"] for i in service.invoices()] == ["119.00"]


def test_bad_requests_are_400_and_create_nothing(service: AccountingService) -> None:
    """No key, a non-JSON body or a missing field is a 400 naming the problem, and nothing is stored."""
    assert post(service, INVOICE, None).status_code == 400
    broken = post(service, b"{not json", "k-2")
    assert broken.status_code == 400
    assert "not JSON" in broken.json()["error"]
    missing = post(service, {"seller": "ACME"}, "k-3")
    assert missing.status_code == 400
    assert "number" in missing.json()["error"]
    assert service.invoices() == []
    assert post(service, INVOICE, "k-3").status_code == 201  # a refused request does not burn its key


def test_the_same_invoice_under_another_key_is_409_with_the_existing_id(service: AccountingService) -> None:
    """A partner re-sending an invoice in a new interchange (new key) gets 409 and the first invoice's id."""
    assert post(service, INVOICE, "k-1").json() == {"id": 1, "created": True}
    resent = post(service, INVOICE, "k-2")
    assert resent.status_code == 409
    assert resent.json() == {"id": 1, "created": False}
    assert len(service.invoices()) == 1


def test_concurrent_requests_with_one_key_create_one_invoice(service: AccountingService) -> None:
    """Eight simultaneous POSTs with one key: one invoice, and every caller gets the same answer."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda _: post(service, INVOICE, "same"), range(8)))
    assert {(a.status_code, a.text) for a in answers} == {(201, json.dumps({"id": 1, "created": True}))}
    assert sum(a.headers.get("Idempotent-Replayed") == "true" for a in answers) == 7
    assert len(service.invoices()) == 1


def test_the_documented_command_serves_until_stopped(tmp_path: Path) -> None:
    """`python -m edinbox.hub.demo.accounting_service --db ... --port 0`, its token in EDINBOX_ACCOUNTING_TOKEN, prints
    its URL, serves on it with the token only, and stops on SIGTERM with status 0."""
    import os
    import subprocess
    import sys

    token = "t0ken-from-the-environment"
    process = subprocess.Popen(
        [sys.executable, "-m", "edinbox.hub.demo.accounting_service", "--db", str(tmp_path / "a.db"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "EDINBOX_ACCOUNTING_TOKEN": token},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = line.split()[3]
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/invoices")
        assert token not in line
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx.post(url, json=INVOICE, headers={"Idempotency-Key": "cli"}).status_code == 401
        answer = httpx.post(url, json=INVOICE, headers={**auth, "Idempotency-Key": "cli"})
        assert answer.status_code == 201
        assert [i["number"] for i in httpx.get(url, headers=auth).json()] == ["INV-1"]
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


@pytest.mark.parametrize(
    ("token_file", "variable", "says"),
    [
        (None, None, "a token is required: --token-file PATH or EDINBOX_ACCOUNTING_TOKEN"),
        ("short", None, "must be 16-4096 visible ASCII characters"),
        (None, "has a space in the middle", "must be 16-4096 visible ASCII characters"),
        ("missing", None, "cannot read the accounting token file"),
    ],
)
def test_the_command_refuses_to_start_without_a_usable_token(
    tmp_path: Path, token_file: str | None, variable: str | None, says: str
) -> None:
    """No token, a weak one or an unreadable token file: exit 1 with one line saying so, never quoting the token."""
    import os
    import subprocess
    import sys

    args = [sys.executable, "-m", "edinbox.hub.demo.accounting_service", "--db", str(tmp_path / "a.db"), "--port", "0"]
    if token_file is not None:
        path = tmp_path / token_file
        if token_file != "missing":
            path.write_text(token_file + "\n")
        args += ["--token-file", str(path)]
    env = {k: v for k, v in os.environ.items() if k != "EDINBOX_ACCOUNTING_TOKEN"}
    if variable is not None:
        env["EDINBOX_ACCOUNTING_TOKEN"] = variable
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=30, check=False)
    assert done.returncode == 1
    assert says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    if variable is not None:
        assert variable not in done.stderr


def test_a_token_file_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """The hub's accounting token file given as a FIFO is refused at once, as the console's and the settings file
    are (opening it would wait for a writer for ever)."""
    import os

    from edinbox import ConfigurationError
    from edinbox.hub.sinks._http import read_token

    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    with ThreadPoolExecutor(1) as pool:
        read = pool.submit(read_token, fifo)
        try:
            error = read.exception(timeout=5)
        finally:
            if not read.done():  # it blocked: a writer lets it go, so the test fails instead of hanging
                with open(fifo, "wb"):
                    pass
    assert isinstance(error, ConfigurationError)
    assert "not a regular file" in str(error)
