"""A small real accounting service for the demo and tests: invoices in SQLite, behind an `Idempotency-Key` header.

`POST /invoices` with a JSON invoice and an `Idempotency-Key` header creates the invoice and answers 201 with its
id. The same key again answers the first response (with `Idempotent-Replayed: true`) and creates nothing; the same
key with another body answers 422. An invoice already created under another key (same seller, number, kind and
issue date) answers 409 with the existing id. `GET /invoices` lists them. Key and invoice are stored in one SQLite
transaction (`BEGIN IMMEDIATE`), so concurrent requests with one key create one invoice.

Run it with `python -m edinbox.hub.accounting_service --db accounting.db --port 8080`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["AccountingService", "main"]

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
_MAX_BODY = 1 << 20
_MAX_KEY = 255


class _Refused(Exception):
    def __init__(self, status: HTTPStatus, error: str) -> None:
        super().__init__(error)
        self.status = status
        self.error = error


def _invoice(raw: bytes) -> dict[str, Any]:
    """The request body as an invoice, or 400 saying what is wrong."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _Refused(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise _Refused(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
    missing = [name for name in _REQUIRED if not isinstance(body.get(name), str) or not body[name]]
    if missing:
        raise _Refused(HTTPStatus.BAD_REQUEST, f"missing or non-string fields: {', '.join(missing)}")
    return body


class AccountingService:
    """The service on a loopback port (`port=0`: any free one), serving from a background thread."""

    def __init__(self, db: str | Path, *, host: str = "127.0.0.1", port: int = 0) -> None:
        """Create the tables in `db` if missing and bind the port; `start()` serves."""
        self.db = str(db)
        with closing(sqlite3.connect(self.db)) as conn:
            conn.executescript(_SCHEMA)
        self._server = ThreadingHTTPServer((host, port), _handler_class(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The `POST` URL of invoices, e.g. `http://127.0.0.1:8080/invoices`."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/invoices"

    def start(self) -> AccountingService:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="accounting", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted."""
        self._server.serve_forever()

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> AccountingService:
        """Start serving."""
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        """Stop serving."""
        self.stop()

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


def _handler_class(service: AccountingService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "edinbox-accounting/1"

        def log_message(self, format: str, *args: Any) -> None:
            """Stay quiet: tests and the demo print their own summary."""

        def _reply(self, status: HTTPStatus, body: Any, *, replayed: bool = False) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if replayed:
                self.send_header("Idempotent-Replayed", "true")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            """List the invoices."""
            if self.path.rstrip("/") != "/invoices":
                self._reply(HTTPStatus.NOT_FOUND, {"error": "not found"})
                return
            self._reply(HTTPStatus.OK, service.invoices())

        def do_POST(self) -> None:
            """Create an invoice once per Idempotency-Key."""
            try:
                if self.path.rstrip("/") != "/invoices":
                    raise _Refused(HTTPStatus.NOT_FOUND, "not found")
                key = self.headers.get("Idempotency-Key", "").strip()
                if not key or len(key) > _MAX_KEY:
                    raise _Refused(
                        HTTPStatus.BAD_REQUEST, f"an Idempotency-Key header of 1-{_MAX_KEY} chars is required"
                    )
                length = int(self.headers.get("Content-Length") or 0)
                if not 0 < length <= _MAX_BODY:
                    raise _Refused(HTTPStatus.BAD_REQUEST, f"a JSON body of 1-{_MAX_BODY} bytes is required")
                status, response, replayed = service.create(key, self.rfile.read(length))
            except _Refused as refused:
                self._reply(refused.status, {"error": refused.error})
            except ValueError:
                self._reply(HTTPStatus.BAD_REQUEST, {"error": "bad Content-Length"})
            else:
                self._reply(status, response, replayed=replayed)

    return Handler


def main(argv: list[str] | None = None) -> None:
    """Serve the accounting service until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--db", default="accounting.db", help="SQLite file of invoices and keys")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    service = AccountingService(args.db, host=args.host, port=args.port)
    print(f"accounting service on {service.url} (invoices in {args.db})", flush=True)
    with suppress(KeyboardInterrupt):
        service.serve_forever()


if __name__ == "__main__":
    main()
