"""Sets of values as one statement's parameters, the way each database binds them: what an application's code would
otherwise decide with `dialect ==` lives here, beside the stores.

PostgreSQL binds a set as one array per column, which its named query unnests (one statement, one round trip).
SQLite and MariaDB run a row statement once per row in one call to the driver (an executemany), or read a set as
one JSON array of rows (`json_each()`, `JSON_TABLE()`). SQLite has no date or decimal type: dates go as ISO text,
decimals as their exact text. The named query of each dialect (`sql/<dialect>/*.sql`) reads its own form.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Protocol

from edinbox.stores._async_base import AsyncUnit

__all__ = ["Bound", "bindable", "fetch_rows", "run_rows", "stored_time", "texts"]

ARRAYS = frozenset({"postgresql"})
"""The dialects whose named queries take a set as one array per column."""


class Bound(Protocol):
    """Where a set is bound: a transaction's unit and its store's dialect (an `edinbox.AsyncTransaction`)."""

    @property
    def unit(self) -> AsyncUnit:
        """Runs the store's named statements."""

    @property
    def dialect(self) -> str:
        """ "postgresql", "mysql" or "sqlite"."""


def _columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Each name of `rows` bound to the array of its values, in the rows' order."""
    return {name: [row[name] for row in rows] for name in rows[0]}


async def run_rows(tx: Bound, name: str, rows: Sequence[Mapping[str, Any]], **common: Any) -> int:
    """Run the named statement over `rows` (mappings of the same names) with the `common` parameters, in one call to
    the driver; return the rows it changed. PostgreSQL: once, each name of the rows bound to the array of its values;
    elsewhere: once per row, each row with `common`."""
    if not rows:
        return 0
    if tx.dialect in ARRAYS:
        return await tx.unit.run(name, {**common, **_columns(rows)})
    return await tx.unit.run_many(name, [{**common, **row} for row in rows])


async def fetch_rows(tx: Bound, name: str, rows: Sequence[Mapping[str, Any]], **common: Any) -> list[tuple[Any, ...]]:
    """Run the named query over the set `rows` (mappings of the same names) with the `common` parameters, in one
    statement; return its rows. PostgreSQL: each name bound to the array of its values; elsewhere: `rows` bound as one
    JSON array of rows, each its values in order (`:rows`)."""
    if tx.dialect in ARRAYS:
        return await tx.unit.fetch(name, {**common, **(_columns(rows) if rows else {})})
    values = [[row[key] for key in row] for row in rows]
    return await tx.unit.fetch(name, {**common, "rows": json.dumps(values, default=str)})


def bindable(dialect: str, row: Sequence[Any]) -> tuple[Any, ...]:
    """`row`'s values as `dialect` binds them: on SQLite a date as ISO text and a Decimal as its exact text."""
    if dialect != "sqlite":
        return tuple(row)
    return tuple(
        value.isoformat() if isinstance(value, date) else str(value) if isinstance(value, Decimal) else value
        for value in row
    )


def texts(dialect: str, values: Sequence[str]) -> Any:
    """A list of texts as one parameter: an array on PostgreSQL, a JSON array elsewhere."""
    return list(values) if dialect in ARRAYS else json.dumps(list(values))


def stored_time(dialect: str, when: datetime | None) -> Any:
    """A time as the journal stores it: PostgreSQL takes aware datetimes, MariaDB naive UTC ones, SQLite epoch
    seconds."""
    if when is None or dialect == "postgresql":
        return when
    if dialect == "mysql":
        return when.astimezone(UTC).replace(tzinfo=None)
    return when.timestamp()
