"""The parts a HubConfig names, opened and closed: the journal (an AsyncInbox) and the hub's own connection."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from edinbox._async_inbox import AsyncInbox
from edinbox.hub._config import HubConfig, parse_duration
from edinbox.hub._db import Database, check_reachable, connect

__all__ = ["open_database", "open_inbox"]


@contextlib.asynccontextmanager
async def open_inbox(config: HubConfig) -> AsyncIterator[AsyncInbox]:
    """The journal of `config` (not created, not verified), closed on exit."""
    check_reachable(config.db)
    inbox = AsyncInbox(
        config.db,
        consumer=config.consumer,
        table=config.table,
        max_attempts=config.max_attempts,
        horizon=parse_duration(config.horizon),
    )
    try:
        yield inbox
    finally:
        await inbox.aclose()


@contextlib.asynccontextmanager
async def open_database(config: HubConfig) -> AsyncIterator[Database]:
    """The hub's own connection to the journal's database (its tables beside the journal), closed on exit."""
    db = await connect(config.db, table=config.table)
    try:
        yield db
    finally:
        await db.aclose()
