"""The operator's view of a hub: counts, parked messages, and the journal commands, as plain values.

Each function works on the open inbox it is given (one connection path): the CLI opens one per command, the console
passes its long-lived one. The CLI renders these as tables or JSON (edinbox.hub.ops._output); nothing here prints.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from edinbox import AsyncTransaction
from edinbox._async_inbox import AsyncInbox
from edinbox._core import MIGRATIONS, SCHEMA_VERSION
from edinbox._errors import ConfigurationError, StoreError
from edinbox._payloads import Kept
from edinbox._records import Record
from edinbox._urls import mask
from edinbox.hub.config import LOGGER, FaultPoint, HubConfig, log_event
from edinbox.hub.database import (
    COUNTED,
    HUB,
    TABLES,
    Purged,
    counts,
    create_partner_index,
    findings_lines,
    has_hub,
    purge,
    read_findings,
    verify,
    verify_found,
)
from edinbox.hub.ops._output import as_dict, json_value, render, visible
from edinbox.hub.ops._preview import preview
from edinbox.hub.ops._redrive import forget_rejected, join_key, rejected_id, rejected_row, split_key, stored_payload
from edinbox.hub.ops._store import kept_fields
from edinbox.hub.partners import COUNTER, KINDS
from edinbox.loop import Outage, Relay

__all__ = [
    "Found",
    "Purged",
    "drop_schema",
    "find",
    "forget",
    "init",
    "join_key",
    "list_rows",
    "migrate",
    "migration_summary",
    "purge",
    "relay",
    "render_shown",
    "requeue",
    "show",
    "split_key",
    "stats",
    "timestamp",
    "write_payload",
]


async def init(inbox: AsyncInbox, *, config: HubConfig, grant: Sequence[str] = ()) -> None:
    """Create the journal and the hub's tables in `inbox` (idempotent; one transaction on PostgreSQL and SQLite, so
    a failure leaves nothing half made; on MariaDB a second run completes a failed one), verify them, and grant each
    runtime role in `grant` exactly what `edinbox run` needs (no DDL); open `config`'s source once, which creates a
    spool folder."""
    if config.source:
        from edinbox.sources import open_source

        async with open_source(config.source, consumer=config.consumer):
            pass
    await inbox.create_schema()  # the journal and the hub's tables, one transaction (MariaDB: steps run again)
    try:
        await inbox.transaction(create_partner_index)
    except StoreError as exc:  # the index not made: the partner search scans instead
        fields = {"index": "partner search", "error": str(exc), "then": "the console's partner search scans"}
        log_event(logging.getLogger(LOGGER), logging.WARNING, "index-not-created", fields)
    await verify(inbox)
    for role in grant:
        await inbox.grant(role, tables=TABLES)


async def drop_schema(inbox: AsyncInbox) -> None:
    """Drop the PostgreSQL schema of the journal and everything in it (the demo's own schema, when done)."""
    await inbox.transaction(lambda tx: tx.unit.run("hub_drop_schema", {}))


async def migrate(inbox: AsyncInbox, *, table: str) -> dict[str, Any]:
    """Upgrade the journal (`table`) to this edinbox's schema version, then the hub's tables (where `edinbox init`
    made them) to the hub's (rows kept, idempotent); say which steps ran."""
    applied = await inbox.migrations()
    hub = applied.get(HUB.name)
    return {
        "table": table,
        "version": SCHEMA_VERSION,
        "applied": [{"version": v, "change": MIGRATIONS[v]} for v in applied["edinbox"]],
        "hub": None
        if hub is None
        else {"version": HUB.version, "applied": [{"version": v, "change": HUB.migrations[v]} for v in hub]},
    }


def migration_summary(result: dict[str, Any]) -> str:
    """`edinbox migrate`'s answer for people: the steps applied, or that there was nothing to do."""
    hub = result.get("hub")
    if not result["applied"]:
        said = f"journal {result['table']} is at schema version {result['version']}: nothing to migrate"
    else:
        steps = "; ".join(f"{step['version']}: {step['change']}" for step in result["applied"])
        said = f"migrated journal {result['table']} to schema version {result['version']} ({steps})"
    if hub and hub["applied"]:
        steps = "; ".join(f"{step['version']}: {step['change']}" for step in hub["applied"])
        said += f"; migrated the hub's tables to version {hub['version']} ({steps})"
    return said


async def stats(inbox: AsyncInbox) -> dict[str, Any]:
    """Journal rows by status (`Stats`), the oldest row's age, the table size and the outbox; where the hub's tables
    exist, also deliveries by outcome (`_tables.COUNTED`, across processes; `received` is their sum), distinct parked
    payloads, invoices and acknowledgments (`hub: false` and none of those on a library journal)."""
    journal = await inbox.stats()
    totals = await inbox.read(lambda tx: tx.unit.fetch("journal_totals", {"consumer": inbox.consumer}))
    oldest, rows = totals[0]
    size = await _table_size(inbox)
    outbox = await inbox.outbox_stats()
    hub = await _hub_stats(inbox, inbox.consumer) if await has_hub(inbox) else {}
    when = timestamp(oldest)
    age = None if when is None else max(0.0, (datetime.now(UTC) - when).total_seconds())
    return {
        "consumer": inbox.consumer,
        "hub": bool(hub),
        **hub,
        "journal": {k: int(v) for k, v in as_dict(journal).items()},
        "journal_rows": int(rows),
        "oldest_row_age_seconds": age,
        "table_bytes": size,
        "outbox": {
            "backlog": outbox.backlog,
            "parked": outbox.parked,
            "sent": outbox.sent,
            "oldest_unsent_age_seconds": None if outbox.oldest_unsent is None else outbox.oldest_unsent.total_seconds(),
        },
    }


async def _hub_stats(inbox: AsyncInbox, consumer: str) -> dict[str, Any]:
    """The hub's part of `stats`: deliveries by outcome, invoices, parked payloads and acknowledgments."""

    async def read(tx: AsyncTransaction) -> tuple[dict[str, int], tuple[Any, ...], int, list[Any]]:
        totals = await tx.unit.fetch("hub_totals", {"consumer": consumer})
        rejections = await tx.unit.fetch("hub_rejection_totals", {"consumer": consumer})
        acks = await tx.unit.fetch("hub_acknowledgment_totals", {"consumer": consumer})
        return await counts(tx, consumer=consumer), totals[0], int(rejections[0][0]), acks

    outcomes, (invoices, rejected), rejections, acks = await inbox.read(read)
    acknowledgments = {"TA1": 0, "997": 0, "999": 0, "CONTRL": 0, "duplicate_notices": 0, "keys": 0, "together": 0}
    acknowledgments["rejections"] = rejections
    for kind, duplicate, n, keys in acks:
        parts = ["duplicate_notices"] if duplicate else str(kind).split(KINDS)
        for part in parts:  # "TA1+997": one of each, sent as one interchange (counted in `together`)
            acknowledgments[part] += int(n)
        acknowledgments["together"] += int(n) * (len(parts) - 1)
        acknowledgments["keys"] += int(keys)
    return {
        "received": sum(outcomes[outcome] for outcome in COUNTED),
        **{outcome: outcomes[outcome] for outcome in COUNTED},
        COUNTER: outcomes.get(COUNTER, 0),
        "invoices": int(invoices),
        "rejected_payloads": int(rejected),
        "acknowledgments": acknowledgments,
    }


async def relay(
    inbox: AsyncInbox,
    *,
    config: HubConfig,
    stop: asyncio.Event,
    once: bool = False,
    limit: int = 100,
    fault: FaultPoint | None = None,
) -> dict[str, int]:
    """Relay the outbox of `inbox` until `stop` is set (or, with `once`, until it is empty), waiting out outages as
    `config` says (`give_up_after`, `poll_timeout`) with its destinations' credentials."""
    logger = logging.getLogger(LOGGER)
    outage = Outage(logger, give_up_after=config.give_up_after)
    await outage.call(lambda: verify_found(inbox), stop=stop)
    idle = config.poll_timeout * 4
    relay = Relay(
        inbox,
        outage=outage,
        stop=stop,
        limit=limit,
        idle=idle,
        fault=fault,
        destinations=config.credentials,
    )
    return dict(await relay.run(once=once))


def timestamp(value: Any) -> datetime | None:
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
        rows = await inbox.read(lambda tx: tx.unit.fetch("table_bytes", {}))
    except StoreError:
        return None
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


async def list_rows(inbox: AsyncInbox, *, status: str | None, limit: int) -> list[dict[str, Any]]:
    """Journal rows (optionally of one status), or parked payloads for `status="rejected"`, newest first."""
    if status == "rejected":  # parked payloads: the hub's (none on a library journal)
        params = {"consumer": inbox.consumer, "limit": limit}
        hub = await has_hub(inbox)
        rows = await inbox.read(lambda tx: tx.unit.fetch("hub_rejected_rows", params)) if hub else []
        return [
            {
                "key": f"rejected/{r[0]}",
                "status": "rejected",
                "delivery": r[1],
                "reason": r[2],
                "deliveries": r[3],
                "at": json_value(timestamp(r[4])),
            }
            for r in rows
        ]
    records = await inbox.records(status=status, limit=limit)
    out = []
    for record in records:
        data = as_dict(record)
        out.append(
            {
                "key": join_key(data["source"], data["message_id"]),
                "source": data["source"],
                "message_id": data["message_id"],
                "status": data["status"],
                "attempts": data.get("attempts"),
                "at": data.get("received_at"),
                "retry_at": data.get("retry_at"),
                "error": data.get("last_error") or "",
            }
        )
    return out


@dataclass(frozen=True, slots=True)
class Found:
    """What `find` read of one key: `show`'s answer (`data`), and the journal row and kept payload it was made from
    (None for a parked payload), for a caller that needs their bytes too (the console's message page)."""

    data: dict[str, Any]
    record: Record | None = None
    kept: Kept | None = None


async def show(inbox: AsyncInbox, key: str) -> dict[str, Any] | None:
    """`edinbox show KEY`'s answer: `find(inbox, key).data`, or None when there is no such key."""
    found = await find(inbox, key)
    return None if found is None else found.data


async def find(inbox: AsyncInbox, key: str) -> Found | None:
    """One journal row (`SOURCE/MESSAGE_ID`) with its payload as the message store kept it (`kept.*`: its digest,
    size and content type; `keep_payloads`), its invoices and the acknowledgments sent for it (an interchange
    parked before it was journaled: its rejection and the acknowledgments that carried it), or one parked payload
    (`rejected/ID`). On a library journal (no hub tables) the row alone, with no invoices and no acknowledgments.

    Payloads come as bounded previews (`_payloads.preview`: EDI segments, text, or hex), with their size and kind.
    """
    number = rejected_id(key)
    hub = await has_hub(inbox)
    if number is not None:
        r = await rejected_row(inbox, consumer=inbox.consumer, number=number) if hub else None
        if r is None:
            return None
        return Found(
            {
                "key": key,
                "status": "rejected",
                "delivery": r[1],
                "reason": r[2],
                "deliveries": r[3],
                "at": json_value(timestamp(r[4])),
                **_previewed("payload", bytes(r[5])),
            }
        )
    source, message_id = split_key(key)
    key_params = {"consumer": inbox.consumer, "source": source, "message_id": message_id}
    invoices: list[Any] = []
    acks: list[Any] = []
    rejection: list[Any] = []
    if hub:
        invoices = await inbox.read(lambda tx: tx.unit.fetch("hub_invoices_of", key_params))
        acks = await inbox.read(lambda tx: tx.unit.fetch("hub_acknowledgments_of", key_params))
        rejection = await inbox.read(lambda tx: tx.unit.fetch("hub_answers_of", key_params))
    validated = await inbox.read(lambda tx: read_findings(tx, **key_params)) if hub else None  # what validation found
    record = await inbox.get(source, message_id)
    kept = await inbox.payload(source, message_id)  # the message store's copy (keep_payloads)
    if record is None and not rejection and validated is None:
        return None
    rejected_at = json_value(timestamp(rejection[0][1])) if rejection else None
    if record is None:  # parked before it was journaled: its rejection is all there is (the payload: `rejected/N`)
        data: dict[str, Any] = {
            "key": join_key(source, message_id),
            "source": source,
            "message_id": message_id,
            "status": "parked",
            "rejected_at": rejected_at,
        }
    else:
        data = {"key": join_key(source, message_id), **as_dict(record), "rejected_at": rejected_at}
        data.update(_previewed("payload", record.payload if kept is None else kept.payload), **kept_fields(kept))
        data.update(_previewed("conflict_payload", record.conflict_payload))
    data["invoices"] = [
        {
            "seller": i[0],
            "number": i[1],
            "kind": i[2],
            "issue_date": json_value(i[3]),
            "total": str(i[4]),
            "currency": i[5],
            **({"remote_id": i[6]} if i[6] is not None else {}),
        }
        for i in invoices
    ]
    data["acknowledgments"] = [
        {
            "kind": a[0],
            "duplicate": bool(a[1]),
            "answer": "duplicate notice" if a[1] else "rejection" if record is None else "acknowledgment",
            "control_number": a[2],
            "key": a[3],
            "at": json_value(a[4]),
            "destination": mask(a[5]) if a[5] else None,
            "status": "sent" if a[6] else "parked" if a[7] else "waiting" if a[5] else "purged",
            "reason": a[8],
        }
        for a in acks
    ]
    data.update({"validated": {**validated, "at": json_value(timestamp(validated["at"]))}} if validated else {})
    return Found(data, record, kept)


def _previewed(field: str, payload: bytes | None) -> dict[str, Any]:
    """`field` as a bounded preview, with `field_bytes` (its size) and `field_kind` ("edi", "text", "binary")."""
    if payload is None:
        return {field: None}
    shown = preview(payload)
    return {field: shown.text, f"{field}_bytes": shown.size, f"{field}_kind": shown.kind}


def render_shown(data: dict[str, Any]) -> str:
    """`show` for people: one `field  value` line each, then each payload preview as an indented block."""
    blocks = [name for name in ("payload", "conflict_payload") if data.get(name) is not None]
    hidden = {*blocks, *(f"{name}_{part}" for name in blocks for part in ("bytes", "kind")), "validated"}
    text = render({k: v for k, v in data.items() if k not in hidden}, as_json=False)
    if data.get("validated") is not None:
        text += "".join(f"\n{line}" for line in findings_lines(data["validated"]))
    for name in blocks:
        lines = str(data[name]).splitlines() or [""]
        head = f"{name} ({data[f'{name}_bytes']} bytes, {data[f'{name}_kind']}):"
        text += "\n" + head + "".join(f"\n  {visible(line)}" for line in lines)
    return text


async def write_payload(inbox: AsyncInbox, key: str, path: Path) -> int:
    """Write the raw bytes stored under `key` (a journal row or `rejected/N`) to `path`; return how many."""
    number = rejected_id(key)
    if number is not None:
        row = await rejected_row(inbox, consumer=inbox.consumer, number=number)
        payload = None if row is None else bytes(row[5])
    else:
        record = await inbox.get(*split_key(key))
        if record is None:
            raise ConfigurationError(f"no row {key!r} for consumer {inbox.consumer!r}")
        kept = await inbox.payload(*split_key(key))
        payload = stored_payload(record) if kept is None else kept.payload
    if payload is None:
        raise ConfigurationError(f"{key!r} keeps no payload")
    await asyncio.to_thread(path.write_bytes, payload)
    return len(payload)


async def requeue(inbox: AsyncInbox, key: str) -> bool:
    """Make a dead or conflicting journal row processable again; False when there was none."""
    if rejected_id(key) is not None:
        raise ConfigurationError(
            f"{key!r} is a parked payload, not a journal row: fix its cause, then `edinbox replay {key}`"
        )
    source, message_id = split_key(key)
    return bool(await inbox.requeue(source, message_id))


async def forget(inbox: AsyncInbox, key: str) -> bool:
    """Delete a journal row so the next delivery of that key is processed again, or a parked payload
    (`rejected/N`); False when there was none."""
    number = rejected_id(key)
    if number is not None:
        return await forget_rejected(inbox, number)
    source, message_id = split_key(key)
    return bool(await inbox.forget(source, message_id))
