"""The AS2 source's HTTP/1.1 listener: asyncio streams and h11 (as the accounting service's front), one request
per connection, answered and closed.

- a request whose headers and body are not all in within `read_timeout` of its start is answered 408;
- a body over `max_body` is answered 413 before a byte of it is read; headers over 16 KiB 431;
- only POST to the listening path is taken (405 / 404 otherwise); the handler's answer is written, then the
  connection is half-closed and drained, so the client reads the answer, never a reset.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from edinbox._errors import ConfigurationError

try:
    import h11
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ConfigurationError("the AS2 source needs h11: pip install 'edinbox[as2]'") from exc

__all__ = ["Answer", "Listener", "Request"]

_MAX_HEAD = 16 * 1024
_CHUNK = 64 * 1024
_LINGER = 1.0

log = logging.getLogger("edinbox.sources")


@dataclass(frozen=True, slots=True)
class Request:
    """A whole request: headers by lower-case name, and the body."""

    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer: status, headers, body."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


Handler = Callable[[Request], Awaitable[Answer]]


class Listener:
    """Serves `handler` for POSTs to `path` on `host`:`port` (port 0: any free one, then `port` says which)."""

    def __init__(
        self,
        handler: Handler,
        *,
        host: str,
        port: int,
        path: str,
        max_body: int,
        read_timeout: float,
        reuse_port: bool = False,
    ) -> None:
        """Nothing listens until `start`; with `reuse_port`, other processes may listen on the same port."""
        self.handler = handler
        self.reuse_port = reuse_port
        self.host, self.port, self.path = host, port, path
        self.max_body, self.read_timeout = max_body, read_timeout
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen; OSError when the address cannot be bound."""
        self._server = await asyncio.start_server(
            self._connection, self.host, self.port, reuse_address=True, reuse_port=self.reuse_port
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self, *, grace: float = _LINGER) -> None:
        """Stop listening; connections whose answer is on its way get `grace` seconds to write it, then every
        connection is ended."""
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # noqa: S101 - a connection callback always runs in a task
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read one request, answer it, drain."""
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        try:
            request = await asyncio.wait_for(self._read(connection, reader), self.read_timeout)
            answer = await self._answer(request)
        except TimeoutError:
            answer = Answer(408, body=b"request not received in time\r\n")
        except h11.RemoteProtocolError as exc:
            answer = Answer(exc.error_status_hint, body=f"{exc}\r\n".encode())
        except _Refused as refused:
            answer = refused.answer
        if connection.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            head = [*answer.headers, ("Content-Length", str(len(answer.body))), ("Connection", "close")]
            data = connection.send(h11.Response(status_code=answer.status, headers=head)) or b""
            data += connection.send(h11.Data(data=answer.body)) or b""
            data += connection.send(h11.EndOfMessage()) or b""
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reader.read(), _LINGER)

    async def _read(self, connection: h11.Connection, reader: asyncio.StreamReader) -> Request | None:
        """The whole request, or None when the client left first."""
        headers: dict[str, str] = {}
        body = bytearray()
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(_CHUNK)
                connection.receive_data(data)
                if not data and connection.their_state is not h11.DONE:
                    return None
                continue
            if isinstance(event, h11.Request):
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
                target = event.target.decode("latin-1").split("?", 1)[0]
                if target != self.path:
                    raise _Refused(Answer(404, body=b"not an AS2 endpoint\r\n"))
                if event.method != b"POST":
                    raise _Refused(Answer(405, (("Allow", "POST"),), b"AS2 takes POST\r\n"))
                if int(headers.get("content-length", "0") or 0) > self.max_body:
                    raise _Refused(Answer(413, body=b"the message is over the size limit\r\n"))
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.max_body:
                    raise _Refused(Answer(413, body=b"the message is over the size limit\r\n"))
            elif isinstance(event, h11.EndOfMessage):
                return Request(headers, bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _answer(self, request: Request | None) -> Answer:
        if request is None:
            raise ConnectionError("the client left")
        return await self.handler(request)


class _Refused(Exception):
    """A request refused before its handler runs, with the answer that says why."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.status)
        self.answer = answer
