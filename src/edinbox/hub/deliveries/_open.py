"""How a hub is opened: the inbox and the source a `HubConfig` names, each waited for while it is down, and the
hub assembled from them (`open_hub`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING

from edinbox._errors import ConfigurationError
from edinbox.hub.config import LOGGER, FaultPoint, HubConfig
from edinbox.hub.database import check_purge, open_inbox, verify
from edinbox.hub.deliveries._hub import Hub
from edinbox.hub.sinks import Accounting, SqlAccounting
from edinbox.loop import Outage
from edinbox.sources import open_source

if TYPE_CHECKING:
    from edinbox.metrics import Metrics

__all__ = ["open_hub"]


@contextlib.asynccontextmanager
async def open_hub(
    config: HubConfig,
    *,
    fault: FaultPoint | None = None,
    accounting: Accounting | None = None,
    stop: asyncio.Event | None = None,
    metrics: Metrics | None = None,
) -> AsyncIterator[Hub]:
    """Open the inbox and the source that `config` names, after checking the schema `edinbox init` created.

    `accounting` is another sink than the SQL table (e.g. an HTTP API in lease mode). Nothing here runs DDL:
    a missing table raises SchemaError that names `edinbox init`. While the database or the source is down it
    waits (raising Stopped if `stop` is set meanwhile), and the hub's `stop` is that same event.
    """
    if not config.source:
        raise ConfigurationError("no source configured: pass --source URL (e.g. dir:///srv/edi) or set it in config")
    check_purge(config)
    logger = logging.getLogger(LOGGER)
    on_back = on_lost = None
    if metrics is not None:
        on_back = partial(_reconnected, metrics, config.consumer)
        on_lost = partial(_lost, metrics, config.consumer)
    outage = Outage(logger, give_up_after=config.give_up_after, on_back=on_back)
    async with open_inbox(config) as inbox, contextlib.AsyncExitStack() as stack:
        stop = stop or asyncio.Event()
        await outage.call(lambda: verify(inbox), stop=stop)  # a hub started while its database is down waits
        horizon = config.horizon  # a NATS stream created here keeps messages this long
        agreements = receipts = None
        if config.source.startswith("as2:"):  # answers its senders: the agreements, the receipts beside the journal
            from edinbox.hub.partners import Receipts, partners

            agreements, receipts = partners(config), Receipts(inbox, consumer=config.consumer)
        source = await outage.call(
            lambda: stack.enter_async_context(
                open_source(
                    config.source,
                    consumer=config.consumer,
                    horizon=horizon,
                    max_payload=config.max_payload,
                    batch=config.batch_size,
                    on_lost=on_lost,
                    partners=agreements,
                    receipts=receipts,
                )
            ),
            stop=stop,
        )
        sink = accounting or SqlAccounting(consumer=config.consumer)
        hub = Hub(
            config,
            inbox=inbox,
            source=source,
            accounting=sink,
            outage=outage,
            stop=stop,
            fault=fault,
            metrics=metrics,
        )
        try:
            yield hub
        finally:
            await hub.give_back()  # a batch received ahead by the last step goes back before the source closes


def _reconnected(metrics: Metrics, consumer: str, dependency: str) -> None:
    metrics.reconnected(consumer=consumer, dependency=dependency)


def _lost(metrics: Metrics, consumer: str, queue: str) -> None:
    metrics.queue_lost(consumer=consumer, queue=queue)
