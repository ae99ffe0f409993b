"""What the console reads and changes, as plain values: search, one message, parked lists, the dashboard, the audit.

Every statement is a named query of `hub/sql/<dialect>/console.sql` (or the hub's, through `edinbox.hub.ops._ops`),
run by the journal's store with driver-bound parameters. The console runs no DDL: `edinbox init` made its table
and indexes. Journal changes go through the same operations as the CLI (`requeue`, `forget`), and each one
is recorded in the audit table with who asked, when, and what came of it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from edinbox import AsyncTransaction, edi
from edinbox._async_inbox import AsyncInbox
from edinbox._errors import ConfigurationError
from edinbox._logs import log_event
from edinbox.hub.config import HubConfig
from edinbox.hub.database import has_hub
from edinbox.hub.ops import forget, join_key, replay, requeue, stats
from edinbox.hub.partners import Ledger, report
from edinbox.stores import stored_time, texts

__all__ = [
    "ACTIONS",
    "PAGE",
    "REJECTED_ACTIONS",
    "Query",
    "Row",
    "act",
    "audit_rows",
    "dashboard",
    "partners",
    "search",
    "segments",
    "trace_ids",
]

PAGE = 50
"""Rows per page of search results."""
TEXT_HITS = 500
"""The most kept payloads a search by a value inside the documents finds (the newest)."""

STATUSES = ("processed", "in_progress", "failed", "requeued", "dead", "conflict")


async def _replay(config: HubConfig, inbox: AsyncInbox, key: str) -> bool:
    """Re-publish the payload kept under `key` to the hub's source, as `edinbox replay KEY` does."""
    await replay(inbox, key, to=config.source)
    return True


async def _requeue(config: HubConfig, inbox: AsyncInbox, key: str) -> bool:
    """Make a dead or conflicting row processable again, as `edinbox requeue KEY` does."""
    return await requeue(inbox, key)


async def _forget(config: HubConfig, inbox: AsyncInbox, key: str) -> bool:
    """Delete a journal row or a parked payload, as `edinbox forget KEY` does."""
    return await forget(inbox, key)


ACTIONS: dict[str, Callable[[HubConfig, AsyncInbox, str], Awaitable[bool]]] = {
    "requeue": _requeue,
    "replay": _replay,
    "forget": _forget,
}
"""The operator's actions on one journal key: the same operations as `edinbox requeue`, `replay` and `forget`."""

REJECTED_ACTIONS = ("replay", "forget")
"""What can be done to a rejected payload (`rejected/N`): it has no journal row to requeue."""


@dataclass(frozen=True, slots=True)
class Query:
    """A search: every filter optional; `page` counts from 1."""

    partner: str = ""
    control: str = ""
    invoice: str = ""
    text: str = ""
    """Any value inside the documents (a PO number, a GLN): found among the kept payloads (`AsyncInbox.search`)."""
    status: str = ""
    since: datetime | None = None
    until: datetime | None = None
    page: int = 1


@dataclass(frozen=True, slots=True)
class Row:
    """One journal row in a result list."""

    source: str
    message_id: str
    status: str
    attempts: int
    received_at: datetime | None
    conflicts: int
    last_error: str

    @property
    def key(self) -> str:
        """`SOURCE/MESSAGE_ID`, as the CLI prints and takes it (`join_key`: a `/` inside a part is `%2F`)."""
        return join_key(self.source, self.message_id)

    @property
    def partner(self) -> str:
        """The sender of the interchange (`ZZ:ACME`), or "" for a key that is not an interchange's."""
        return edi.partner(self.source)


def _like(text: str) -> str:
    """A substring pattern for LIKE / ILIKE with the wildcards of `text` escaped (backslash is the escape)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _at(inbox: AsyncInbox, when: datetime | None) -> Any:
    """A time as the journal stores it (`edinbox.stores.stored_time`)."""
    return stored_time(inbox.dialect, when)


def _when(inbox: AsyncInbox, value: Any) -> datetime | None:
    """A timestamp the journal returned, as an aware datetime (MariaDB's are naive, in UTC)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(float(value), UTC)


def _texts(inbox: AsyncInbox, values: list[str]) -> Any:
    """A list of texts as the search binds it (`edinbox.stores.texts`: an array on PostgreSQL, else JSON)."""
    return texts(inbox.dialect, values)


async def search(inbox: AsyncInbox, query: Query) -> tuple[list[Row], bool]:
    """One page of journal rows matching `query`, newest first, and whether another page follows.

    An invoice number is resolved first to the keys of the messages that created such invoices, so that both
    lookups use their index (a correlated EXISTS inside the optional filter would be checked row by row); a partner
    to the consumer's sources holding it (one probe of the unique key per distinct source), so the rows are found
    by exact source and no index on the source's text is needed.
    """
    keys: set[tuple[str, str]] | None = None
    if invoice := query.invoice.strip():
        if not await has_hub(inbox):  # invoices are the hub's: a library journal has none to search by
            return [], False
        lookup = {"consumer": inbox.consumer, "invoice": invoice}
        keys = {(r[0], r[1]) for r in await inbox.read(lambda tx: tx.unit.fetch("console_invoice_keys", lookup))}
        if not keys:
            return [], False
    if text := query.text.strip():  # the kept payloads holding it, as keys, as an invoice number gives them
        holding = {(f.source, f.message_id) for f in await inbox.search(text, limit=TEXT_HITS)}
        keys = holding if keys is None else keys & holding
        if not keys:
            return [], False
    partners: list[str] | None = None
    if partner := query.partner.strip():  # the consumer's sources holding it: then the rows by exact source
        lookup = {"consumer": inbox.consumer, "partner": _like(partner)}
        partners = [str(r[0]) for r in await inbox.read(lambda tx: tx.unit.fetch("console_partner_sources", lookup))]
        if not partners:
            return [], False
    params = {
        "consumer": inbox.consumer,
        "status": query.status or None,
        "control": query.control.strip() or None,
        "partners": None if partners is None else _texts(inbox, partners),
        "ids": None if keys is None else _texts(inbox, sorted({k[1] for k in keys})),
        "sources": None if keys is None else _texts(inbox, sorted({k[0] for k in keys})),
        "since": _at(inbox, query.since),
        "until": _at(inbox, query.until),
        "limit": PAGE + 1,
        "offset": (max(query.page, 1) - 1) * PAGE,
    }
    found = await inbox.read(lambda tx: tx.unit.fetch("console_search", params))
    rows = [Row(r[0], r[1], r[2], int(r[3]), _when(inbox, r[4]), int(r[5]), r[6] or "") for r in found]
    if keys is not None:  # sources x ids may pair a source with another source's id
        rows = [row for row in rows if (row.source, row.message_id) in keys]
    return rows[:PAGE], len(rows) > PAGE


def trace_ids(traceparent: object) -> tuple[str, str] | None:
    """The trace id and span id of a stored W3C traceparent (`00-<trace>-<span>-<flags>`), None if it is not one."""
    parts = traceparent.split("-") if isinstance(traceparent, str) else []
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    if any(c not in "0123456789abcdef" for c in parts[1] + parts[2]):
        return None
    return parts[1], parts[2]


def segments(payload: bytes | None) -> list[str]:
    """The payload's EDI segments one per line (release characters honoured); its text lines if it is not EDI."""
    if not payload:
        return []
    try:
        interchanges = edi.parse(payload)
    except edi.EdiSyntaxError:
        interchanges = []
    if not interchanges:
        return payload.decode("utf-8", "replace").splitlines()
    lines: list[str] = []
    for interchange in interchanges:
        text = interchange.raw.decode("latin-1")
        terminator, release = interchange.separators.segment, interchange.separators.release
        current: list[str] = []
        escaped = False
        for char in text:
            if char == terminator and not escaped:
                lines.append("".join(current).lstrip("\r\n") + terminator)  # UNA's trailing space is data
                current = []
                continue
            escaped = release is not None and char == release and not escaped
            current.append(char)
        if "".join(current).strip():
            lines.append("".join(current).strip())
    return lines


async def act(config: HubConfig, inbox: AsyncInbox, *, action: str, key: str, who: str) -> bool:
    """Run an operator's action on a key and record it in the audit table; True when a row changed."""
    try:
        changed = await ACTIONS[action](config, inbox, key)
    except ConfigurationError as exc:  # refused (nothing to replay, no source): recorded, then shown to the operator
        await _audit(inbox, who=who, action=action, key=key, result=f"refused: {exc}")
        raise
    await _audit(inbox, who=who, action=action, key=key, result="done" if changed else "no such row")
    return changed


async def _audited(inbox: AsyncInbox) -> bool:
    """Whether `edinbox init` made the audit table beside this journal (a library journal has none)."""
    return await inbox.unique_keys("edinbox_hub_console_audit") is not None


async def _audit(inbox: AsyncInbox, *, who: str, action: str, key: str, result: str) -> None:
    """Record one operator action and its result in the audit table; on a journal without one (made by the library,
    not `edinbox init`), in the console's log instead."""
    params = {"who": who, "action": action, "target": key, "result": result}
    if not await _audited(inbox):
        then = "no audit table: run `edinbox init` to keep one"
        log_event(logging.getLogger("edinbox.console"), logging.WARNING, "audit", {**params, "then": then})
        return
    await inbox.transaction(lambda tx: tx.unit.run("console_audit", params))


async def partners(config: HubConfig, inbox: AsyncInbox, *, partner: str | None = None) -> list[Ledger]:
    """Each partner's health from the control-number ledger (of one `partner`): per level, last seen, volume, open
    gaps, duplicates within the hub's `duplicate_window`, out-of-order numbers; none on a library journal."""
    if not await has_hub(inbox):
        return []
    window = config.duplicate_window
    return await inbox.read(lambda tx: report(tx, consumer=inbox.consumer, window=window, partner=partner))


async def audit_rows(inbox: AsyncInbox, *, limit: int = 100) -> list[dict[str, Any]]:
    """The audit table, newest first: who did what to which key, when, and what came of it (none without one)."""
    if not await _audited(inbox):
        return []
    rows = await inbox.read(lambda tx: tx.unit.fetch("console_audit_rows", {"limit": limit}))
    return [{"at": _when(inbox, r[0]), "who": r[1], "action": r[2], "target": r[3], "result": r[4]} for r in rows]


async def dashboard(config: HubConfig, inbox: AsyncInbox, *, hours: int = 3) -> dict[str, Any]:
    """Journal rows per minute by status over the last `hours`, the duplicates rate, the top partners, the
    journal's size and its oldest failed row."""
    now = datetime.now(UTC)
    since = now - timedelta(hours=hours)
    params = {"consumer": inbox.consumer, "since": _at(inbox, since)}

    async def read(tx: AsyncTransaction) -> tuple[list[Any], list[Any]]:
        minutes = await tx.unit.fetch("console_per_minute", params)
        sources = await tx.unit.fetch("console_top_sources", {**params, "since": _at(inbox, now - timedelta(days=1))})
        return minutes, sources

    minutes, sources = await inbox.read(read)
    per_minute: dict[int, Counter[str]] = {}
    for minute, status, n in minutes:
        per_minute.setdefault(int(minute), Counter())[str(status)] += int(n)
    partners: Counter[str] = Counter()
    for source, n in sources:
        partners[edi.partner(str(source)) or str(source)] += int(n)
    totals = await stats(inbox)
    oldest = await inbox.oldest()
    failed = [when for status, when in oldest.items() if status in ("failed", "dead")]
    received = totals.get("received") or 0  # deliveries are the hub's counters: none on a library journal
    return {
        "since": since,
        "now": now,
        "per_minute": per_minute,
        "top_partners": partners.most_common(10),
        "duplicates_rate": (totals.get("duplicate", 0) / received) if received else 0.0,
        "totals": totals,
        "oldest_failed": min(failed) if failed else None,
    }
