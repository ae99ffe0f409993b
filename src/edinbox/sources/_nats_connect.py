"""NATS plumbing shared by the source and `publish`: one connection attempt, the stream with explicit limits.

Kept apart from the source so the reconnect rules read on their own. The user and password of the URL are decoded
and handed to the client apart from the address (nats-py would send them percent-encoded), so a password may hold
any character.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from edinbox._errors import ConfigurationError, SourceError
from edinbox._logs import log_event
from edinbox.sources._failures import reason

if TYPE_CHECKING:
    from edinbox.sources.nats import NatsSource

__all__ = ["address", "connect", "ensure_stream", "last_error"]

_log = logging.getLogger("edinbox.sources.nats")


async def connect(server: str, masked: str, *, on_reconnected: Callable[[], None] | None = None) -> Any:
    """One connection attempt; nats-py then reconnects by itself, forever, after any outage (and calls
    `on_reconnected` each time it is back)."""
    try:
        from nats.aio.client import Client
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ConfigurationError("nats:// sources need the nats extra: pip install 'edinbox[nats]'") from exc
    parts = address(server)
    errors: list[BaseException] = []
    up = [False]  # whether the connection is up, so an outage is logged once, not at every reconnect attempt

    async def on_error(exc: Exception) -> None:
        if up[0] or not errors or reason(errors[-1]) != reason(exc):
            log_event(_log, logging.WARNING, "nats-error", {"source": masked, "error": reason(exc)})
        errors[:] = [exc]

    async def on_disconnected() -> None:
        if up[0] and not nc.is_closed:  # closing on purpose is no outage
            log_event(_log, logging.WARNING, "nats-connection-lost", {"source": masked, "then": "reconnecting"})
        up[0] = False

    async def on_back() -> None:
        up[0] = True
        log_event(_log, logging.WARNING, "nats-connection-back", {"source": masked})
        if on_reconnected is not None:
            on_reconnected()

    nc = Client()
    try:
        await nc.connect(
            servers=[parts[0]],
            user=parts[1],
            password=parts[2],
            connect_timeout=2,
            max_reconnect_attempts=1,  # one quick retry now; the caller backs off between attempts
            reconnect_time_wait=0.2,  # type: ignore[arg-type]  # seconds, a float in fact
            error_cb=on_error,
            disconnected_cb=on_disconnected,
            reconnected_cb=on_back,
        )
    except Exception as exc:
        last = errors[-1] if errors else exc
        if "authorization violation" in str(last).lower():
            raise ConfigurationError(f"NATS at {masked} refused the user or password") from None
        raise SourceError(f"cannot connect to {masked}: {reason(last)}") from exc
    up[0] = True
    nc.options["max_reconnect_attempts"] = -1  # connected: from now on nats-py reconnects after any outage, forever
    nc.options["reconnect_time_wait"] = 1
    return nc


def address(server: str) -> tuple[str, str | None, str | None]:
    """The address without credentials, and the decoded user and password (any character allowed in them)."""
    scheme, _, rest = server.partition("://")
    netloc, sep, path = rest.partition("/")
    userinfo, at, host = netloc.rpartition("@")
    if not at:
        return server, None, None
    user, colon, password = userinfo.partition(":")
    return f"{scheme}://{host}{sep}{path}", unquote(user) or None, unquote(password) if colon else None


async def ensure_stream(js: Any, source: NatsSource) -> float:
    """Create the stream, or add the subject and dead subject to it; return its max_age in seconds (0: none)."""
    from nats.js.api import DiscardPolicy, StreamConfig
    from nats.js.errors import NotFoundError

    wanted = [source.subject, source.dead]
    try:
        info = await js.stream_info(source.stream)
    except NotFoundError:
        config = StreamConfig(
            name=source.stream,
            subjects=wanted,
            duplicate_window=source.duplicate_window,
            max_age=source.max_age,
            max_bytes=source.max_bytes,
            max_msgs=source.max_msgs,
            discard=DiscardPolicy.NEW if source.discard == "new" else DiscardPolicy.OLD,
        )
        info = await js.add_stream(config)
        return float(info.config.max_age or 0)
    missing = [s for s in wanted if s not in (info.config.subjects or [])]
    if missing:
        info.config.subjects = [*(info.config.subjects or []), *missing]
        info = await js.update_stream(info.config)
    return float(info.config.max_age or 0)


def last_error(nc: Any) -> str:
    """The client's last error as one line."""
    error = getattr(nc, "last_error", None)
    return reason(error) if error is not None else "no answer"
