"""The operator console: search the journal, read a message, requeue or forget it, watch the dashboard.

`serve(config, host=..., port=..., token=...)` runs it with uvicorn (the `console` extra: Starlette, Jinja2,
uvicorn); `create_app(config, token=...)` is the ASGI application itself, for tests or another server. It binds to
127.0.0.1 unless told otherwise; any other address needs a token (`check_token`: at least `MIN_TOKEN` characters)
and TLS (`certfile`, `keyfile`) unless `allow_http` says a proxy in front provides it. It answers only to loopback
host names and those in `allowed_hosts` (plus the address it binds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edinbox._errors import ConfigurationError
from edinbox._extras import require_modules
from edinbox._hosts import is_loopback
from edinbox.hub.config import HubConfig

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["MIN_TOKEN", "check_bind", "check_extra", "check_tls", "check_token", "create_app", "serve"]

LOGGER = logging.getLogger("edinbox.console")
MIN_TOKEN = 16
"""The shortest token the console accepts, in characters (`openssl rand -hex 16` gives 32)."""
WILDCARDS = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 - the names of every address, not a bind


def _loopback(host: str) -> bool:
    return is_loopback(host.strip("[]"))  # the bind address may be given bracketed, as in a URL


def check_extra() -> None:
    """Refuse (ConfigurationError naming the `console` extra) when a module the console needs is not installed."""
    require_modules(("starlette", "jinja2", "uvicorn", "multipart"), extra="console", needed_by="the console")


def check_token(token: str | None) -> None:
    """Refuse (ConfigurationError) a token that is blank, shorter than `MIN_TOKEN` or holds control characters."""
    if token is None:
        return
    if not token.strip() or len(token.strip()) < MIN_TOKEN:
        raise ConfigurationError(
            f"the console token must be at least {MIN_TOKEN} characters, not blank (openssl rand -hex 16 makes one)"
        )
    if not token.isprintable() or token != token.strip():
        raise ConfigurationError("the console token must be printable characters without surrounding spaces")


def check_bind(host: str, token: str | None, *, tls: bool = False, allow_http: bool = False) -> None:
    """Refuse (ConfigurationError) to serve beyond loopback without a token, or without TLS unless `allow_http`."""
    if _loopback(host):
        return
    if not token:
        raise ConfigurationError(
            f"the console on {host} would be open to the network: give it a token "
            "(--token-file or EDINBOX_CONSOLE_TOKEN), or bind 127.0.0.1"
        )
    if not tls and not allow_http:
        raise ConfigurationError(
            f"the console on {host} would send its token in clear: give it --certfile and --keyfile "
            "(or --allow-http behind a TLS proxy)"
        )


def check_tls(certfile: Path | None, keyfile: Path | None) -> None:
    """Refuse (ConfigurationError) one of the certificate and key without the other, or a pair that does not load."""
    if certfile is None and keyfile is None:
        return
    if certfile is None or keyfile is None:
        raise ConfigurationError("TLS needs both --certfile and --keyfile")
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigurationError(f"the console's certificate {certfile} and key {keyfile} do not load: {exc}") from None


def create_app(
    config: HubConfig,
    *,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
    tls: bool = False,
    session_lifetime: timedelta | None = None,
) -> Starlette:
    """The console's ASGI application: with `token`, every page asks for it first; it answers to loopback names and
    `allowed_hosts`; `tls` marks its cookies Secure; sessions last `session_lifetime` (default 8 hours)."""
    from edinbox.console._app import create_app as build
    from edinbox.console._guard import Access
    from edinbox.console._session import Signer

    check_token(token)
    access = Access.build(token=token, allowed_hosts=allowed_hosts, tls=tls)
    if session_lifetime is not None:
        access = replace(access, signer=Signer(lifetime=session_lifetime))
    return build(config, access=access)


def serve(
    config: HubConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
    certfile: Path | None = None,
    keyfile: Path | None = None,
    allow_http: bool = False,
) -> None:
    """Serve the console with uvicorn until interrupted; ConfigurationError for a weak token, a bad TLS pair or a
    bind beyond loopback without a token (or without TLS, unless `allow_http`)."""
    check_token(token)
    check_tls(certfile, keyfile)
    check_bind(host, token, tls=certfile is not None, allow_http=allow_http)
    check_extra()
    import uvicorn

    hosts = [*allowed_hosts, *([] if host in WILDCARDS else [host])]
    app = create_app(config, token=token, allowed_hosts=hosts, tls=certfile is not None)
    tls = {"ssl_certfile": str(certfile), "ssl_keyfile": str(keyfile)} if certfile and keyfile else {}
    # log_config=None: uvicorn's records go to the process's handlers, where passwords are masked (edinbox.hub.config)
    settings = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        log_config=None,
        timeout_graceful_shutdown=STOP_GRACE,
        **tls,  # type: ignore[arg-type]
    )
    asyncio.run(_serve(config, settings))


STOP_GRACE = 5
"""Seconds the requests under way at a stop may take to finish before they are cut (a page waiting for a database
that is down answers 503 sooner)."""


async def _serve(config: HubConfig, settings: Any) -> None:
    """Check the schema (waiting out an outage), then serve with uvicorn's `settings` until the first SIGTERM or
    Ctrl-C: the requests under way get STOP_GRACE seconds, and it returns (exit status 0); a second signal exits at
    once (143 or 130)."""
    import uvicorn

    from edinbox._stopping import stop_on_signals

    class Server(uvicorn.Server):
        """uvicorn's server, its own signal handling left out (it would end the process by the signal again)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    server = Server(settings)

    stop = stop_on_signals("edinbox.console")
    if not await _verify(config, stop):  # a missing schema is one line naming `edinbox init`, before anything listens
        return
    serving = asyncio.ensure_future(server.serve())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    stopping.cancel()
    await serving


async def _verify(config: HubConfig, stop: asyncio.Event | None = None) -> bool:
    """Check the schema once the database answers: an outage at start is waited out (one line when it starts, one
    when it ends), as the hub does; only a configuration or schema error ends the console. False when `stop` was set
    while waiting."""
    from edinbox.hub.database import open_inbox, verify_found
    from edinbox.loop import Outage, Stopped

    outage = Outage(LOGGER, give_up_after=config.give_up_after)
    async with open_inbox(config) as inbox:
        try:
            await outage.call(lambda: verify_found(inbox), stop=stop)
        except Stopped:
            return False
    return True
