"""The operator's view of a hub: counts, parked messages, and the journal commands, as plain values.

The CLI renders these as tables or JSON (edinbox.hub._output); nothing here prints.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import ConfigurationError, InboxError, StoreError
from edinbox._records import Tx
from edinbox._urls import mask
from edinbox.hub import _log
from edinbox.hub._config import HubConfig, parse_duration
from edinbox.hub._fault import FaultPoint
from edinbox.hub._hub import give_up_after
from edinbox.hub._outage import Outage
from edinbox.hub._output import as_dict, human_duration, json_value
from edinbox.hub._parts import open_inbox, verify
from edinbox.hub._relay import Relay
from edinbox.hub._tables import TABLES, counts, create_tables

__all__ = [
    "Check",
    "doctor",
    "forget",
    "init",
    "list_rows",
    "purge",
    "relay",
    "requeue",
    "show",
    "split_key",
    "stats",
]


def split_key(key: str) -> tuple[str, str]:
    """Split `SOURCE/MESSAGE_ID` (as `list` prints it) at its last slash."""
    source, sep, message_id = key.rpartition("/")
    if not sep or not message_id:
        raise ConfigurationError(f"{key!r} is not a key: expected SOURCE/MESSAGE_ID, e.g. X12:ZZ:ACME>ZZ:HUB/000000905")
    return source, message_id


async def init(config: HubConfig, *, grant: Sequence[str] = ()) -> None:
    """Create the journal and the hub's tables (idempotent), verify them, and grant each runtime role in `grant`
    exactly what `edinbox run` needs (no DDL); open the source once, which creates a spool folder."""
    if config.source:
        from edinbox.sources import open_source

        async with open_source(config.source, consumer=config.consumer):
            pass
    async with open_inbox(config) as inbox:
        await inbox.create_schema()
        await inbox.transaction(create_tables)
        await verify(inbox)
        for role in grant:
            await inbox.grant(role, tables=TABLES)


async def stats(config: HubConfig) -> dict[str, Any]:
    """Counts by outcome (across processes), rows by journal status, the oldest row's age and the table sizes."""
    async with open_inbox(config) as inbox:
        journal = await inbox.stats()

        async def read(tx: Tx) -> tuple[dict[str, int], tuple[Any, ...]]:
            totals = await tx.unit.fetch("hub_totals", {"consumer": config.consumer})
            return await counts(tx, consumer=config.consumer), totals[0]

        found, (invoices, rejected, oldest, rows) = await inbox.read(read)
        size = await _table_size(inbox)
        outbox = await inbox.outbox_stats()
        acks = await inbox.read(lambda tx: tx.unit.fetch("hub_acknowledgment_totals", {"consumer": config.consumer}))
    acknowledgments = {"TA1": 0, "997": 0, "999": 0, "CONTRL": 0, "duplicate_notices": 0, "keys": 0}
    for kind, duplicate, n, keys in acks:
        acknowledgments["duplicate_notices" if duplicate else str(kind)] += int(n)
        acknowledgments["keys"] += int(keys)
    when = _timestamp(oldest)
    age = None if when is None else max(0.0, (datetime.now(UTC) - when).total_seconds())
    return {
        "consumer": config.consumer,
        "received": sum(found.values()),
        "processed": found["processed"],
        "duplicate": found["duplicate"],
        "conflict": found["conflict"],
        "dead": int(getattr(journal, "dead", 0)),
        "rejected": int(rejected),
        "rejected_deliveries": found["rejected"],
        "invoices": int(invoices),
        "resent": found["resent"],
        "bypassed": found["bypassed"],
        "journal": {k: int(v) for k, v in as_dict(journal).items()},
        "journal_rows": int(rows),
        "oldest_row_age_seconds": age,
        "table_bytes": size,
        "acknowledgments": acknowledgments,
        "outbox": {
            "backlog": outbox.backlog,
            "parked": outbox.parked,
            "sent": outbox.sent,
            "oldest_unsent_age_seconds": None if outbox.oldest_unsent is None else outbox.oldest_unsent.total_seconds(),
        },
    }


async def relay(
    config: HubConfig,
    *,
    stop: asyncio.Event,
    once: bool = False,
    limit: int = 100,
    log_json: bool = False,
    fault: FaultPoint | None = None,
) -> dict[str, int]:
    """Relay the outbox of `config`'s journal until `stop` is set (or, with `once`, until it is empty)."""
    async with open_inbox(config) as inbox:
        logger = logging.getLogger(_log.LOGGER)
        outage = Outage(logger, give_up_after=give_up_after(config), log_json=log_json)
        await outage.call(lambda: verify(inbox), stop=stop)
        idle = config.poll_timeout * 4
        relay = Relay(inbox, outage=outage, stop=stop, limit=limit, idle=idle, log_json=log_json, fault=fault)
        return dict(await relay.run(once=once))


def _timestamp(value: Any) -> datetime | None:
    """A journal timestamp as an aware datetime: PostgreSQL gives datetimes, SQLite epoch seconds."""
    if value is None or isinstance(value, datetime):
        return value.replace(tzinfo=value.tzinfo or UTC) if value is not None else None
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (TypeError, ValueError):
        when = datetime.fromisoformat(str(value))
        return when if when.tzinfo else when.replace(tzinfo=UTC)


async def _table_size(inbox: AsyncInbox) -> int | None:
    """The journal's size in bytes (None on a SQLite built without the dbstat table)."""
    try:
        rows = await inbox.read(lambda tx: tx.unit.fetch("hub_table_bytes", {}))
    except StoreError:
        return None
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


async def list_rows(config: HubConfig, *, status: str | None, limit: int) -> list[dict[str, Any]]:
    """Journal rows (optionally of one status), or parked payloads for `status="rejected"`, newest first."""
    if status == "rejected":
        params = {"consumer": config.consumer, "limit": limit}
        async with open_inbox(config) as inbox:
            rows = await inbox.read(lambda tx: tx.unit.fetch("hub_rejected_rows", params))
        return [
            {
                "key": f"rejected/{r[0]}",
                "status": "rejected",
                "delivery": r[1],
                "reason": r[2],
                "deliveries": r[3],
                "at": json_value(_timestamp(r[4])),
            }
            for r in rows
        ]
    async with open_inbox(config) as inbox:
        records = await inbox.records(status=status, limit=limit)
    out = []
    for record in records:
        data = as_dict(record)
        out.append(
            {
                "key": f"{data['source']}/{data['message_id']}",
                "status": data["status"],
                "attempts": data.get("attempts"),
                "at": data.get("received_at"),
                "error": data.get("last_error") or "",
            }
        )
    return out


async def show(config: HubConfig, key: str) -> dict[str, Any] | None:
    """One journal row (`SOURCE/MESSAGE_ID`) with its invoices and the acknowledgments sent for it, or one parked
    payload (`rejected/ID`)."""
    source, message_id = split_key(key)
    if source == "rejected" and not message_id.isdigit():
        raise ConfigurationError(f"{key!r}: a parked payload's key is rejected/<number>")
    async with open_inbox(config) as inbox:
        if source == "rejected":
            params: dict[str, Any] = {"consumer": config.consumer, "id": int(message_id)}
            rows = await inbox.read(lambda tx: tx.unit.fetch("hub_rejected_row", params))
            if not rows:
                return None
            r = rows[0]
            return {
                "key": key,
                "status": "rejected",
                "delivery": r[1],
                "reason": r[2],
                "deliveries": r[3],
                "at": json_value(_timestamp(r[4])),
                "payload": json_value(r[5]),
            }
        key_params = {"consumer": config.consumer, "source": source, "message_id": message_id}
        invoices = await inbox.read(lambda tx: tx.unit.fetch("hub_invoices_of", key_params))
        acks = await inbox.read(lambda tx: tx.unit.fetch("hub_acknowledgments_of", key_params))
        record = await inbox.get(source, message_id)
    if record is None:
        return None
    data = {"key": key, **as_dict(record)}
    data["invoices"] = [
        {
            "seller": i[0],
            "number": i[1],
            "kind": i[2],
            "issue_date": json_value(i[3]),
            "total": str(i[4]),
            "currency": i[5],
        }
        for i in invoices
    ]
    data["acknowledgments"] = [
        {
            "kind": a[0],
            "duplicate": bool(a[1]),
            "control_number": a[2],
            "key": a[3],
            "at": json_value(a[4]),
            "destination": mask(a[5]) if a[5] else None,
            "status": "sent" if a[6] else "parked" if a[7] else "waiting" if a[5] else "purged",
            "reason": a[8],
        }
        for a in acks
    ]
    return data


async def requeue(config: HubConfig, key: str) -> bool:
    """Make a dead or conflicting journal row processable again; False when there was none."""
    source, message_id = split_key(key)
    async with open_inbox(config) as inbox:
        return bool(await inbox.requeue(source, message_id))


async def forget(config: HubConfig, key: str) -> bool:
    """Delete a journal row so the next delivery of that key is processed again; False when there was none."""
    source, message_id = split_key(key)
    async with open_inbox(config) as inbox:
        return bool(await inbox.forget(source, message_id))


async def _purgeable(inbox: AsyncInbox, consumer: str, age: timedelta) -> int:
    """Rows a purge with this age would delete now (the same condition as the journal's purge)."""
    params = {"consumer": consumer, "older_than": age}
    rows = await inbox.read(lambda tx: tx.unit.fetch("hub_purgeable", params))
    return int(rows[0][0] or 0)


async def purge(
    config: HubConfig,
    *,
    older_than: str,
    batch_size: int,
    progress: Callable[[int, int], None] | None = None,
    interval: float = 0.5,
) -> int:
    """Delete settled journal rows older than `older_than` (e.g. 30d) in bounded batches; return how many.

    `progress(deleted_so_far, total)` is called while the purge runs (it counts the purgeable rows left).
    """
    age = parse_duration(older_than)
    async with open_inbox(config) as inbox:
        total = await _purgeable(inbox, config.consumer, age) if progress else 0
        task = asyncio.ensure_future(inbox.purge(older_than=age, batch_size=batch_size))
        while progress is not None and total and not task.done():
            await asyncio.wait({task}, timeout=interval)
            if not task.done():
                progress(max(0, total - await _purgeable(inbox, config.consumer, age)), total)
        deleted = int(await task)
    if progress is not None and total:
        progress(min(deleted, total), total)
    return deleted


@dataclass(frozen=True, slots=True)
class Check:
    """One line of `edinbox doctor`."""

    name: str
    status: str
    """"ok", "warn" or "fail"."""
    detail: str


async def doctor(config: HubConfig) -> list[Check]:
    """Check connectivity, the journal schema and unique key, the invoice key, and retention against the horizon."""
    checks: list[Check] = []
    async with open_inbox(config) as inbox:
        try:
            keys = await inbox.unique_keys("invoices")
            checks.append(Check("database", "ok", f"connected to {mask(config.db)}"))
        except InboxError as exc:
            checks.append(Check("database", "fail", mask(str(exc))))
            return checks
        if keys is not None and ["issue_date", "kind", "number", "seller"] in keys:
            checks.append(Check("invoice key", "ok", "invoices unique on (seller, number, kind, issue_date)"))
        else:
            detail = "invoices lack their unique key (seller, number, kind, issue_date): run `edinbox init`"
            checks.append(Check("invoice key", "fail", detail))
        try:
            await verify(inbox)
            checks.append(Check("journal", "ok", f"table {config.table}: schema version and unique key present"))
        except InboxError as exc:
            checks.append(Check("journal", "fail", mask(str(exc))))
    source_horizon: timedelta | None = None
    if config.source:
        from edinbox.sources import reach

        try:
            source_horizon = await reach(config.source, consumer=config.consumer)
            checks.append(Check("source", "ok", f"reached {mask(config.source)}"))
        except InboxError as exc:
            checks.append(Check("source", "fail", mask(str(exc))))
    keep, limit = parse_duration(config.retention), parse_duration(config.horizon)
    if source_horizon is not None:
        limit = max(limit, source_horizon)
    if keep < limit:
        detail = f"retention {human_duration(keep)} is shorter than the redelivery horizon {human_duration(limit)}"
        checks.append(Check("retention", "fail", detail))
    else:
        checks.append(
            Check("retention", "ok", f"retention {human_duration(keep)} >= redelivery horizon {human_duration(limit)}")
        )
    return checks
