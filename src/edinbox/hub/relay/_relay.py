"""The relay beside a hub: the library's `Relay` (`edinbox.loop`), with the hub's outage lines, pace and logger."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from edinbox._async_inbox import AsyncInbox
from edinbox.hub.config import LOGGER, FaultPoint, HubConfig
from edinbox.loop import Outage, Relay

__all__ = ["beside"]


def beside(
    inbox: AsyncInbox,
    config: HubConfig,
    patience: timedelta | None,
    *,
    stop: asyncio.Event,
    fault: FaultPoint | None = None,
) -> Relay:
    """The relay beside a hub (in the hub's process or in a child of its own) until `stop`: outage lines of its own
    (`relay-down`: the hub reports the database's, the relay also the destinations'), waited out for `patience`,
    idle for four of the hub's polls."""
    logger = logging.getLogger(LOGGER)
    outage = Outage(logger, give_up_after=patience, name="relay")
    return Relay(
        inbox,
        outage=outage,
        stop=stop,
        idle=config.poll_timeout * 4,
        fault=fault,
        logger=logger,
        destinations=config.credentials,
    )
