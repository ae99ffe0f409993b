"""The journal a HubConfig names (an AsyncInbox), opened and closed, and the check that its schema is complete."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib.resources import files
from typing import TypeVar

from edinbox import Application, AsyncInbox
from edinbox._errors import ConfigurationError, SchemaError
from edinbox._retry import Retry
from edinbox._urls import database_url, mask
from edinbox.hub.config import HubConfig
from edinbox.hub.database._tables import CREATE, INIT_HINT, check_privileges, check_tables, has_hub

__all__ = ["HUB", "open_inbox", "verify", "verify_found"]

HUB = Application(
    "hub",
    files("edinbox.hub").joinpath("sql"),
    ("hub", "console"),
    create=CREATE,
    migrations={
        2: "the counters sharded and the answers table (the journal's steps 4 and 5 until now)",
        3: "the tables renamed edinbox_hub_* (invoices, rejected, counters, control numbers, acknowledgments, answers, "
        "console audit): no clash with an application's own invoices",
        4: "the AS2 receipts table (edinbox_hub_as2_receipts): the MDN answered for each AS2 message received",
        5: "the inbound control-number ledger (edinbox_hub_ledger): the numbers each partner sent, per level",
        6: "the invoices' remote_id: the id a remote sink (the HTTP accounting API) gave each invoice it holds",
        7: "what validation found per interchange (edinbox_hub_findings), and when each ledger row last changed "
        "(edinbox_hub_ledger.changed, indexed): the ledger's gauges read only what changed",
        8: "the console's trigram index on the journal's source dropped (PostgreSQL): it cost each row more "
        "than the row itself; the partner search matches the distinct sources through the unique key instead",
    },
    legacy="hub_control_numbers",
)
"""The hub's and its console's statements (`hub/sql/<dialect>/hub.sql`, `console.sql`), its tables and its
migration chain (`migrations.sql`), added to the journal's store through the library's public hook."""

_INSUFFICIENT_PRIVILEGE = "42501"
"""PostgreSQL's SQLSTATE for a missing grant."""


@contextlib.asynccontextmanager
async def open_inbox(config: HubConfig) -> AsyncIterator[AsyncInbox]:
    """The journal of `config` (not created, not verified), closed on exit.

    A SQLite file in a folder that does not exist is a configuration error (nothing would ever create it), not an
    outage to wait out.
    """
    _check_folder(config.db)
    inbox = AsyncInbox(
        config.db,
        consumer=config.consumer,
        table=config.table,
        max_attempts=config.max_attempts,
        retry=Retry(immediate=config.retry_immediate, first=config.retry_first),
        horizon=config.horizon,
        dead_letters=config.dead_letters or None,
        keep_payloads=config.keep_payloads,
        payload_cap=config.payload_cap,
        applications=[HUB],
    )
    try:
        yield inbox
    finally:
        await inbox.aclose()


T = TypeVar("T")


async def on_inbox(config: HubConfig, work: Callable[[AsyncInbox], Awaitable[T]]) -> T:
    """`work(inbox)` on the journal of `config`, opened for it and closed after: how a one-shot caller (a command, the
    demo) gives an operator function (`edinbox.hub.ops`) the inbox it works on."""
    async with open_inbox(config) as inbox:
        return await work(inbox)


def _check_folder(db: str) -> None:
    """Refuse a SQLite file whose folder does not exist (a stat, before anything opens)."""
    url = database_url(db)
    if url.dialect == "sqlite" and not url.in_memory:
        folder = os.path.dirname(os.path.abspath(url.target))
        if not os.path.isdir(folder):
            raise ConfigurationError(f"cannot open {mask(db)}: the folder {folder} does not exist")


async def verify(inbox: AsyncInbox) -> None:
    """Raise SchemaError, naming `edinbox init` as the remedy, unless the journal and the hub's tables are complete,
    and ConfigurationError, naming `init --grant`, unless this role may read and write them."""
    try:
        await inbox.verify()
        await check_tables(inbox)
        await check_privileges(inbox)
    except SchemaError as exc:
        raise SchemaError(str(exc).replace("create_schema()", "`edinbox init`")) from exc
    except ConfigurationError as exc:
        if getattr(exc.__cause__, "sqlstate", None) != _INSUFFICIENT_PRIVILEGE:
            raise
        raise ConfigurationError(f"{exc}: as the owner, run `edinbox init --grant ROLE` for this role") from exc


async def verify_found(inbox: AsyncInbox) -> bool:
    """Verify what the operator commands need: the journal and its outbox always, the hub's tables (and this role's
    rights on them) where `edinbox init` made them; return whether it did (False: a library journal)."""
    if await has_hub(inbox):
        await verify(inbox)
        return True
    try:
        await inbox.verify(applications=False)
    except SchemaError as exc:
        raise SchemaError(str(exc).replace("create_schema()", "`edinbox init`")) from exc
    if await inbox.unique_keys(inbox.outbox) is None:
        raise SchemaError(f"the journal's outbox {inbox.outbox} does not exist: {INIT_HINT}")
    return False
