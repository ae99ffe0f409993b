"""Where invoices go: the accounting sink interface and the SQL sink (a table in the journal's transaction).

A sink gets the inbox transaction and the invoices of one new interchange (`create`), or of a batch's new
interchanges at once (`create_many`: the SQL sink inserts a batch's invoices in one statement). It inserts them with
`ON CONFLICT DO NOTHING` on its own unique key (seller, number, kind, issue date): a second safety net for a
partner that re-sends an invoice inside a *new* interchange (a new inbox key). Such an invoice is reported as
`existing`, and the hub counts the interchange as `resent`, not as a failure. An HTTP sink in lease mode plugs in
through the same interface, passing `tx.idempotency_key` on.
"""

from __future__ import annotations

import abc
import json
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

    async def create_many(self, tx: Any, batch: Sequence[tuple[Message, Sequence[Any]]]) -> list[Created]:
        """Create the invoices of several new interchanges in `tx`, one `Created` each, in order (by default one
        `create` call per interchange; a sink that can do it in one request overrides this)."""
        return [await self.create(tx, message, invoices) for message, invoices in batch]


class SqlAccounting(Accounting):
    """The default sink: an `invoices` table in the journal's database and transaction.

    A batch's invoices are inserted in one statement. When it inserts every row it was given, each interchange
    created all of its invoices. When it inserts fewer (an invoice already there: a partner's resend, or twice in the
    batch), the statement is rolled back to a savepoint and each interchange is inserted by itself, in order, so each
    one's count is exactly what inserting it alone finds. A data error fails the statement, and with it the batch's
    handler call: the inbox then settles each message alone, so only the interchange holding the bad value pays.
    """

    needs_lines = False
    """The table stores each invoice's line count, not its lines."""

    def __init__(self, *, consumer: str) -> None:
        """Write into the `invoices` table beside the journal, recording `consumer` with each invoice."""
        self.consumer = consumer

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Insert each invoice unless its (seller, number, kind, issue date) already exists."""
        return (await self.create_many(tx, [(message, invoices)]))[0]

    async def create_many(self, tx: Any, batch: Sequence[tuple[Message, Sequence[Any]]]) -> list[Created]:
        """Insert the invoices of every interchange of `batch` in one statement when none of them exists yet."""
        with_invoices = [(message, invoices) for message, invoices in batch if invoices]
        if len(with_invoices) > 1:
            await tx.unit.run("hub_invoices_savepoint", {})
            if await self._insert(tx, with_invoices) == sum(len(invoices) for _, invoices in with_invoices):
                return [Created(created=len(invoices), existing=0) for _, invoices in batch]
            await tx.unit.run("hub_invoices_rollback", {})
        results = []
        for message, invoices in batch:
            inserted = await self._insert(tx, [(message, invoices)]) if invoices else 0
            results.append(Created(created=inserted, existing=len(invoices) - inserted))
        return results

    async def _insert(self, tx: Any, batch: Sequence[tuple[Message, Sequence[Any]]]) -> int:
        """Run `hub_insert_invoices` on the invoices of `batch`; return the number of rows it inserted."""
        rows = [_row(invoice, message) for message, invoices in batch for invoice in invoices]
        if tx.dialect == "postgresql":  # one array per column, for unnest()
            params: dict[str, Any] = dict(
                zip(_ARRAYS, (list(column) for column in zip(*rows, strict=True)), strict=True)
            )
        else:  # SQLite's json_each(), MariaDB's JSON_TABLE(): one JSON array per row, dates and decimals as text
            params = {"invoices": json.dumps(rows, default=str)}
        return int(await tx.unit.run("hub_insert_invoices", {**params, "consumer": self.consumer}))


_ARRAYS = (
    "sellers",
    "numbers",
    "kinds",
    "issue_dates",
    "buyers",
    "currencies",
    "totals",
    "tax_totals",
    "lines",
    "sources",
    "message_ids",
)
"""The parameters of `hub_insert_invoices` on PostgreSQL, in the order of `_row`'s values."""


def _row(invoice: Any, message: Message) -> tuple[Any, ...]:
    """One invoice's values, in the order of `hub_insert_invoices`."""
    return (
        party_key(invoice.seller),
        invoice.number,
        invoice.kind,
        invoice.issue_date,
        party_key(invoice.buyer),
        invoice.currency,
        invoice.total,
        invoice.tax_total,
        invoice.line_count,
        message.source,
        message.message_id,
    )


def party_key(party: Any) -> str:
    """A party's id (its name when it has no id): what the `invoices` table stores for a seller or buyer."""
    if party is None:
        return ""
    return str(getattr(party, "id", None) or getattr(party, "name", None) or "")
