"""The operator console: search the journal, read a message, requeue or forget it, watch the dashboard.

`serve(config, host=..., port=..., token=...)` runs it with uvicorn (the `console` extra: Starlette, Jinja2,
uvicorn); `create_app(config, token=...)` is the ASGI application itself, for tests or another server. It binds to
127.0.0.1 unless told otherwise, and any other address needs a token: without one, `serve` refuses to start.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import TYPE_CHECKING

from edinbox._errors import ConfigurationError
from edinbox.hub._config import HubConfig

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["check_bind", "create_app", "serve"]

LOGGER = logging.getLogger("edinbox.console")


def check_bind(host: str, token: str | None) -> None:
    """Refuse (ConfigurationError) to serve on anything but a loopback address without a token."""
    if token or host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigurationError(
            f"the console on {host} would be open to the network: give it --token (or bind 127.0.0.1)"
        )


def create_app(config: HubConfig, *, token: str | None = None) -> Starlette:
    """The console's ASGI application (see `edinbox.console._app.create_app`)."""
    from edinbox.console._app import create_app as build

    return build(config, token=token)


def serve(config: HubConfig, *, host: str = "127.0.0.1", port: int = 8080, token: str | None = None) -> None:
    """Serve the console with uvicorn until interrupted; ConfigurationError for a non-loopback bind without token."""
    check_bind(host, token)
    try:
        import uvicorn
    except ImportError as exc:
        raise ConfigurationError("the console needs its extra: pip install 'edinbox[console]'") from exc
    asyncio.run(_verify(config))  # a missing schema is one line naming `edinbox init`, before anything listens
    # log_config=None: uvicorn's records go to the process's handlers, where passwords are masked (edinbox.hub._log)
    uvicorn.run(create_app(config, token=token), host=host, port=port, log_level="warning", log_config=None)


async def _verify(config: HubConfig) -> None:
    """Check the schema once the database answers: an outage at start is waited out (one line when it starts, one
    when it ends), as the hub does; only a configuration or schema error ends the console."""
    from edinbox.hub._config import give_up_after
    from edinbox.hub._outage import Outage
    from edinbox.hub._parts import open_inbox, verify

    outage = Outage(LOGGER, give_up_after=give_up_after(config))
    async with open_inbox(config) as inbox:
        await outage.call(lambda: verify(inbox))
