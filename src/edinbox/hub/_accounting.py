"""Where invoices go: the accounting sink interface and the SQL sink (a table in the journal's transaction).

A sink gets the inbox transaction and the invoices of one new interchange. The SQL sink inserts them with
`ON CONFLICT DO NOTHING` on its own unique key (seller, number, kind, issue date): a second safety net for a
partner that re-sends an invoice inside a *new* interchange (a new inbox key). Such an invoice is reported as
`existing`, and the hub counts the interchange as `resent`, not as a failure. An HTTP sink in lease mode plugs in
through the same interface, passing `tx.idempotency_key` on.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edinbox._message import Message

__all__ = ["Accounting", "Created", "SqlAccounting", "party_key"]


@dataclass(frozen=True, slots=True)
class Created:
    """What a sink did with one interchange's invoices."""

    created: int
    existing: int


class Accounting(abc.ABC):
    """An accounting system that creates invoices; called once per new interchange, inside the inbox transaction."""

    lease: bool = False
    """True when the effect is not transactional and the inbox must run in lease mode."""

    needs_lines: bool = True
    """False when `create` reads only each invoice's totals and `line_count`: the hub then hands it the invoices
    without their lines (`Invoice.without_lines()`), so a big interchange's lines are never all held at once."""

    @abc.abstractmethod
    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Create the interchange's invoices (`edinbox.edi.Invoice` values) as part of the transaction `tx`."""


class SqlAccounting(Accounting):
    """The default sink: an `invoices` table in the journal's database and transaction."""

    needs_lines = False
    """The table stores each invoice's line count, not its lines."""

    def __init__(self, *, consumer: str) -> None:
        """Write into the `invoices` table beside the journal, recording `consumer` with each invoice."""
        self.consumer = consumer

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Insert each invoice unless its (seller, number, kind, issue date) already exists."""
        created = 0
        sqlite = tx.dialect == "sqlite"
        for invoice in invoices:
            params = {
                "seller": party_key(invoice.seller),
                "number": invoice.number,
                "kind": invoice.kind,
                "issue_date": invoice.issue_date.isoformat() if sqlite else invoice.issue_date,
                "buyer": party_key(invoice.buyer),
                "currency": invoice.currency,
                "total": _money(invoice.total, sqlite=sqlite),
                "tax_total": _money(invoice.tax_total, sqlite=sqlite),
                "lines": invoice.line_count,
                "consumer": self.consumer,
                "source": message.source,
                "message_id": message.message_id,
            }
            created += await tx.unit.run("hub_insert_invoice", params)
        return Created(created=created, existing=len(invoices) - created)


def party_key(party: Any) -> str:
    """A party's id (its name when it has no id): what the `invoices` table stores for a seller or buyer."""
    if party is None:
        return ""
    return str(getattr(party, "id", None) or getattr(party, "name", None) or "")


def _money(value: Any, *, sqlite: bool) -> Any:
    """Decimals stay exact: as text on SQLite, NUMERIC on PostgreSQL."""
    if value is None:
        return None
    return str(value) if sqlite else value
