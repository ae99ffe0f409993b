"""The console's search and schema on every database, without a browser: filters, pages, and `init`'s indexes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from edinbox import Message
from edinbox.console._data import PAGE, Query, search, segments
from edinbox.hub import HubConfig
from edinbox.hub.database._journal import open_inbox
from edinbox.hub.database._tables import SEARCH_INDEXES
from edinbox.hub.demo._traffic import PARTNERS, Doc, render
from hub.conftest import drop_schema
from hub_ops import init
from services import MYSQL_URL, drop_database, require_service


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def config(request: pytest.FixtureRequest, tmp_path: Path, unique_name: str) -> Iterator[HubConfig]:
    """An initialised hub database: a SQLite file, a fresh PostgreSQL schema or a fresh MariaDB database (dropped
    afterwards)."""
    if request.param == "sqlite":
        cfg = HubConfig(db=f"sqlite:///{tmp_path / 'h.db'}")
        asyncio.run(init(cfg))
        yield cfg
        return
    if request.param == "mysql":
        require_service("mariadb")
        cfg = HubConfig(db=MYSQL_URL, table=f"{unique_name}.inbox")
        try:
            asyncio.run(init(cfg))
            yield cfg
        finally:
            drop_database(unique_name)
        return
    url = request.getfixturevalue("postgres_url")
    cfg = HubConfig(db=url, table=f"{unique_name}.inbox")
    asyncio.run(init(cfg))
    yield cfg
    drop_schema(url, unique_name)


async def fill(cfg: HubConfig, n: int) -> None:
    """`n` processed messages from two partners, and one dead one."""
    async with open_inbox(cfg.with_overrides(retry_first="0s")) as inbox:  # no wait between the failures
        messages = [Message(f"{i:09d}", f"X12:ZZ:{'ACME' if i % 2 else 'GLOBEX'}>ZZ:HUB", b"x") for i in range(n)]

        async def nothing(tx: object, batch: list[Message]) -> None:
            return None

        await inbox.process_batch(messages, nothing)

        async def fail(tx: object, message: Message) -> None:
            raise RuntimeError("refused")

        dead = Message("999999999", "X12:ZZ:ACME_%>ZZ:HUB", b"x")
        for _ in range(cfg.max_attempts):
            with contextlib.suppress(RuntimeError):
                await inbox.process(dead, fail)


def test_filters_and_pages(config: HubConfig) -> None:
    """Partner (wildcards literal), control number, status, dates and pages each narrow the rows as they say."""

    async def check() -> None:
        await fill(config, PAGE + 11)
        async with open_inbox(config) as inbox:
            first, more = await search(inbox, Query())
            assert (len(first), more) == (PAGE, True)
            second, more = await search(inbox, Query(page=2))
            assert (len(second), more) == (12, False)
            assert not {r.key for r in first} & {r.key for r in second}
            acme, _ = await search(inbox, Query(partner="acme", page=1))
            assert len(acme) == 31  # 30 odd numbers below 61, and the dead one; matched without case
            literal, _ = await search(inbox, Query(partner="ACME_%"))
            assert [r.message_id for r in literal] == ["999999999"]  # _ and % are characters, not wildcards
            (one,), _ = await search(inbox, Query(control="000000007"))
            assert (one.partner, one.status) == ("ZZ:ACME", "processed")
            (dead,), _ = await search(inbox, Query(status="dead"))
            assert dead.last_error.endswith("refused")
            now = datetime.now(UTC)
            recent, _ = await search(inbox, Query(since=now - timedelta(hours=1), until=now + timedelta(hours=1)))
            assert len(recent) == PAGE
            future, more = await search(inbox, Query(since=now + timedelta(days=1)))
            assert (future, more) == ([], False)
            unknown, _ = await search(inbox, Query(invoice="NO-SUCH"))
            assert unknown == []

    asyncio.run(check())


def test_init_creates_the_search_indexes_idempotently(config: HubConfig) -> None:
    """`edinbox init` creates each search index once (run twice: no error, no second copy)."""
    asyncio.run(init(config))
    partner = () if config.db.startswith("postgresql") else ("partner",)  # PostgreSQL's search skips the unique key
    names = [f"inbox_{name}_index" for name in (*SEARCH_INDEXES, *partner)]
    if config.db.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(config.db.removeprefix("sqlite:///")) as conn:
            found = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    elif config.db.startswith("mysql"):
        import pymysql

        schema = config.table.split(".")[0]
        connection = pymysql.connect(host="127.0.0.1", port=3306, user="root")
        with connection, connection.cursor() as cursor:
            cursor.execute("SELECT index_name FROM information_schema.statistics WHERE table_schema = %s", (schema,))
            found = {r[0] for r in cursor.fetchall()}
    else:
        import psycopg

        schema = config.table.split(".")[0]
        with psycopg.connect(config.db) as conn:
            rows = conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,)).fetchall()
            found = {r[0] for r in rows}
    assert set(names) <= found


def test_segments_one_per_line_with_release_characters() -> None:
    """An interchange is shown one segment per line; a released terminator stays inside its segment."""
    doc = Doc(PARTNERS[4], "R1", "invoice", "INV-R'1", lines=())
    lines = segments(render(doc))
    assert lines[0] == "UNA:+.? '"
    assert lines[-1] == "UNZ+1+R1'"
    assert "BGM+380+INV-R?'1+9'" in lines
    assert segments(b"not edi\nsecond line") == ["not edi", "second line"]
    assert segments(None) == []
