"""The hub's tables beside the journal: invoices (the SQL accounting sink), rejected payloads, outcome counters, the
acknowledgments sent to partners and the per-partner control numbers they take, each named `edinbox_hub_*` so that
none takes a name an application's own tables have (the README's examples make an `invoices`).

Their DDL and statements are named queries in `edinbox/hub/sql/<dialect>/hub.sql`, added to the journal's store as
the hub's `edinbox.Application` (`_parts.HUB`) and run inside a journal transaction (`tx.unit`): they live in the
journal's schema (`edi.inbox` puts them in `edi`), so one database, one connection and one commit hold a batch's
journal rows, its invoices and its bookkeeping.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from edinbox import AsyncTransaction
from edinbox._async_inbox import AsyncInbox
from edinbox._errors import ConfigurationError, SchemaError
from edinbox.loop import DeliveryOutcome
from edinbox.stores import run_rows

__all__ = [
    "COUNTED",
    "CREATE",
    "SEARCH_INDEXES",
    "SHARDS",
    "TABLES",
    "Parked",
    "check_privileges",
    "check_tables",
    "count",
    "counts",
    "has_hub",
    "park",
    "park_reasons",
]

TABLES = (
    "edinbox_hub_invoices",
    "edinbox_hub_rejected",
    "edinbox_hub_counters",
    "edinbox_hub_control_numbers",
    "edinbox_hub_acknowledgments",
    "edinbox_hub_answers",
    "edinbox_hub_as2_receipts",
    "edinbox_hub_ledger",
    "edinbox_hub_findings",
    "edinbox_hub_console_audit",
)
"""The hub's tables, beside the journal (`edinbox_hub_console_audit`: what operators did in `edinbox console`;
`edinbox_hub_answers`: what was answered once; `edinbox_hub_as2_receipts`: the MDN answered for each AS2 message
received; `edinbox_hub_ledger`: the control numbers partners sent, `_ledger`; `edinbox_hub_findings`: what
validation found per interchange, `_findings`). Their versions are the hub's (`_parts.HUB.migrations`)."""

SEARCH_INDEXES = ("received", "status", "control", "invoice_number", "invoice_message")
"""The indexes the console's search needs (`console_index_<name>` in `hub/sql/<dialect>/console.sql`); the partner
index (`console_index_partner`) is created apart (see `create_partner_index`)."""

COUNTED = (
    DeliveryOutcome.PROCESSED,
    DeliveryOutcome.RESENT,
    DeliveryOutcome.DUPLICATE,
    DeliveryOutcome.CONFLICT,
    DeliveryOutcome.DEAD,
    DeliveryOutcome.REJECTED,
    DeliveryOutcome.BYPASSED,
)
"""What became of each delivered item (an interchange of a delivery, or a whole payload that is not one), counted
once per delivery, redeliveries included, committed with the batch that settled it; `received` is their sum.

- processed: the inbox ran the handler and the interchange's invoices were created.
- resent: the handler ran, and the invoice key found every invoice already in accounting (a partner resend).
- duplicate: the key was journaled with the same content (a producer copy, a redelivery): nothing ran.
- conflict: the key was processed with other content: nothing ran, the copy is kept on the journal row.
- dead: the key is parked in the journal (its handler failed for good, now or before): nothing ran.
- rejected: it could not be journaled (not EDI, no trailer, too big): parked once per content in `rejected`.
- bypassed: its message types are routed around the inbox (acknowledgments): acked, nothing journaled.

The counters also hold `unknown_partners` (`_partners.COUNTER`): the rejected items the partner registry refused,
counted beside their `rejected` outcome (so not part of `received`).
Journal rows are counted apart (`Inbox.stats()`: keys by status), as are the distinct parked payloads.
"""

SHARDS = 64
"""Rows per (consumer, outcome) in the counters table. A batch adds its counts to one shard, picked at random per
batch, and holds that shard's rows locked from its counter update to its commit (the WAL flush included); with one
row, every hub's batches would queue there. Two concurrent batches meet on a row with a chance of 1 in 64; a count
is the sum over the shards, so it stays exact."""

_KEYS = {
    "edinbox_hub_invoices": ["issue_date", "kind", "number", "seller"],
    "edinbox_hub_rejected": ["consumer", "fingerprint"],
    "edinbox_hub_counters": ["consumer", "outcome", "shard"],
    "edinbox_hub_control_numbers": ["partner"],
    "edinbox_hub_acknowledgments": ["control_number", "partner"],
    "edinbox_hub_answers": ["consumer", "delivery", "message_id", "source"],
    "edinbox_hub_as2_receipts": ["consumer", "message_id", "receiver", "sender"],
    "edinbox_hub_ledger": ["consumer", "level", "number", "partner"],
    "edinbox_hub_findings": ["consumer", "message_id", "source"],
}
"""The unique key each table needs (sorted column names): the invoice key is the second safety net."""


@dataclass(frozen=True, slots=True)
class Parked:
    """A payload that cannot be processed, as `park` keeps it: its content's fingerprint, where it came from, why."""

    fingerprint: str
    delivery: str
    reason: str
    payload: bytes


INIT_HINT = "run `edinbox init` (with the owner's rights) to create or repair it"

CREATE = (
    *(
        f"hub_create_{t}"
        for t in (
            "invoices",
            "rejected",
            "counters",
            "control_numbers",
            "acknowledgments",
            "answers",
            "as2_receipts",
            "ledger",
            "findings",
        )
    ),
    "hub_index_ledger_changed",
    "console_create_audit",
    *(f"console_index_{index}" for index in SEARCH_INDEXES),
)
"""The statements that make the hub's tables and the console's indexes at the hub's current version, in order
(`Application.create`: `create_schema()`, so `edinbox init`, runs them in the journal's transaction)."""


async def create_partner_index(tx: AsyncTransaction) -> None:
    """Create the partner search's index (SQLite, MariaDB; none on PostgreSQL, whose search skips through the unique
    key); only `init` calls it."""
    await tx.unit.run("console_extensions", {})
    await tx.unit.run("console_index_partner", {})


async def check_tables(inbox: AsyncInbox) -> None:
    """Raise SchemaError naming the first hub table (or the journal's outbox) that is missing or lacks its key."""
    if await inbox.unique_keys(inbox.outbox) is None:
        raise SchemaError(f"the journal's outbox {inbox.outbox} does not exist: {INIT_HINT}")
    for table, key in _KEYS.items():
        keys = await inbox.unique_keys(table)
        if keys is None:
            raise SchemaError(f"the hub's table {table} does not exist: {INIT_HINT}")
        if key not in keys:
            raise SchemaError(f"the hub's table {table} lacks its unique key ({', '.join(key)}): {INIT_HINT}")


async def has_hub(inbox: AsyncInbox) -> bool:
    """Whether `edinbox init` made the hub's tables beside this journal (its control numbers are there: no migration
    makes that table); a journal made by the library alone (an application, FastStream, Django) has none, and the
    operator commands then show its journal and outbox only. SchemaError naming `edinbox migrate` when the hub's
    tables have the names they had before the hub kept a version of its own."""
    if await inbox.unique_keys("edinbox_hub_control_numbers") is not None:
        return True
    if await inbox.unique_keys("hub_control_numbers") is not None:
        raise SchemaError(
            "the hub's tables beside this journal are from an older edinbox (hub_control_numbers, invoices, ...): "
            "run `edinbox migrate` to upgrade them"
        )
    return False


async def check_privileges(inbox: AsyncInbox) -> None:
    """Raise ConfigurationError naming what the connecting role cannot read or write (PostgreSQL roles)."""
    missing = await inbox.read(lambda tx: tx.unit.fetch("hub_privileges", {}))
    if missing:
        names = ", ".join(str(row[0]) for row in missing)
        raise ConfigurationError(
            f"this role may not read and write {names}: as the owner, run `edinbox init --grant ROLE` for it"
        )


async def count(tx: AsyncTransaction, *, consumer: str, counts: Mapping[str, int], shard: int) -> None:
    """Add per-outcome delivery counts to one shard's rows (`SHARDS`), in the caller's transaction, in one call
    (`edinbox.stores.run_rows`: one statement over arrays on PostgreSQL, one batch of statements elsewhere).

    The outcomes are updated in one order (sorted: the array's order on PostgreSQL), so two transactions on one shard
    never lock its rows in opposite orders (a deadlock).
    """
    rows = [{"outcome": o, "n": counts[o]} for o in sorted(counts) if counts[o]]
    await run_rows(tx, "hub_count", rows, consumer=consumer, shard=shard)


async def park(tx: AsyncTransaction, *, consumer: str, parked: Sequence[Parked]) -> None:
    """Keep payloads that cannot be processed (once per content; a redelivery counts one more delivery), in the
    caller's transaction, in one call (`edinbox.stores.run_rows`: one statement over arrays on PostgreSQL, one batch
    of statements elsewhere): each content once, with the number of the batch's deliveries that carried it."""
    first: dict[str, Parked] = {}
    carried: Counter[str] = Counter()
    for p in parked:
        first.setdefault(p.fingerprint, p)
        carried[p.fingerprint] += 1
    rows = [
        {"fingerprint": f, "delivery": p.delivery, "reason": p.reason, "payload": p.payload, "deliveries": carried[f]}
        for f, p in first.items()
    ]
    await run_rows(tx, "hub_park", rows, consumer=consumer)


async def park_reasons(tx: AsyncTransaction, *, consumer: str, parked: Sequence[Parked]) -> None:
    """Rewrite the reason of payloads parked by `park` (the row of each fingerprint that its delivery parked), in the
    caller's transaction: where the source kept a whole payload, known only once it rejected the delivery."""
    rows = [
        {"consumer": consumer, "fingerprint": p.fingerprint, "delivery": p.delivery, "reason": p.reason} for p in parked
    ]
    if rows:
        await tx.unit.run_many("hub_park_reason", rows)


async def counts(tx: AsyncTransaction, *, consumer: str) -> dict[str, int]:
    """Counters for one consumer (summed over the shards), with every counted outcome present (0 when never seen)."""
    found: dict[str, int] = dict.fromkeys(COUNTED, 0)
    found.update({str(k): int(v) for k, v in await tx.unit.fetch("hub_counts", {"consumer": consumer})})
    return found
