"""The hub's tables beside the journal: invoices (the SQL accounting sink), rejected payloads, outcome counters.

Their DDL is in `edinbox/sql/<dialect>/hub.sql`. They live in the journal's schema (`edi.inbox` puts them in
`edi`), so one database and one transaction hold the journal row and the invoices it created.
"""

from __future__ import annotations

from collections.abc import Mapping

from edinbox.hub._db import Database
from edinbox.stores._queries import load_queries

__all__ = ["COUNTED", "bump_counters", "create_tables", "hub_counts"]

COUNTED = ("processed", "duplicate", "conflict", "dead", "resent", "bypassed", "rejected")
"""The per-delivery outcomes the hub counts across processes (`resent`: the invoice key caught a partner resend)."""

BUMP = """INSERT INTO {counters} AS c (consumer, outcome, n) VALUES (?, ?, ?)
    ON CONFLICT (consumer, outcome) DO UPDATE SET n = c.n + excluded.n"""


async def create_tables(db: Database) -> None:
    """Create the hub's tables if they are missing (idempotent) and commit."""
    if db.dialect == "postgresql" and db.names.schema is not None:
        from psycopg import sql

        await db.connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(db.names.schema)))
    for ddl in load_queries(db.dialect, "hub").values():
        await db.execute(ddl)
    await db.commit()


async def bump_counters(db: Database, *, consumer: str, counts: Mapping[str, int]) -> None:
    """Add per-outcome delivery counts (in the caller's transaction; the caller commits)."""
    for outcome, n in counts.items():
        if n:
            await db.execute(BUMP, (consumer, outcome, n))


async def hub_counts(db: Database, *, consumer: str) -> dict[str, int]:
    """Counters for one consumer, with every counted outcome present (0 when never seen)."""
    rows = await db.rows("SELECT outcome, n FROM {counters} WHERE consumer = ?", (consumer,))
    counts = dict.fromkeys(COUNTED, 0)
    counts.update({str(k): int(v) for k, v in rows})
    return counts
