"""PyMySQL's connection with a shorter reading of the commonest reply, an OK packet (sync only: asyncmy's readers are
compiled already).

PyMySQL reads every reply through a chain of small Python objects (`MysqlPacket`, `MySQLResult`, `OKPacketWrapper`:
about 30 Python calls for an OK packet); a delivery gets three OK replies (its journal INSERT, the handler's INSERT,
COMMIT). `QuickReplies` parses an OK packet that has already arrived whole into the same fields, with the same
checks (sequence number, packet type), in a few calls. Anything else (an error, a result set, a reply still on its
way or longer than its first read) is left unread for PyMySQL's own readers.
"""

from __future__ import annotations

from struct import Struct
from typing import Any

from pymysql.connections import Connection
from pymysql.constants.CR import CR_SERVER_LOST
from pymysql.constants.SERVER_STATUS import SERVER_MORE_RESULTS_EXISTS
from pymysql.err import OperationalError

__all__ = ["QuickReplies"]

_DRIVER: Any = Connection  # names bound here: `pymysql.err` is another module once `MySQLdb.err` is imported
_STATUS = Struct("<HH")  # the server's status flags and the warning count, after the two counts
_SHORTEST = 11  # header (4) + OK packet with two one-byte counts (7, PyMySQL's shortest OK packet)
_WIDTHS = {0xFC: 2, 0xFD: 3, 0xFE: 8}  # a length-encoded integer's first byte: the bytes that follow


class OkResult:
    """The reply of a statement that returned no rows, as PyMySQL's `MySQLResult.read()` leaves it."""

    __slots__ = ("affected_rows", "has_next", "insert_id", "message", "server_status", "warning_count")

    connection = None
    field_count = 0
    description = None
    rows = None
    unbuffered_active = False

    def __init__(self, affected_rows: int, insert_id: int, server_status: int, warning_count: int, message: bytes):
        self.affected_rows = affected_rows
        self.insert_id = insert_id
        self.server_status = server_status
        self.warning_count = warning_count
        self.message = message
        self.has_next = server_status & SERVER_MORE_RESULTS_EXISTS


def _ok(connection: Any) -> OkResult | None:
    """The OK packet waiting whole in the connection's read buffer, consumed; None (nothing consumed) otherwise."""
    rfile = connection._rfile
    if rfile is None:
        return None  # closed: PyMySQL's reader says so
    if connection._current_timeout != connection._read_timeout:  # as PyMySQL's reader (writes set theirs)
        connection._sock.settimeout(connection._read_timeout)
        connection._current_timeout = connection._read_timeout
    try:
        data = rfile.peek(_SHORTEST)  # blocks for the reply's first bytes (one read of the socket, as PyMySQL's)
    except OSError as exc:
        connection._force_close()
        raise OperationalError(CR_SERVER_LOST, f"Lost connection to MySQL server during query ({exc})") from exc
    except BaseException:
        connection._force_close()  # as PyMySQL's reader: the reply is left half read
        raise
    # an OK packet (0x00), in sequence, all there
    if len(data) < _SHORTEST or data[4] or data[3] != connection._next_seq_id:
        return None
    size = 4 + (data[0] | data[1] << 8 | data[2] << 16)
    if size < _SHORTEST or len(data) < size:
        return None
    affected, at = data[5], 6
    if affected > 250:  # length-encoded in the next 2, 3 or 8 bytes (251, NULL, is no count: left to PyMySQL)
        if (width := _WIDTHS.get(affected)) is None:
            return None
        affected, at = int.from_bytes(data[6 : 6 + width], "little"), 6 + width
        if at + 5 > size:
            return None
    insert_id, at = data[at], at + 1
    if insert_id > 250:
        if (width := _WIDTHS.get(insert_id)) is None:
            return None
        insert_id, at = int.from_bytes(data[at : at + width], "little"), at + width
    if at + 4 > size:
        return None
    status, warnings = _STATUS.unpack_from(data, at)
    ok = OkResult(affected, insert_id, status, warnings, data[at + 4 : size])
    rfile.read(size)  # from the buffer: no read of the socket
    connection._next_seq_id = (data[3] + 1) % 256
    return ok


class QuickReplies(Connection):  # type: ignore[misc]
    """PyMySQL's connection; an OK reply that has arrived whole is read in a few calls, any other by PyMySQL."""

    def _read_query_result(self, unbuffered: bool = False) -> Any:
        """A statement's reply: its affected rows (`_result` as PyMySQL's reader leaves it)."""
        connection: Any = self
        connection._result = None
        if unbuffered or (ok := _ok(self)) is None:
            return _DRIVER._read_query_result(self, unbuffered)
        connection._result = ok
        connection.server_status = ok.server_status
        return ok.affected_rows

    def _read_ok_packet(self) -> Any:
        """The OK reply of COMMIT, ROLLBACK, BEGIN... (its `server_status` as PyMySQL's `OKPacketWrapper` has it)."""
        ok = _ok(self)
        if ok is None:
            return _DRIVER._read_ok_packet(self)
        connection: Any = self
        connection.server_status = ok.server_status
        return ok
