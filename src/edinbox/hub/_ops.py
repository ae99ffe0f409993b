"""The operator's view of a hub: counts, parked messages, and the journal commands, as plain values.

The CLI renders these as tables or JSON (edinbox.hub._output); nothing here prints.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from edinbox._errors import ConfigurationError, InboxError
from edinbox._urls import mask
from edinbox.hub._config import HubConfig, parse_duration
from edinbox.hub._db import Database
from edinbox.hub._output import as_dict, human_duration, json_value
from edinbox.hub._parts import open_database, open_inbox
from edinbox.hub._tables import create_tables, hub_counts

__all__ = [
    "Check",
    "doctor",
    "forget",
    "init",
    "list_rows",
    "purge",
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


async def init(config: HubConfig) -> None:
    """Create the journal and the hub's tables (idempotent), then verify them."""
    async with open_inbox(config) as inbox:
        await inbox.create_schema()
        await inbox.verify()
    async with open_database(config) as db:
        await create_tables(db)


async def stats(config: HubConfig) -> dict[str, Any]:
    """Counts by outcome (across processes), rows by journal status, the oldest row's age and the table sizes."""
    async with open_inbox(config) as inbox:
        journal = await inbox.stats()
    async with open_database(config) as db:
        counts = await hub_counts(db, consumer=config.consumer)
        invoices = int(await db.value("SELECT count(*) FROM {invoices}") or 0)
        rejected = int(await db.value("SELECT count(*) FROM {rejected} WHERE consumer = ?", (config.consumer,)) or 0)
        oldest = await db.value("SELECT min(received_at) FROM {journal} WHERE consumer = ?", (config.consumer,))
        rows = int(await db.value("SELECT count(*) FROM {journal}") or 0)
        size = await _table_size(db)
    when = _timestamp(oldest)
    age = None if when is None else max(0.0, (datetime.now(UTC) - when).total_seconds())
    return {
        "consumer": config.consumer,
        "received": sum(counts.values()),
        "processed": counts["processed"],
        "duplicate": counts["duplicate"],
        "conflict": counts["conflict"],
        "dead": int(getattr(journal, "dead", 0)),
        "rejected": rejected,
        "rejected_deliveries": counts["rejected"],
        "invoices": invoices,
        "resent": counts["resent"],
        "bypassed": counts["bypassed"],
        "journal": {k: int(v) for k, v in as_dict(journal).items()},
        "journal_rows": rows,
        "oldest_row_age_seconds": age,
        "table_bytes": size,
    }


def _timestamp(value: Any) -> datetime | None:
    """A journal timestamp as an aware datetime: PostgreSQL gives datetimes, SQLite epoch seconds."""
    if value is None or isinstance(value, datetime):
        return value.replace(tzinfo=value.tzinfo or UTC) if value is not None else None
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (TypeError, ValueError):
        when = datetime.fromisoformat(str(value))
        return when if when.tzinfo else when.replace(tzinfo=UTC)


async def _table_size(db: Database) -> int | None:
    if db.dialect == "postgresql":
        value = await db.value(
            "SELECT pg_total_relation_size(?::regclass)", (".".join(db.names.qualified(db.names.journal)),)
        )
        return int(value) if value is not None else None
    try:
        value = await db.value("SELECT sum(pgsize) FROM dbstat WHERE name = ?", (db.names.journal,))
    except InboxError:
        return None  # SQLite built without the dbstat virtual table
    return int(value) if value is not None else None


async def list_rows(config: HubConfig, *, status: str | None, limit: int) -> list[dict[str, Any]]:
    """Journal rows (optionally of one status), or parked payloads for `status="rejected"`, newest first."""
    if status == "rejected":
        async with open_database(config) as db:
            rows = await db.rows(
                "SELECT id, delivery, reason, deliveries, rejected_at FROM {rejected} WHERE consumer = ?"
                " ORDER BY id DESC LIMIT ?",
                (config.consumer, limit),
            )
        return [
            {
                "key": f"rejected/{r[0]}",
                "status": "rejected",
                "delivery": r[1],
                "reason": r[2],
                "deliveries": r[3],
                "at": json_value(r[4]),
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
    """One journal row (`SOURCE/MESSAGE_ID`) with its invoices, or one parked payload (`rejected/ID`)."""
    source, message_id = split_key(key)
    async with open_database(config) as db:
        if source == "rejected":
            if not message_id.isdigit():
                raise ConfigurationError(f"{key!r}: a parked payload's key is rejected/<number>")
            rows = await db.rows(
                "SELECT id, delivery, reason, deliveries, rejected_at, payload FROM {rejected}"
                " WHERE consumer = ? AND id = ?",
                (config.consumer, int(message_id)),
            )
            if not rows:
                return None
            r = rows[0]
            return {
                "key": key,
                "status": "rejected",
                "delivery": r[1],
                "reason": r[2],
                "deliveries": r[3],
                "at": json_value(r[4]),
                "payload": json_value(r[5]),
            }
        invoices = await db.rows(
            "SELECT seller, number, kind, issue_date, total, currency FROM {invoices}"
            " WHERE source = ? AND message_id = ? AND consumer = ? ORDER BY id",
            (source, message_id, config.consumer),
        )
    async with open_inbox(config) as inbox:
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


_PURGEABLE_ROWS = "SELECT count(*) FROM {journal} WHERE consumer = ? AND status = 'processed' AND settled_at < "
_PURGEABLE = {"postgresql": _PURGEABLE_ROWS + "now() - ?", "sqlite": _PURGEABLE_ROWS + "?"}


async def _purgeable(db: Database, consumer: str, age: timedelta) -> int:
    """Rows a purge with this age would delete now (the same condition as the journal's purge)."""
    bound: Any = age if db.dialect == "postgresql" else time.time() - age.total_seconds()
    value = await db.value(_PURGEABLE[db.dialect], (consumer, bound))
    await db.rollback()  # end the read transaction so the purge's deletes are seen on the next poll
    return int(value or 0)


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
    async with open_inbox(config) as inbox, open_database(config) as db:
        total = await _purgeable(db, config.consumer, age) if progress else 0
        task = asyncio.ensure_future(inbox.purge(older_than=age, batch_size=batch_size))
        while progress is not None and total and not task.done():
            await asyncio.wait({task}, timeout=interval)
            if not task.done():
                progress(max(0, total - await _purgeable(db, config.consumer, age)), total)
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
    try:
        async with open_database(config) as db:
            await db.value("SELECT 1")
            checks.append(Check("database", "ok", f"connected to {mask(config.db)}"))
            checks.append(await _invoice_key(db))
    except InboxError as exc:
        checks.append(Check("database", "fail", mask(str(exc))))
        return checks
    try:
        async with open_inbox(config) as inbox:
            await inbox.verify()
        checks.append(Check("journal", "ok", f"table {config.table}: schema version and unique key present"))
    except InboxError as exc:
        hint = mask(str(exc)).replace("create_schema()", "`edinbox init`")  # the library's words, the CLI's command
        checks.append(Check("journal", "fail", hint))
    source_horizon: timedelta | None = None
    if config.source:
        from edinbox.sources import open_source

        try:
            async with open_source(config.source, consumer=config.consumer) as source:
                source_horizon = source.horizon
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


async def _invoice_key(db: Database) -> Check:
    if db.dialect == "postgresql":
        rows = await db.rows(
            "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i WHERE i.indrelid = to_regclass(?) AND i.indisunique",
            (".".join(db.names.qualified("invoices")),),
        )
        found = any("(seller, number, kind, issue_date)" in str(r[0]) for r in rows)
    else:
        found = False
        for row in await db.rows('SELECT name, "unique" FROM pragma_index_list(?)', ("invoices",)):
            if row[1]:
                cols = [r[0] for r in await db.rows("SELECT name FROM pragma_index_info(?)", (row[0],))]
                found = found or cols == ["seller", "number", "kind", "issue_date"]
    if found:
        return Check("invoice key", "ok", "invoices unique on (seller, number, kind, issue_date)")
    return Check("invoice key", "fail", "invoices lack their unique key (seller, number, kind, issue_date): run init")
