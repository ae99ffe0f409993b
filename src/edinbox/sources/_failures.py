"""How a source reports a broker failure: one SourceError with a one-line reason and the URL masked, never a raw
driver exception; and how it reconnects: exponential backoff with jitter (stamina) within a time budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import stamina

from edinbox._errors import ConfigurationError, InboxError, SourceError
from edinbox._urls import mask

__all__ = ["failing", "quietly", "reason", "unless_cancelled", "with_backoff"]

T = TypeVar("T")

_log = logging.getLogger("edinbox.sources")
_WAIT_INITIAL = 0.1
_WAIT_MAX = 5.0


def reason(exc: BaseException) -> str:
    """One masked line saying what failed: the exception's text with its type, or the type (and cause) alone."""
    text = " ".join(str(exc).split())
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    if not text and cause is not None and cause is not exc:
        line = f"{line} ({reason(cause)})"
    return mask(line)[:500]


@contextlib.contextmanager
def failing(what: str, *, refused: Callable[[BaseException], bool | str] | None = None) -> Iterator[None]:
    """Turn any driver or network exception raised inside into `SourceError("<what> failed: <reason>")`.

    An exception for which `refused` is true (the broker refused the user or password) is a ConfigurationError; when
    `refused` returns text, that text is the ConfigurationError's reason (a setting the broker refused).
    """
    try:
        yield
    except InboxError:  # already a SourceError or ConfigurationError with its own message
        raise
    except Exception as exc:
        why = refused(exc) if refused is not None else False
        if why:
            text = why if isinstance(why, str) else "the broker refused the user or password"
            raise ConfigurationError(mask(f"{what} failed: {text}")) from None
        raise SourceError(mask(f"{what} failed: {reason(exc)}")) from exc


async def quietly(what: str, close: Callable[[], Awaitable[object]]) -> None:
    """Run a close that must never raise (the connection may be dead already): a failure is logged at debug."""
    try:
        await close()
    except Exception as exc:
        _log.debug("%s: %s", what, reason(exc))


async def with_backoff(connect: Callable[[], Awaitable[T]], *, within: float) -> T:
    """`await connect()`, retried on SourceError with exponential backoff and jitter for up to `within` seconds.

    The last SourceError is raised when the budget is spent; a ConfigurationError (a refused password, a bad
    option) is raised at once, since waiting cannot fix it.
    """
    wait_max = max(_WAIT_INITIAL, min(_WAIT_MAX, within / 2))
    async for attempt in stamina.retry_context(
        on=SourceError,
        attempts=None,
        timeout=max(within, 0.001),
        wait_initial=_WAIT_INITIAL,
        wait_max=wait_max,
        wait_jitter=wait_max / 2,
    ):
        with attempt:
            return await connect()
    raise AssertionError("unreachable: stamina raises the last error")  # pragma: no cover


def unless_cancelled() -> None:
    """Raise CancelledError when the current task is being cancelled: a driver may swallow a cancel that arrives
    mid-call and return its reply (redis-py under Python 3.11: its `asyncio.wait_for` returns the finished send), or
    turn it into an ordinary error."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
