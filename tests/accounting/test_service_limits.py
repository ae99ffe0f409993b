"""The accounting service as a service on a network: a token, timeouts, bounded JSON and a pool that sheds load."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from edinbox import ConfigurationError
from edinbox.hub.demo.accounting_service import MAX_DEPTH, AccountingService, Limits

TOKEN = "a-test-token-of-some-length"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
INVOICE = {"seller": "ACME", "number": "INV-1", "kind": "invoice", "issue_date": "2026-11-30", "total": "119.00"}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[AccountingService]:
    """The service with a token and short timeouts (1 s idle, 2 s to read a request)."""
    limits = Limits(idle_timeout=1.0, read_timeout=2.0)
    with AccountingService(tmp_path / "accounting.db", token=TOKEN, limits=limits) as running:
        yield running


def post(service: AccountingService, body: object, key: str, headers: dict[str, str] | None = None) -> httpx.Response:
    """POST `body` (JSON, or bytes as they are) with the token and an Idempotency-Key."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(service.url, content=content, headers={**AUTH, "Idempotency-Key": key, **(headers or {})})


def address(service: AccountingService) -> tuple[str, int]:
    """The service's host and port."""
    url = httpx.URL(service.url)
    return url.host, url.port or 80


def stalled(service: AccountingService, *, length: int = 1000) -> socket.socket:
    """A connection that sent a POST's headers and 10 bytes of a `length`-byte body, then nothing more."""
    sock = socket.create_connection(address(service))
    head = (
        f"POST /invoices HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nIdempotency-Key: stalled\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    sock.sendall(head.encode() + b'{"seller":')
    return sock


def read_all(sock: socket.socket, *, timeout: float) -> bytes:
    """Everything the service sends on `sock` until it closes it (a reset or a timeout fails the test)."""
    sock.settimeout(timeout)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_request_without_the_token_is_refused_with_401(service: AccountingService) -> None:
    """No token, another token or another scheme: 401 with a Bearer challenge, and nothing is created or listed."""
    for headers in ({}, {"Authorization": "Bearer not-the-token-at-all"}, {"Authorization": f"Basic {TOKEN}"}):
        answer = httpx.post(service.url, json=INVOICE, headers={"Idempotency-Key": "k", **headers})
        assert answer.status_code == 401, headers
        assert answer.headers["WWW-Authenticate"] == "Bearer"
        assert httpx.get(service.url, headers=headers).status_code == 401
    assert service.invoices() == []
    assert post(service, INVOICE, "k").status_code == 201


def test_a_service_beyond_loopback_needs_a_token_and_a_weak_one_is_refused(tmp_path: Path) -> None:
    """Without a token the service binds loopback only; a token shorter than 16 characters is refused."""
    with pytest.raises(ConfigurationError, match="needs a token"):
        AccountingService(tmp_path / "a.db", host="0.0.0.0")  # noqa: S104 - what is refused
    with pytest.raises(ConfigurationError, match="16-4096"):
        AccountingService(tmp_path / "a.db", token="short")


def test_a_stalled_body_is_dropped_within_the_read_timeout_and_others_are_served(service: AccountingService) -> None:
    """A body that stops arriving gets 408 and its connection closed within the 2 s read timeout; meanwhile another
    client is served at once."""
    began = time.monotonic()
    sock = stalled(service)
    try:
        answer = post(service, INVOICE, "other")
        assert answer.status_code == 201
        assert time.monotonic() - began < 1.5
        reply = read_all(sock, timeout=10)
    finally:
        sock.close()
    assert reply.startswith(b"HTTP/1.1 408 ")
    assert 2.0 <= time.monotonic() - began < 5.0
    assert [i["number"] for i in service.invoices()] == ["INV-1"]


def test_idle_connections_are_closed_after_the_idle_timeout_and_hold_no_thread(service: AccountingService) -> None:
    """300 connections that send nothing hold no thread each, do not keep others waiting, and are closed by the
    service after its 1 s idle timeout."""
    threads = threading.active_count()
    idle = [socket.create_connection(address(service)) for _ in range(300)]
    try:
        began = time.monotonic()
        assert post(service, INVOICE, "busy").status_code == 201
        assert time.monotonic() - began < 1.0
        assert threading.active_count() <= threads + Limits().workers
        for sock in idle:
            assert read_all(sock, timeout=10) == b""  # closed by the service, quietly: no request, no answer
        assert time.monotonic() - began < 6.0
    finally:
        for sock in idle:
            sock.close()


def test_deeply_nested_json_is_400_and_the_service_lives(service: AccountingService) -> None:
    """JSON nested 100,000 deep (past Python's recursion limit) or just past the depth limit is a 400 naming the
    limit; the service then creates the next invoice."""
    deepest = b"[" * 100_000 + b"]" * 100_000
    nested: object = "x"
    for _ in range(MAX_DEPTH):
        nested = {"n": nested}
    for n, body in enumerate([deepest, json.dumps({**INVOICE, "extra": nested}).encode()]):
        answer = post(service, body, f"deep-{n}")
        assert answer.status_code == 400, answer.text
        assert f"deeper than {MAX_DEPTH} levels" in answer.json()["error"]
    assert post(service, INVOICE, "after").status_code == 201


@pytest.mark.parametrize(
    "body",
    [b'{"total": ' + b"9" * 5000 + b"}", b"\xff\xfe{}", b'{"seller": "\xc3"}', b"[1, 2", b"null"],
    ids=["5000-digit number", "UTF-16 mark", "invalid UTF-8", "truncated", "null"],
)
def test_other_unreadable_bodies_are_400_and_the_service_lives(service: AccountingService, body: bytes) -> None:
    """A number past Python's digit limit, bytes that are not UTF-8 JSON, a truncated or a non-object body: 400,
    never a 500, and the next invoice is created."""
    answer = post(service, body, "odd")
    assert answer.status_code == 400, answer.text
    assert post(service, INVOICE, "odd").status_code == 201


def test_a_body_over_the_limit_is_413_before_it_is_read(tmp_path: Path) -> None:
    """A Content-Length over `max_body` is answered 413 at once, and a chunked body that grows past it too."""
    limits = Limits(max_body=1000)
    with AccountingService(tmp_path / "a.db", token=TOKEN, limits=limits) as service:
        big = post(service, {**INVOICE, "note": "x" * 2000}, "big")
        assert big.status_code == 413
        assert "over 1000 bytes" in big.json()["error"]
        chunks = iter([json.dumps({**INVOICE, "note": "x" * 600}).encode()[:600], b"x" * 600])
        streamed = httpx.post(service.url, content=chunks, headers={**AUTH, "Idempotency-Key": "chunked"})
        assert streamed.status_code == 413
        assert post(service, INVOICE, "small").status_code == 201
        assert len(service.invoices()) == 1


def test_a_request_beyond_the_pool_is_503_with_retry_after_and_runs_nothing(tmp_path: Path) -> None:
    """One worker, no queue: while a stalled request holds the only place, another is answered 503 with
    Retry-After at once and creates nothing; once the stalled one is dropped, the next is served."""
    limits = Limits(workers=1, queue=0, read_timeout=2.0)
    with AccountingService(tmp_path / "a.db", token=TOKEN, limits=limits) as service:
        sock = stalled(service)
        try:
            time.sleep(0.3)  # the stalled request is admitted
            began = time.monotonic()
            busy = post(service, INVOICE, "busy")
            assert busy.status_code == 503
            assert busy.headers["Retry-After"] == "1"
            assert time.monotonic() - began < 1.0
            assert service.invoices() == []
            assert read_all(sock, timeout=10).startswith(b"HTTP/1.1 408 ")
        finally:
            sock.close()
        assert post(service, INVOICE, "busy").status_code == 201


def test_a_burst_of_concurrent_requests_gets_2xx_or_503_and_one_invoice_per_key(tmp_path: Path) -> None:
    """300 requests at once (100 keys, each sent 3 times) at the service in its own process, with 2 workers, a
    queue of 16 and 300 connections: every one gets 201 or 503 with Retry-After (no reset, no error), and once the
    refused ones are sent again each key has created exactly one invoice.

    The idle timeout is longer than the burst: a client that reuses a kept-alive connection just as the server
    closes it for idleness can see a reset on any HTTP/1.1 server (the client retries; the hub's sink counts it a
    transient outage)."""
    import asyncio
    import os
    import subprocess
    import sys

    command = [
        sys.executable,
        "-m",
        "edinbox.hub.demo.accounting_service",
        "--db",
        str(tmp_path / "a.db"),
        "--port",
        "0",
    ]
    limits = ["--workers", "2", "--queue", "16", "--max-connections", "300", "--idle-timeout", "30"]
    env = {**os.environ, "EDINBOX_ACCOUNTING_TOKEN": TOKEN}
    process = subprocess.Popen([*command, *limits], stdout=subprocess.PIPE, text=True, env=env)
    keys = [f"key-{n}" for n in range(100)]

    def invoice(key: str) -> dict[str, str]:
        return {**INVOICE, "number": f"INV-{key}"}

    async def burst(url: str) -> tuple[list[tuple[str, int, str | None] | BaseException], list[int]]:
        """Every key 3 times at once; then each key again, 8 at a time, until it is not refused (Retry-After)."""
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
        async with httpx.AsyncClient(limits=limits, timeout=60, headers=AUTH) as client:

            async def one(key: str) -> tuple[str, int, str | None]:
                answer = await client.post(url, json=invoice(key), headers={"Idempotency-Key": key})
                return key, answer.status_code, answer.headers.get("Retry-After")

            first = await asyncio.gather(*(one(k) for k in keys * 3), return_exceptions=True)
            places = asyncio.Semaphore(8)

            async def until_served(key: str) -> int:
                async with places:
                    while (answer := await one(key))[1] == 503:  # noqa: ASYNC110 - a client's backoff
                        await asyncio.sleep(float(answer[2] or 1))
                    return answer[1]

            return first, await asyncio.gather(*(until_served(k) for k in keys))

    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[3]
        first, again = asyncio.run(burst(url))
        errors = [r for r in first if isinstance(r, BaseException)]
        assert errors == []
        answers = [r for r in first if not isinstance(r, BaseException)]
        assert {status for _, status, _ in answers} == {201, 503}  # the pool shed some: 18 places for 300
        assert all(retry == "1" for _, status, retry in answers if status == 503)
        created = {key for key, status, _ in answers if status == 201}
        assert set(again) == {201}
        listed = httpx.get(url, headers=AUTH).json()
        assert sorted(i["number"] for i in listed) == sorted(f"INV-{k}" for k in keys)
        assert created < set(keys)
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0
