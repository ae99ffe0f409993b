"""The drivers' log records in `edinbox run` and `edinbox relay`: one line each, and a reconnect loop's line once a
minute, while edinbox's own records stay as they are."""

from __future__ import annotations

import logging

from edinbox.hub.config._log import OneLineFilter


def record(name: str, message: str, *, created: float, error: BaseException | None = None) -> logging.LogRecord:
    """A log record of logger `name`, with `error` as its exception when given."""
    exc_info = (type(error), error, error.__traceback__) if error is not None else None
    made = logging.LogRecord(name, logging.WARNING, __file__, 1, message, None, exc_info)
    made.created = created
    return made


def test_a_drivers_exception_is_one_line() -> None:
    """A driver's record with an exception becomes its message, the exception's type and first line; no traceback
    is left for the formatter to print."""
    try:
        raise ConnectionResetError("Connection reset by peer\nsecond line")
    except ConnectionResetError as exc:
        line = record("aiormq.connection", "reader exited abnormally", created=0.0, error=exc)
    assert OneLineFilter().filter(line)
    assert line.getMessage() == "reader exited abnormally: ConnectionResetError: Connection reset by peer"
    assert line.exc_info is None
    assert "\n" not in logging.Formatter().format(line)


def test_a_reconnect_loops_line_is_let_through_once_a_minute() -> None:
    """The same driver line (another port or attempt number aside) is dropped within 60 s and let through after;
    another line, or another logger's, is let through at once."""
    lines = OneLineFilter()
    assert lines.filter(record("aio_pika.robust_connection", "attempt 1 to :5672 failed", created=0.0))
    assert not lines.filter(record("aio_pika.robust_connection", "attempt 2 to :5672 failed", created=1.0))
    assert lines.filter(record("aio_pika.robust_connection", "connection closed", created=2.0))
    assert lines.filter(record("aiormq.connection", "attempt 3 to :5672 failed", created=3.0))
    assert lines.filter(record("aio_pika.robust_connection", "attempt 61 to :5672 failed", created=61.0))


def test_edinbox_records_are_left_alone() -> None:
    """The hub's own lines are never flattened or dropped, however often they repeat."""
    try:
        raise RuntimeError("bug\ndetails")
    except RuntimeError as exc:
        line = record("edinbox.hub", "dependency-down", created=0.0, error=exc)
    lines = OneLineFilter()
    assert lines.filter(line)
    assert line.exc_info is not None
    assert lines.filter(record("edinbox.hub", "dependency-down", created=1.0))
