"""A small real accounting service for the demo and tests: invoices in SQLite, behind an `Idempotency-Key` header.

`POST /invoices` with a JSON invoice and an `Idempotency-Key` header creates the invoice and answers 201 with its
id. The same key again answers the first response (with `Idempotent-Replayed: true`) and creates nothing; the same
key with another body answers 422. An invoice already created under another key (same seller, number, kind and
issue date) answers 409 with the existing id. `GET /invoices` lists them. Key and invoice are stored in one SQLite
transaction (`BEGIN IMMEDIATE`), so concurrent requests with one key create one invoice.

Every request needs `Authorization: Bearer <token>` (401 without it). A body that is not a JSON object, nested
deeper than 32 levels or over 1 MiB is refused (400, 413); a request that stalls is dropped after `read_timeout`
(408), an idle connection after `idle_timeout`; a burst beyond the worker pool and its queue is answered 503 with
`Retry-After`, never a reset (`edinbox.hub.demo._http_server`).

Run it with `EDINBOX_ACCOUNTING_TOKEN=... python -m edinbox.hub.demo.accounting_service --db accounting.db --port 8080`
(or `--token-file PATH`; never the token itself on the command line, where `ps` shows it).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import signal
import socket
import sqlite3
import sys
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Any

from edinbox._errors import ConfigurationError
from edinbox._hosts import is_loopback
from edinbox.hub.demo._http_server import Answer, Limits, Request, Server
from edinbox.hub.sinks import TOKEN_VARIABLE, check_token, read_token

__all__ = ["AccountingService", "Limits", "main"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS invoices (
    id INTEGER PRIMARY KEY,
    seller TEXT NOT NULL, number TEXT NOT NULL, kind TEXT NOT NULL, issue_date TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (seller, number, kind, issue_date)
);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key TEXT PRIMARY KEY,
    request_hash TEXT NOT NULL,
    status INTEGER NOT NULL,
    response TEXT NOT NULL
);
"""
_REQUIRED = ("seller", "number", "kind", "issue_date", "total")
_MAX_KEY = 255
BACKLOG = 4096
"""Connections the kernel holds ready for `accept` (capped by net.core.somaxconn): those beyond `max_connections`
wait there for a place rather than overflow it, where a client's handshake can end in a reset."""
MAX_DEPTH = 32
"""How deep a request's JSON may nest (an invoice needs 3 levels): deeper is 400, before it can exhaust the stack."""


class _Refused(Exception):
    def __init__(self, status: HTTPStatus, error: str) -> None:
        super().__init__(error)
        self.status = status
        self.error = error


def _depth(value: Any) -> int:
    """How deep `value` nests lists and objects (a scalar: 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _invoice(raw: bytes) -> dict[str, Any]:
    """The request body as an invoice, or 400 saying what is wrong."""
    try:
        body = json.loads(raw)
    except ValueError as exc:  # not JSON, not UTF-8, or an integer past Python's 4,300 digits
        raise _Refused(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {exc}") from None
    except RecursionError:
        body = None
    if body is None or _depth(body) > MAX_DEPTH:
        raise _Refused(HTTPStatus.BAD_REQUEST, f"the body nests deeper than {MAX_DEPTH} levels")
    if not isinstance(body, dict):
        raise _Refused(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
    missing = [name for name in _REQUIRED if not isinstance(body.get(name), str) or not body[name]]
    if missing:
        raise _Refused(HTTPStatus.BAD_REQUEST, f"missing or non-string fields: {', '.join(missing)}")
    return body


class AccountingService:
    """The service on `host:port` (`port=0`: any free one), serving from a background thread or this one.

    `token`: the bearer token every request must carry; without one the service only listens on loopback (the
    tests' and the demo's). `limits`: timeouts, sizes and the worker pool (`Limits`).
    """

    def __init__(
        self,
        db: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        """Create the tables in `db` if missing and bind the port; `start()` or `serve_forever()` serves."""
        if token is None and not is_loopback(host):
            raise ConfigurationError(f"the accounting service on {host} needs a token ({TOKEN_VARIABLE})")
        self.db = str(db)
        self.limits = limits or Limits()
        self._server = Server(self.handle, token=None if token is None else check_token(token), limits=self.limits)
        with closing(sqlite3.connect(self.db)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")  # one fsync per commit, and readers never wait on the writer
            conn.executescript(_SCHEMA)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, port), family=family, backlog=BACKLOG)
        self._stop: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The `POST` URL of invoices, e.g. `http://127.0.0.1:8080/invoices`."""
        host, port = self._sock.getsockname()[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/invoices"

    async def _serve(self, *, signals: bool = False) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        if signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        self._stop = (loop, stop)
        self._ready.set()
        await self._server.serve(self._sock, stop)

    def start(self) -> AccountingService:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), name="accounting", daemon=True)
        self._thread.start()
        self._ready.wait()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until SIGTERM or Ctrl-C (in the main thread) or `stop()`."""
        asyncio.run(self._serve(signals=threading.current_thread() is threading.main_thread()))

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._stop is not None:
            loop, stop = self._stop
            loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join()
        self._sock.close()

    def __enter__(self) -> AccountingService:
        """Start serving."""
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        """Stop serving."""
        self.stop()

    def handle(self, request: Request) -> Answer:
        """Answer one whole request (it runs on a worker thread): GET lists, POST creates once per key."""
        if request.path.rstrip("/") != "/invoices":
            return Answer(HTTPStatus.NOT_FOUND, {"error": "not found"})
        if request.method == "GET":
            return Answer(HTTPStatus.OK, self.invoices())
        if request.method != "POST":
            return Answer(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "GET or POST"}, (("Allow", "GET, POST"),))
        try:
            key = request.headers.get("idempotency-key", "").strip()
            if not key or len(key) > _MAX_KEY:
                raise _Refused(HTTPStatus.BAD_REQUEST, f"an Idempotency-Key header of 1-{_MAX_KEY} chars is required")
            if not request.body:
                raise _Refused(HTTPStatus.BAD_REQUEST, "a JSON body is required")
            status, response, replayed = self.create(key, request.body)
        except _Refused as refused:
            return Answer(refused.status, {"error": refused.error})
        return Answer(status, response, (("Idempotent-Replayed", "true"),) if replayed else ())

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.db, timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    def create(self, key: str, raw: bytes) -> tuple[HTTPStatus, dict[str, Any], bool]:
        """Create the invoice `raw` under `key`; return (status, response, replayed)."""
        digest = hashlib.sha256(raw).hexdigest()
        with self._transaction() as conn:
            found = conn.execute(
                "SELECT request_hash, status, response FROM idempotency_keys WHERE key = ?", (key,)
            ).fetchone()
            if found is not None:
                if found[0] != digest:
                    raise _Refused(HTTPStatus.UNPROCESSABLE_ENTITY, "this Idempotency-Key was used with another body")
                return HTTPStatus(found[1]), json.loads(found[2]), True
            invoice = _invoice(raw)
            natural = tuple(invoice[name] for name in ("seller", "number", "kind", "issue_date"))
            cursor = conn.execute(
                "INSERT INTO invoices (seller, number, kind, issue_date, body) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (seller, number, kind, issue_date) DO NOTHING",
                (*natural, json.dumps(invoice, sort_keys=True)),
            )
            if cursor.rowcount == 1:
                status, response = HTTPStatus.CREATED, {"id": cursor.lastrowid, "created": True}
            else:
                existing = conn.execute(
                    "SELECT id FROM invoices WHERE seller = ? AND number = ? AND kind = ? AND issue_date = ?", natural
                ).fetchone()
                status, response = HTTPStatus.CONFLICT, {"id": existing[0], "created": False}
            conn.execute(
                "INSERT INTO idempotency_keys (key, request_hash, status, response) VALUES (?, ?, ?, ?)",
                (key, digest, int(status), json.dumps(response)),
            )
        return status, response, False

    def invoices(self) -> list[dict[str, Any]]:
        """Every invoice, with its id."""
        with closing(sqlite3.connect(self.db)) as conn:
            rows = conn.execute("SELECT id, body FROM invoices ORDER BY id").fetchall()
        return [{"id": row[0], **json.loads(row[1])} for row in rows]


def _limits(args: argparse.Namespace) -> Limits:
    return Limits(
        idle_timeout=args.idle_timeout,
        read_timeout=args.read_timeout,
        max_body=args.max_body,
        workers=args.workers,
        queue=args.queue,
        max_connections=args.max_connections,
    )


def main(argv: list[str] | None = None) -> None:
    """Serve the accounting service until SIGTERM or Ctrl-C; exit 1 with one line on a configuration error."""
    default = Limits()
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--db", default="accounting.db", help="SQLite file of invoices and keys")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--token-file", type=Path, help=f"a file holding the bearer token (else ${TOKEN_VARIABLE})")
    parser.add_argument("--idle-timeout", type=float, default=default.idle_timeout, help="seconds")
    parser.add_argument("--read-timeout", type=float, default=default.read_timeout, help="seconds")
    parser.add_argument("--max-body", type=int, default=default.max_body, help="bytes")
    parser.add_argument("--workers", type=int, default=default.workers, help="requests handled at once")
    parser.add_argument("--queue", type=int, default=default.queue, help="requests waiting for a worker")
    parser.add_argument("--max-connections", type=int, default=default.max_connections)
    args = parser.parse_args(argv)
    try:
        token = read_token(args.token_file) if args.token_file else os.environ.get(TOKEN_VARIABLE)
        if token is None:
            raise ConfigurationError(f"a token is required: --token-file PATH or {TOKEN_VARIABLE}")
        service = AccountingService(args.db, host=args.host, port=args.port, token=token, limits=_limits(args))
    except (ConfigurationError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(1)
    print(f"accounting service on {service.url} (invoices in {args.db})", flush=True)
    service.serve_forever()


if __name__ == "__main__":
    main()
