"""The hub's operator functions as the tests call them: each on an inbox opened for the call and closed after, as a
command of `edinbox` opens one (`edinbox.hub.database.on_inbox`); the functions themselves take that open inbox."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from edinbox.hub import ops
from edinbox.hub.config import HubConfig
from edinbox.hub.database import Purged, on_inbox


async def init(config: HubConfig, *, grant: Sequence[str] = ()) -> None:
    """`edinbox init` on `config`'s journal."""
    await on_inbox(config, lambda inbox: ops.init(inbox, config=config, grant=grant))


async def stats(config: HubConfig) -> dict[str, Any]:
    """`edinbox stats` of `config`'s journal."""
    return await on_inbox(config, ops.stats)


async def show(config: HubConfig, key: str) -> dict[str, Any] | None:
    """`edinbox show KEY` of `config`'s journal."""
    return await on_inbox(config, lambda inbox: ops.show(inbox, key))


async def list_rows(config: HubConfig, *, status: str | None, limit: int) -> list[dict[str, Any]]:
    """`edinbox list` of `config`'s journal."""
    return await on_inbox(config, lambda inbox: ops.list_rows(inbox, status=status, limit=limit))


async def forget(config: HubConfig, key: str) -> bool:
    """`edinbox forget KEY` on `config`'s journal."""
    return await on_inbox(config, lambda inbox: ops.forget(inbox, key))


async def migrate(config: HubConfig) -> dict[str, Any]:
    """`edinbox migrate` of `config`'s journal."""
    return await on_inbox(config, lambda inbox: ops.migrate(inbox, table=config.table))


async def doctor(config: HubConfig) -> list[ops.Check]:
    """`edinbox doctor` of `config`."""
    return await on_inbox(config, lambda inbox: ops.doctor(inbox, config=config))


async def purge(config: HubConfig, *, older_than: timedelta, batch_size: int = 1000) -> Purged:
    """`edinbox purge --older-than` on `config`'s journal, at its `purge_max_rate`."""
    return await on_inbox(
        config,
        lambda inbox: ops.purge(inbox, older_than=older_than, max_rate=config.purge_max_rate, batch_size=batch_size),
    )
