"""The hub's tables beside the journal: invoices (the SQL accounting sink), rejected payloads, outcome counters.

They live in the journal's schema (`edi.inbox` puts them in `edi`), so one database and one transaction hold the
journal row and the invoices it created.
"""

from __future__ import annotations

from collections.abc import Mapping

from edinbox.hub._db import Database

__all__ = ["COUNTED", "bump_counters", "create_tables", "hub_counts"]

COUNTED = ("processed", "duplicate", "conflict", "dead", "resent", "bypassed", "rejected")
"""The per-delivery outcomes the hub counts across processes (`resent`: the invoice key caught a partner resend)."""

_DDL = {
    "postgresql": (
        "CREATE SCHEMA IF NOT EXISTS {schema}",
        """CREATE TABLE IF NOT EXISTS {invoices} (
            id BIGSERIAL PRIMARY KEY,
            seller TEXT NOT NULL, number TEXT NOT NULL, kind TEXT NOT NULL, issue_date DATE NOT NULL,
            buyer TEXT NOT NULL, currency TEXT, total NUMERIC(20, 4), tax_total NUMERIC(20, 4), lines INTEGER NOT NULL,
            consumer TEXT NOT NULL, source TEXT NOT NULL, message_id TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            CONSTRAINT invoices_key UNIQUE (seller, number, kind, issue_date))""",
        """CREATE TABLE IF NOT EXISTS {rejected} (
            id BIGSERIAL PRIMARY KEY, consumer TEXT NOT NULL, fingerprint TEXT NOT NULL, delivery TEXT NOT NULL,
            reason TEXT NOT NULL, payload BYTEA NOT NULL, deliveries INTEGER NOT NULL DEFAULT 1,
            rejected_at TIMESTAMPTZ NOT NULL DEFAULT now(), UNIQUE (consumer, fingerprint))""",
        """CREATE TABLE IF NOT EXISTS {counters} (
            consumer TEXT NOT NULL, outcome TEXT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (consumer, outcome))""",
    ),
    "sqlite": (
        """CREATE TABLE IF NOT EXISTS {invoices} (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            seller TEXT NOT NULL, number TEXT NOT NULL, kind TEXT NOT NULL, issue_date TEXT NOT NULL,
            buyer TEXT NOT NULL, currency TEXT, total TEXT, tax_total TEXT, lines INTEGER NOT NULL,
            consumer TEXT NOT NULL, source TEXT NOT NULL, message_id TEXT NOT NULL,
            created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
            CONSTRAINT invoices_key UNIQUE (seller, number, kind, issue_date))""",
        """CREATE TABLE IF NOT EXISTS {rejected} (
            id INTEGER PRIMARY KEY AUTOINCREMENT, consumer TEXT NOT NULL, fingerprint TEXT NOT NULL,
            delivery TEXT NOT NULL, reason TEXT NOT NULL, payload BLOB NOT NULL,
            deliveries INTEGER NOT NULL DEFAULT 1,
            rejected_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
            UNIQUE (consumer, fingerprint))""",
        """CREATE TABLE IF NOT EXISTS {counters} (
            consumer TEXT NOT NULL, outcome TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (consumer, outcome))""",
    ),
}

BUMP = """INSERT INTO {counters} AS c (consumer, outcome, n) VALUES (?, ?, ?)
    ON CONFLICT (consumer, outcome) DO UPDATE SET n = c.n + excluded.n"""


async def create_tables(db: Database) -> None:
    """Create the hub's tables if they are missing (idempotent) and commit."""
    for ddl in _DDL[db.dialect]:
        if "{schema}" in ddl:
            if db.names.schema is None:
                continue
            from psycopg import sql

            await db.connection.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(db.names.schema))
            )
            continue
        await db.execute(ddl)
    await db.commit()


async def bump_counters(db: Database, consumer: str, counts: Mapping[str, int]) -> None:
    """Add per-outcome delivery counts (in the caller's transaction; the caller commits)."""
    for outcome, n in counts.items():
        if n:
            await db.execute(BUMP, (consumer, outcome, n))


async def hub_counts(db: Database, consumer: str) -> dict[str, int]:
    """Counters for one consumer, with every counted outcome present (0 when never seen)."""
    rows = await db.rows("SELECT outcome, n FROM {counters} WHERE consumer = ?", (consumer,))
    counts = dict.fromkeys(COUNTED, 0)
    counts.update({str(k): int(v) for k, v in rows})
    return counts
