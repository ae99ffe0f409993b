"""The accounting service's HTTP/1.1 front: asyncio streams and h11, with the limits a service on a network needs.

One coroutine per connection (an idle connection costs a socket, not a thread); h11 parses, so nothing here reads
HTTP by hand; the handler (the service's invoices in SQLite) runs on a fixed pool of worker threads.

- Authentication: with a token, every request needs `Authorization: Bearer <token>`, else 401.
- `idle_timeout`: a connection that sends nothing for this long, after connecting or after an answer, is closed.
- `read_timeout`: a request whose headers and body are not all in within this long of its first byte is answered
  408 and its connection closed (a stalled body is never held for ever).
- `max_body` (413 beyond, before a byte of the body is read) and 16 KiB of headers (431 beyond).
- `workers` + `queue`: requests admitted at once (on a worker, or waiting for one). One more is answered 503 with
  `Retry-After` at once and nothing of it runs. Every refusal is an answer the client can read: the connection is
  half-closed and drained before it is closed, never reset under a request in flight.
- `max_connections`: open connections; beyond, new ones wait in the listen backlog until one closes.

Not uvicorn (the console's server): it times out only the wait between requests, not a request's headers or body,
and its 503 for `limit_concurrency` carries no `Retry-After`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import socket
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from edinbox._errors import ConfigurationError
from edinbox._logs import Event, log_event

try:
    import h11
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ConfigurationError("the accounting service needs h11: pip install 'edinbox[http]'") from exc

__all__ = ["Answer", "Limits", "Request", "Server"]

_MAX_HEAD = 16 * 1024
_CHUNK = 64 * 1024
_LINGER = 1.0
"""Seconds a refused connection is drained after its answer, so the client reads the answer, not a reset."""
_RETRY_AFTER = "1"
_CHALLENGE = ("WWW-Authenticate", "Bearer")

log = logging.getLogger("edinbox.accounting")


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one service takes on: timeouts in seconds, sizes in bytes, counts of requests and connections."""

    idle_timeout: float = 15.0
    read_timeout: float = 10.0
    max_body: int = 1 << 20
    workers: int = 4
    queue: int = 64
    max_connections: int = 1024

    def __post_init__(self) -> None:
        """Refuse a limit that cannot work (a timeout or size of zero, no worker)."""
        for name in ("idle_timeout", "read_timeout", "max_body", "workers", "max_connections"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"{name} must be more than 0, got {getattr(self, name)!r}")
        if self.queue < 0:
            raise ConfigurationError(f"queue must be 0 or more, got {self.queue!r}")


@dataclass(frozen=True, slots=True)
class Request:
    """A whole request: method, path (without its query), headers by lower-case name, body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class Answer:
    """A JSON answer: status, body (anything `json.dumps` takes), extra headers."""

    status: int
    body: Any
    headers: tuple[tuple[str, str], ...] = field(default=())


Handler = Callable[[Request], Answer]
"""The service's own work for a request; runs on a worker thread."""


def _error(status: HTTPStatus, text: str, *headers: tuple[str, str]) -> Answer:
    return Answer(int(status), {"error": text}, headers)


def _busy() -> Answer:
    return _error(HTTPStatus.SERVICE_UNAVAILABLE, "busy: retry later", ("Retry-After", _RETRY_AFTER))


def _raw(answer: Answer) -> bytes:
    """An answer with `Connection: close` as bytes, for a connection h11 has no request on (none arrived yet)."""
    data = json.dumps(answer.body).encode()
    head = [f"HTTP/1.1 {answer.status} {HTTPStatus(answer.status).phrase}", "Content-Type: application/json"]
    head += [f"Content-Length: {len(data)}", "Connection: close", *(f"{k}: {v}" for k, v in answer.headers)]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


class _Closed(Exception):
    """The connection is done: the client left, or it was answered with `Connection: close`."""


class Server:
    """Serves `handler` on a listening socket under `limits`, requiring `token` as a bearer token when given."""

    def __init__(self, handler: Handler, *, token: str | None, limits: Limits) -> None:
        """Nothing is served until `serve`."""
        self.handler = handler
        self.limits = limits
        self._token = token.encode() if token is not None else None
        self._connections = 0
        self._admitted = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._room = asyncio.Event()

    async def serve(self, sock: socket.socket, stop: asyncio.Event) -> None:
        """Accept connections on the listening `sock` until `stop` is set; then close every connection and the
        pool (a request on a worker finishes its transaction first)."""
        pool = ThreadPoolExecutor(self.limits.workers, thread_name_prefix="accounting")
        sock.setblocking(False)
        accepting = asyncio.create_task(self._accept(sock, pool))
        try:
            await stop.wait()
        finally:
            accepting.cancel()
            for task in [accepting, *self._tasks]:
                task.cancel()
            await asyncio.gather(accepting, *self._tasks, return_exceptions=True)
            pool.shutdown(wait=True, cancel_futures=True)

    async def _accept(self, sock: socket.socket, pool: Any) -> None:
        """Accept connections while fewer than `max_connections` are open; the others wait in the listen backlog
        (the kernel's queue, bounded by it: a client beyond it retries its connect, it is never reset)."""
        loop = asyncio.get_running_loop()
        while True:
            while self._connections >= self.limits.max_connections:
                self._room.clear()
                await self._room.wait()
            try:
                client, _ = await loop.sock_accept(sock)
            except OSError as exc:  # out of descriptors, or a connection reset before it was accepted
                log_event(log, logging.WARNING, "accept-failed", {"error": exc.strerror or str(exc)})
                await asyncio.sleep(0.1)
                continue
            self._connections += 1
            task = asyncio.create_task(self._serve_client(client, pool))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve_client(self, client: socket.socket, pool: Any) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=client, limit=_CHUNK)
            await self._connection(reader, writer, pool)
        finally:
            self._connections -= 1
            self._room.set()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pool: Any) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        linger = False
        try:
            while True:
                await self._exchange(conn, reader, writer, pool)
                conn.start_next_cycle()
        except _Closed as closed:
            linger = bool(closed.args and closed.args[0])
        except (OSError, h11.ProtocolError, TimeoutError):
            pass  # the client left mid-way or the answer could not be written: nothing more to say
        finally:
            await self._close(reader, writer, linger=linger)

    async def _exchange(self, conn: h11.Connection, reader: Any, writer: Any, pool: Any) -> None:
        """Read one request, answer it; raise _Closed when the connection is done."""
        loop = asyncio.get_running_loop()
        started = bool(conn.trailing_data[0])
        deadline = loop.time() + (self.limits.read_timeout if started else self.limits.idle_timeout)
        try:
            while (event := conn.next_event()) is h11.NEED_DATA:
                async with asyncio.timeout_at(deadline):
                    data = await reader.read(_CHUNK)
                if data and not started:
                    started, deadline = True, loop.time() + self.limits.read_timeout
                conn.receive_data(data)
        except TimeoutError:  # closed with linger too: a request sent as the idle time ran out sees an EOF, not a reset
            if started:
                writer.write(_raw(_error(HTTPStatus.REQUEST_TIMEOUT, "the request did not arrive in time")))
            raise _Closed(True) from None
        except h11.RemoteProtocolError as exc:
            writer.write(_raw(_error(HTTPStatus(exc.error_status_hint), f"bad request: {exc}")))
            raise _Closed(True) from None
        if not isinstance(event, h11.Request):
            raise _Closed(False)  # ConnectionClosed: the client is done
        refusal = self._refusal(event)
        if refusal is not None:
            await self._answer(conn, writer, refusal)
            raise _Closed(True)
        self._admitted += 1
        try:
            body = await self._body(conn, reader, writer, deadline)
            target = event.target.decode("ascii", "replace")
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in event.headers}
            request = Request(event.method.decode("ascii", "replace"), target.partition("?")[0], headers, body)
            try:
                answer = await loop.run_in_executor(pool, self.handler, request)
            except Exception:
                log.exception(Event("accounting-error", {"path": request.path}))
                answer = _error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error")
        finally:
            self._admitted -= 1
        await self._answer(conn, writer, answer)

    def _refusal(self, request: h11.Request) -> Answer | None:
        """The answer to a request refused on its headers alone (401, 413, 503), or None."""
        if self._token is not None:
            auth = dict(request.headers).get(b"authorization", b"")
            scheme, _, given = auth.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self._token):
                return _error(HTTPStatus.UNAUTHORIZED, "a valid bearer token is required", _CHALLENGE)
        length = dict(request.headers).get(b"content-length", b"0")
        if length.isdigit() and int(length) > self.limits.max_body:
            return self._too_big()
        if self._admitted >= self.limits.workers + self.limits.queue:
            return _busy()
        return None

    def _too_big(self) -> Answer:
        return _error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body is over {self.limits.max_body} bytes")

    async def _body(self, conn: h11.Connection, reader: Any, writer: Any, deadline: float) -> bytes:
        """The request's body, read by `deadline` and at most `max_body` bytes; else answered 408 or 413."""
        if conn.they_are_waiting_for_100_continue:
            writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
        chunks: list[bytes] = []
        size = 0
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                try:
                    async with asyncio.timeout_at(deadline):
                        data = await reader.read(_CHUNK)
                except TimeoutError:
                    late = _error(HTTPStatus.REQUEST_TIMEOUT, "the body did not arrive in time")
                    await self._answer(conn, writer, late)
                    raise _Closed(True) from None
                conn.receive_data(data)
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.limits.max_body:
                    await self._answer(conn, writer, self._too_big())
                    raise _Closed(True)
                chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            else:
                raise _Closed(False)

    async def _answer(self, conn: h11.Connection, writer: asyncio.StreamWriter, answer: Answer) -> None:
        """Send `answer`; raise _Closed when the connection cannot carry another request after it."""
        data = json.dumps(answer.body).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *answer.headers]
        headers.append(("Keep-Alive", f"timeout={int(self.limits.idle_timeout)}"))  # closed before the server does
        unread = conn.their_state is not h11.DONE
        if unread:
            headers.append(("Connection", "close"))
        writer.write(conn.send(h11.Response(status_code=answer.status, headers=headers)))
        writer.write(conn.send(h11.Data(data=data)))
        writer.write(conn.send(h11.EndOfMessage()))
        async with asyncio.timeout(self.limits.read_timeout):
            await writer.drain()
        if unread or conn.our_state is h11.MUST_CLOSE:
            raise _Closed(unread)

    async def _close(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, linger: bool) -> None:
        """Close the connection; with `linger`, half-close it first and drain what the client still sends, so it
        reads the answer rather than a reset."""
        with contextlib.suppress(OSError, TimeoutError, RuntimeError):
            if linger and writer.can_write_eof():
                async with asyncio.timeout(self.limits.read_timeout):
                    await writer.drain()
                writer.write_eof()
                async with asyncio.timeout(_LINGER):
                    while await reader.read(_CHUNK):
                        pass
        writer.close()
        with contextlib.suppress(OSError, RuntimeError):
            await writer.wait_closed()
