"""Where invoices go: the accounting sink interface and the SQL sink (a table in the journal's transaction).

A sink gets the inbox transaction and the invoices of one new interchange (`create`), or of a batch's new
interchanges at once (`create_many`: the SQL sink inserts a batch's invoices in one call to the driver). It inserts
them with `ON CONFLICT DO NOTHING` on its own unique key (seller, number, kind, issue date): a second safety net for a
partner that re-sends an invoice inside a *new* interchange (a new inbox key). Such an invoice is reported as
`existing`, and the hub counts the interchange as `resent`, not as a failure. An HTTP sink in lease mode plugs in
through the same interface, passing `tx.idempotency_key` on.
"""

from __future__ import annotations

import abc
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edinbox import AsyncTransaction
from edinbox._message import Message
from edinbox.stores import bindable

__all__ = ["Accounting", "Created", "SqlAccounting", "keep_remote", "party_key"]


@dataclass(frozen=True, slots=True)
class Created:
    """What a sink did with one interchange's invoices."""

    created: int
    existing: int
    remote: tuple[str | None, ...] = ()
    """A remote sink's id of each invoice it holds now, in the interchange's order (None: it gave none); empty for a
    sink whose invoices are the `invoices` table's own rows."""


class Accounting(abc.ABC):
    """An accounting system that creates invoices; called once per new interchange, inside the inbox transaction."""

    lease: bool = False
    """True when the effect is not transactional and the inbox must run in lease mode."""

    needs_lines: bool = True
    """False when `create` reads only each invoice's totals and `line_count`: the hub then hands it the invoices
    without their lines (`Invoice.without_lines()`), so a big interchange's lines are never all held at once."""

    @abc.abstractmethod
    async def create(self, tx: AsyncTransaction, message: Message, invoices: Sequence[Any]) -> Created:
        """Create the interchange's invoices (`edinbox.edi.Invoice` values) as part of the transaction `tx`."""

    async def create_many(self, tx: AsyncTransaction, batch: Sequence[tuple[Message, Sequence[Any]]]) -> list[Created]:
        """Create the invoices of several new interchanges in `tx`, one `Created` each, in order (by default one
        `create` call per interchange; a sink that can do it in one request overrides this)."""
        return [await self.create(tx, message, invoices) for message, invoices in batch]


class SqlAccounting(Accounting):
    """The default sink: an `invoices` table in the journal's database and transaction.

    Each interchange's count is what inserting it alone, in the batch's order, finds. On PostgreSQL a batch's invoices
    go in one INSERT over an array per column, which returns whose rows it inserted. Elsewhere they go in one call to
    the driver (an executemany: one trip to SQLite's thread, one multi-row INSERT on MariaDB), after a savepoint. When
    it inserts every row it was given, each interchange created all of its invoices. When it inserts fewer (an
    invoice already there: a partner's resend; or one invoice twice in the batch), it is rolled back to the savepoint;
    the interchanges none of whose invoices exists or recurs in the batch are inserted together again, and the others
    one by one, in order. A data error fails the call, and with it the batch's handler call: the inbox then settles
    each message alone, so only the interchange holding the bad value pays.
    """

    needs_lines = False
    """The table stores each invoice's line count, not its lines."""

    def __init__(self, *, consumer: str) -> None:
        """Write into the `invoices` table beside the journal, recording `consumer` with each invoice."""
        self.consumer = consumer

    async def create(self, tx: AsyncTransaction, message: Message, invoices: Sequence[Any]) -> Created:
        """Insert each invoice unless its (seller, number, kind, issue date) already exists."""
        return (await self.create_many(tx, [(message, invoices)]))[0]

    async def create_many(self, tx: AsyncTransaction, batch: Sequence[tuple[Message, Sequence[Any]]]) -> list[Created]:
        """Insert the invoices of every interchange of `batch`: in one statement on PostgreSQL, elsewhere in one when
        none of them exists yet."""
        rows = [[_row(invoice, message) for invoice in invoices] for message, invoices in batch]
        if tx.dialect == "postgresql":
            return await self._create_returning(tx, [message for message, _ in batch], rows)
        inserted = [0] * len(rows)
        alone = [i for i, invoices in enumerate(rows) if invoices]
        if len(alone) > 1:
            await tx.unit.run("hub_invoices_savepoint", {})
            if await self._insert(tx, [row for i in alone for row in rows[i]]) == sum(map(len, rows)):
                return [Created(created=len(invoices), existing=0) for invoices in rows]
            await tx.unit.run("hub_invoices_rollback", {})
            together = await self._unshared(tx, [rows[i] for i in alone])
            if len(together) > 1:
                group = [alone[k] for k in together]
                if await self._insert(tx, [row for i in group for row in rows[i]]) == sum(len(rows[i]) for i in group):
                    for i in group:
                        inserted[i] = len(rows[i])
                    taken = set(group)
                    alone = [i for i in alone if i not in taken]
                else:  # another transaction committed one of them meanwhile: every interchange alone, then
                    await tx.unit.run("hub_invoices_rollback", {})
        for i in alone:
            inserted[i] = await self._insert(tx, rows[i])
        return [Created(created=n, existing=len(invoices) - n) for n, invoices in zip(inserted, rows, strict=True)]

    async def _create_returning(
        self, tx: AsyncTransaction, messages: Sequence[Message], rows: Sequence[Sequence[tuple[Any, ...]]]
    ) -> list[Created]:
        """PostgreSQL: every row in one INSERT that returns whose rows it inserted (their interchange's source and
        message id), so no savepoint and no second try is needed. The rows go in the arrays' order, so an invoice twice
        in the batch is created by the first interchange that holds it, as inserting them one by one would."""
        every = [row for invoices in rows for row in invoices]
        created: Counter[tuple[str, str]] = Counter()
        if every:
            arrays = zip(_ARRAYS, (list(column) for column in zip(*every, strict=True)), strict=True)
            found = await tx.unit.fetch("hub_insert_invoices", dict(arrays, consumer=self.consumer))
            created.update((row[0], row[1]) for row in found)
        done = [created[(m.source, m.message_id)] for m in messages]
        return [Created(created=n, existing=len(invoices) - n) for n, invoices in zip(done, rows, strict=True)]

    async def _unshared(self, tx: AsyncTransaction, groups: list[list[tuple[Any, ...]]]) -> list[int]:
        """The positions of the groups of invoice rows whose keys are neither in the table nor elsewhere in `groups`."""
        found = await tx.unit.fetch("hub_existing_invoices", self._keys([row for g in groups for row in g]))
        seen = Counter(_key(row) for group in groups for row in group)
        taken = {_key(row) for row in found}
        return [k for k, group in enumerate(groups) if all(seen[_key(r)] == 1 and _key(r) not in taken for r in group)]

    async def _insert(self, tx: AsyncTransaction, rows: Sequence[tuple[Any, ...]]) -> int:
        """Run `hub_insert_invoice` once per row (from `_row`) in one call to the driver; return the rows inserted."""
        consumer = self.consumer
        values = [dict(zip(_COLUMNS, bindable(tx.dialect, row), strict=True), consumer=consumer) for row in rows]
        return int(await tx.unit.run_many("hub_insert_invoice", values))

    @staticmethod
    def _keys(rows: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
        """The invoice keys of `rows` as `hub_existing_invoices` reads them: SQLite's json_each(), MariaDB's
        JSON_TABLE(), one JSON array per key, the date as text."""
        return {"invoices": json.dumps([row[:4] for row in rows], default=str)}


_COLUMNS = (
    "seller",
    "number",
    "kind",
    "issue_date",
    "buyer",
    "currency",
    "total",
    "tax_total",
    "lines",
    "source",
    "message_id",
)
"""The parameters of `hub_insert_invoice`, in the order of `_row`'s values (and `consumer`)."""

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
"""The array parameters of `hub_insert_invoices` on PostgreSQL, one per value of `_row`, in its order."""


def _row(invoice: Any, message: Message) -> tuple[Any, ...]:
    """One invoice's values, in the order of `hub_insert_invoice`."""
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


async def keep_remote(
    tx: AsyncTransaction, message: Message, invoices: Sequence[Any], created: Created, *, consumer: str
) -> None:
    """Keep in the `invoices` table, in `tx`, a row for each invoice of `message` a remote sink holds, with the id it
    gave it (`created.remote`): the local view `stats`, `show` and the console read, since the remote sink's own
    store is out of their reach. An invoice the table holds already is left as it is."""
    values = []
    for invoice, remote_id in zip(invoices, created.remote, strict=False):
        if remote_id is not None:
            row = bindable(tx.dialect, _row(invoice, message))
            values.append(dict(zip(_COLUMNS, row, strict=True), consumer=consumer, remote_id=remote_id))
    if values:
        await tx.unit.run_many("hub_insert_remote_invoice", values)


def _key(row: Sequence[Any]) -> tuple[str, ...]:
    """An invoice's unique key (seller, number, kind, issue date) from a row of `_row` or of the table, as text."""
    return tuple(str(value) for value in row[:4])


def party_key(party: Any) -> str:
    """A party's id (its name when it has no id): what the `invoices` table stores for a seller or buyer."""
    if party is None:
        return ""
    return str(getattr(party, "id", None) or getattr(party, "name", None) or "")
