"""Sets of values bound the way each database takes them (`edinbox.stores`: arrays on PostgreSQL, an executemany or
a JSON array on SQLite and MariaDB), through the hub's named queries on every store: the hub's code has no dialect
branch left for them."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from edinbox import AsyncTransaction
from edinbox.hub import HubConfig
from edinbox.hub.database import counts
from edinbox.hub.database._journal import open_inbox
from edinbox.hub.partners._acks import reserve
from edinbox.stores import bindable, fetch_rows, run_rows, stored_time, texts
from hub_ops import init


async def test_a_set_of_rows_counts_and_reserves_on_every_store(hub_config: HubConfig) -> None:
    """`run_rows` adds several outcomes' counts in one call and `fetch_rows` reserves several partners' control numbers
    in one statement, each in the order given, the second call adding to the first; an empty set changes nothing."""
    await init(hub_config)
    async with open_inbox(hub_config) as inbox:

        async def add(tx: AsyncTransaction) -> int:
            rows = [{"outcome": "duplicate", "n": 2}, {"outcome": "processed", "n": 5}]
            await run_rows(tx, "hub_count", rows, consumer="sets", shard=0)
            return await run_rows(tx, "hub_count", [], consumer="sets", shard=0)

        assert await inbox.transaction(add) == 0
        await inbox.transaction(add)
        found = await inbox.read(lambda tx: counts(tx, consumer="sets"))
        assert (found["processed"], found["duplicate"], found["dead"]) == (10, 4, 0)
        first = await inbox.transaction(lambda tx: reserve(tx, {"ZZ:B": 3, "ZZ:A": 1}))
        again = await inbox.transaction(lambda tx: reserve(tx, {"ZZ:A": 2}))
        assert (first, again) == ({"ZZ:A": 1, "ZZ:B": 3}, {"ZZ:A": 3})
        rows = [{"partner": "ZZ:C", "k": 4}]
        fetched = await inbox.transaction(lambda tx: fetch_rows(tx, "hub_reserve_control_numbers", rows))
        assert [(str(p), int(n)) for p, n in fetched] == [("ZZ:C", 4)]


@pytest.mark.parametrize(
    ("dialect", "times", "words"),
    [
        ("postgresql", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), ["a", "b"]),
        ("mysql", datetime(2026, 1, 2, 3, 4, 5), '["a", "b"]'),
        ("sqlite", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp(), '["a", "b"]'),
    ],
)
def test_values_as_each_database_binds_them(dialect: str, times: object, words: object) -> None:
    """A time, a list of texts and an invoice row as each database takes them: SQLite alone needs dates and decimals
    as text."""
    assert stored_time(dialect, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == times
    assert stored_time(dialect, None) is None
    assert texts(dialect, ["a", "b"]) == words
    row = (date(2026, 1, 2), Decimal("10.10"), 3)
    expected = ("2026-01-02", "10.10", 3) if dialect == "sqlite" else row
    assert bindable(dialect, row) == expected
