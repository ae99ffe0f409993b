"""The hub's sharded counters: the hub's version 2 (the journal's version 4 until the hub kept its own chain) upgrades
the one-row-per-outcome table with its counts kept, a count is the sum over the shards, and batches on different
shards do not wait for each other's commit."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any

import psycopg
import pymysql
import pytest

from edinbox import SchemaError
from edinbox._core import MIGRATIONS
from edinbox.hub import HubConfig
from edinbox.hub.database._journal import open_inbox, verify
from edinbox.hub.database._tables import COUNTED, TABLES, count, counts
from hub_ops import init, migrate

Admin = Callable[[str, tuple[Any, ...]], list[Any]]

VERSION_3 = {
    "postgresql": "CREATE TABLE {t} (consumer TEXT NOT NULL, outcome TEXT NOT NULL, n BIGINT NOT NULL,"
    " PRIMARY KEY (consumer, outcome))",
    "sqlite": "CREATE TABLE {t} (consumer TEXT NOT NULL, outcome TEXT NOT NULL, n INTEGER NOT NULL,"
    " PRIMARY KEY (consumer, outcome))",
    "mysql": "CREATE TABLE {t} (consumer VARBINARY(512) NOT NULL, outcome VARCHAR(32) NOT NULL, n BIGINT NOT NULL,"
    " PRIMARY KEY (consumer, outcome)) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4",
}
"""The counters table as `edinbox init` created it up to schema version 3 (frozen: never edit)."""

OLD_NAMES = {
    "edinbox_hub_invoices": "invoices",
    "edinbox_hub_rejected": "rejected",
    "edinbox_hub_console_audit": "console_audit",
}
"""The hub's tables' names before the hub's version 3 (the others were `hub_<name>`)."""

OLD_COUNTS = [("hub", "processed", 7), ("hub", "duplicate", 3), ("hub", "dead", 1), ("other", "processed", 5)]


def _dialect(config: HubConfig) -> str:
    """The SQL dialect of the hub's database."""
    return "sqlite" if config.db.startswith("sqlite") else "mysql" if config.db.startswith("mysql") else "postgresql"


def _admin(config: HubConfig) -> tuple[Admin, Callable[[str], str], Callable[[], None]]:
    """(run admin SQL, a table beside the journal by name, quoted, close) for the hub's database."""
    dialect = _dialect(config)
    if dialect == "sqlite":
        connection = sqlite3.connect(config.db.removeprefix("sqlite:///"), isolation_level=None)
        return (lambda q, p: connection.execute(q, p).fetchall()), (lambda name: f'"{name}"'), connection.close
    schema = config.table.split(".")[0]
    if dialect == "mysql":
        my = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)

        def run_mysql(q: str, p: tuple[Any, ...]) -> list[Any]:
            with my.cursor() as cursor:
                cursor.execute(q.replace("?", "%s"), p or None)
                return list(cursor.fetchall())

        return run_mysql, (lambda name: f"`{schema}`.`{name}`"), my.close
    pg = psycopg.connect(config.db, autocommit=True)

    def run_pg(q: str, p: tuple[Any, ...]) -> list[Any]:
        cursor = pg.execute(q.replace("?", "%s").encode(), p)
        return cursor.fetchall() if cursor.description else []

    return run_pg, (lambda name: f'"{schema}"."{name}"'), pg.close


def _rewind_to_version_3(config: HubConfig) -> None:
    """Put back the hub of schema version 3: its tables under their old names with no version row of the hub's, the
    counters table of then with counts in it, and the journal's version row 3."""
    run, beside, close = _admin(config)
    try:
        for table in TABLES:
            old = OLD_NAMES.get(table, table.removeprefix("edinbox_"))
            target = beside(old) if _dialect(config) == "mysql" else f'"{old}"'
            run(f"ALTER TABLE {beside(table)} RENAME TO {target}", ())
        run(f"DROP TABLE {beside('edinbox_applications')}", ())
        counters = beside("hub_counters")
        run(f"DROP TABLE {counters}", ())
        run(VERSION_3[_dialect(config)].format(t=counters), ())
        for row in OLD_COUNTS:
            run(f"INSERT INTO {counters} (consumer, outcome, n) VALUES (?, ?, ?)", row)
        run(f"UPDATE {beside('inbox_version')} SET version = 3", ())
        if _dialect(config) == "sqlite":  # the journal's columns of versions 8 and 10: SQLite cannot add them twice
            run('ALTER TABLE "inbox" DROP COLUMN trace', ())
            run('ALTER TABLE "inbox" DROP COLUMN retry_at', ())
            run('ALTER TABLE "invoices" DROP COLUMN remote_id', ())  # the invoices' column of the hub's step 6
    finally:
        close()


def _columns(config: HubConfig) -> list[tuple[Any, ...]]:
    """The counters table's columns (name, type, nullability, default) and primary key, in a comparable form."""
    run, _, close = _admin(config)
    try:
        dialect = _dialect(config)
        if dialect == "sqlite":
            return [
                tuple(row)
                for row in run(
                    "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('edinbox_hub_counters')", ()
                )
            ]
        schema = config.table.split(".")[0]
        kind = "column_type" if dialect == "mysql" else "data_type"
        columns = run(
            f"SELECT column_name, {kind}, is_nullable, column_default FROM information_schema.columns"
            " WHERE table_schema = ? AND table_name = 'edinbox_hub_counters' ORDER BY ordinal_position",
            (schema,),
        )
        key = run(
            "SELECT k.column_name FROM information_schema.key_column_usage k"
            " JOIN information_schema.table_constraints c ON c.constraint_name = k.constraint_name"
            " AND c.table_schema = k.table_schema AND c.table_name = k.table_name"
            " WHERE k.table_schema = ? AND k.table_name = 'edinbox_hub_counters' AND c.constraint_type = 'PRIMARY KEY'"
            " ORDER BY k.ordinal_position",
            (schema,),
        )
        return [tuple(str(v) for v in row) for row in columns] + [tuple(str(r[0]) for r in key)]
    finally:
        close()


async def _counts(config: HubConfig, consumer: str = "hub") -> dict[str, int]:
    """The counters of `consumer`, as `stats` reads them."""
    async with open_inbox(config) as inbox:
        found: dict[str, int] = await inbox.read(lambda tx: counts(tx, consumer=consumer))
        return found


async def _add(config: HubConfig, shard: int, added: dict[str, int]) -> None:
    """Add counts to one shard in a transaction of their own, as a batch does."""
    async with open_inbox(config) as inbox:
        await inbox.transaction(lambda tx: count(tx, consumer="hub", counts=added, shard=shard))


def test_version_3_counters_migrate_with_their_counts(hub_config: HubConfig, tmp_path: Any, unique_name: str) -> None:
    """A version-3 hub (one counters row per consumer and outcome) is refused until `edinbox migrate`; the step keeps
    every count, gives the table the shape `init` creates now, and later batches add on any shard to exact sums."""
    config = hub_config.model_copy(update={"consumer": "hub"})
    _rewind_to_version_3(config)

    async def refused() -> None:
        async with open_inbox(config) as inbox:
            await verify(inbox)

    with pytest.raises(SchemaError, match="edinbox migrate"):
        asyncio.run(refused())
    result = asyncio.run(migrate(config))
    assert [step["version"] for step in result["applied"]] == [v for v in sorted(MIGRATIONS) if v >= 4]
    # taken as version 1: no row before
    assert [step["version"] for step in result["hub"]["applied"]] == [2, 3, 4, 5, 6, 7, 8]
    again = asyncio.run(migrate(config))
    assert (again["applied"], again["hub"]["applied"]) == ([], [])

    async def verified() -> None:
        async with open_inbox(config) as inbox:
            await verify(inbox)  # the tables' unique keys included

    asyncio.run(verified())
    expected = {**dict.fromkeys(COUNTED, 0), "processed": 7, "duplicate": 3, "dead": 1}
    assert asyncio.run(_counts(config)) == expected
    assert asyncio.run(_counts(config, "other"))["processed"] == 5
    asyncio.run(_add(config, 0, {"processed": 2}))
    asyncio.run(_add(config, 17, {"processed": 4, "resent": 1}))
    assert asyncio.run(_counts(config)) == {**expected, "processed": 13, "resent": 1}
    fresh = _fresh(config, tmp_path, unique_name)
    try:
        assert _columns(config) == _columns(fresh)
    finally:
        _drop(fresh, unique_name)


def _fresh(config: HubConfig, tmp_path: Any, unique_name: str) -> HubConfig:
    """A hub `init` makes now, beside the migrated one (another SQLite file, schema or database)."""
    if _dialect(config) == "sqlite":
        fresh = config.model_copy(update={"db": f"sqlite:///{tmp_path / 'fresh.db'}"})
    else:
        fresh = config.model_copy(update={"table": f"{unique_name}f.inbox"})
    asyncio.run(init(fresh))
    return fresh


def _drop(fresh: HubConfig, unique_name: str) -> None:
    """Drop the fresh hub's schema or database (a SQLite file goes with the test's folder)."""
    if _dialect(fresh) == "sqlite":
        return
    run, _, close = _admin(fresh)
    try:
        mysql = _dialect(fresh) == "mysql"
        run(f"DROP DATABASE `{unique_name}f`" if mysql else f'DROP SCHEMA "{unique_name}f" CASCADE', ())
    finally:
        close()


@pytest.mark.parametrize("hub_config", ["postgresql", "mysql"], indirect=True)  # SQLite: one writer, no row locks
def test_batches_on_other_shards_do_not_wait(hub_config: HubConfig) -> None:
    """While one transaction holds its counter update uncommitted, another on a different shard commits at once,
    and one on the same shard waits for it: the shard is what separates concurrent hubs' batches."""
    config = hub_config.model_copy(update={"consumer": "hub"})

    async def main() -> tuple[bool, bool]:
        async with open_inbox(config) as inbox:
            holding, release = asyncio.Event(), asyncio.Event()

            async def hold(tx: Any) -> None:
                await count(tx, consumer="hub", counts={"processed": 1}, shard=1)
                holding.set()
                await release.wait()

            held = asyncio.create_task(inbox.transaction(hold))
            await holding.wait()
            other = asyncio.create_task(
                inbox.transaction(lambda tx: count(tx, consumer="hub", counts={"processed": 1}, shard=2))
            )
            other_done = (await asyncio.wait({other}, timeout=60))[0] == {other}
            same = asyncio.create_task(
                inbox.transaction(lambda tx: count(tx, consumer="hub", counts={"processed": 1}, shard=1))
            )
            same_waited = not (await asyncio.wait({same}, timeout=1))[0]
            release.set()
            await asyncio.gather(held, other, same)
            return other_done, same_waited

    other_done, same_waited = asyncio.run(main())
    assert other_done
    assert same_waited
    assert asyncio.run(_counts(config))["processed"] == 3


def test_a_batch_adds_its_counts_in_one_statement(hub_config: HubConfig) -> None:
    """Several outcomes' counts add up exactly on every database; on PostgreSQL they go in one statement (an array of
    outcomes and one of counts), elsewhere one per outcome."""
    config = hub_config.model_copy(update={"consumer": "hub"})
    sent: list[int] = []

    async def main() -> None:
        async with open_inbox(config) as inbox:

            async def add(tx: Any) -> None:
                unit = tx.unit
                run, run_many = unit.run, unit.run_many

                async def one(name: str, params: Any) -> Any:
                    sent.append(1)
                    return await run(name, params)

                async def many(name: str, params: Any) -> Any:
                    sent.append(len(params))
                    return await run_many(name, params)

                unit.run, unit.run_many = one, many
                try:
                    await count(
                        tx, consumer="hub", counts={"processed": 5, "duplicate": 2, "dead": 0, "rejected": 1}, shard=3
                    )
                finally:
                    del unit.run, unit.run_many

            await inbox.transaction(add)
            await inbox.transaction(lambda tx: count(tx, consumer="hub", counts={"processed": 1}, shard=4))

    asyncio.run(main())
    assert sent == ([1] if _dialect(config) == "postgresql" else [3])
    assert asyncio.run(_counts(config)) == {**dict.fromkeys(COUNTED, 0), "processed": 6, "duplicate": 2, "rejected": 1}
