"""The journal a HubConfig names (an AsyncInbox), opened and closed, and the check that its schema is complete."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import SchemaError
from edinbox.hub._config import HubConfig, parse_duration
from edinbox.hub._tables import check_tables

__all__ = ["open_inbox", "verify"]


@contextlib.asynccontextmanager
async def open_inbox(config: HubConfig) -> AsyncIterator[AsyncInbox]:
    """The journal of `config` (not created, not verified), closed on exit."""
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


async def verify(inbox: AsyncInbox) -> None:
    """Raise SchemaError, naming `edinbox init` as the remedy, unless the journal and the hub's tables are complete."""
    try:
        await inbox.verify()
    except SchemaError as exc:
        raise SchemaError(str(exc).replace("create_schema()", "`edinbox init`")) from exc
    await check_tables(inbox)
