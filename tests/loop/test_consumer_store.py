"""The consumer loop with the message store (`keep_payloads`), as a library user runs it on SQLite and PostgreSQL:
the payloads kept in the settling transactions are indexed by the loop itself when its source is idle, so a search
later has nothing left to index."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from edinbox import AsyncConsumer, Inbox, Message, Tx, consume
from edinbox.sources.spool import publish
from services import POSTGRES_URL, require_service

MESSAGES = [(f"m{i}", b"UNB+UNOC:3+5790000000005:14+5013546107732:14'BGM+220+PO-%05d+9'" % i) for i in range(30)]


@pytest.fixture(params=["sqlite", "postgresql"])
def journal(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A journal made by the library alone (URL, table) on SQLite or PostgreSQL (a schema of its own, dropped)."""
    if request.param == "sqlite":
        db, table = f"sqlite:///{tmp_path}/app.db", "inbox"
    else:
        require_service("postgres")
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{unique_name}"')
        db, table = POSTGRES_URL, f"{unique_name}.inbox"
    with Inbox(db, consumer="app", table=table) as inbox:
        inbox.create_schema()
    yield db, table
    if request.param == "postgresql":
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{unique_name}" CASCADE')


def kept(db: str, table: str) -> tuple[int, int]:
    """The journal's kept payloads of consumer `app`, and how many of them wait for their index."""
    waits = f"rowid > (SELECT indexed_to FROM {table}_payloads_mark)" if db.startswith("sqlite") else "words IS NULL"

    def read(tx: Tx) -> tuple[int, int]:
        cursor = tx.connection.cursor()
        cursor.execute(f"SELECT count(*), count(CASE WHEN {waits} THEN 1 END) FROM {table}_payloads")
        total, waiting = cursor.fetchone()
        return int(total), int(waiting)

    with Inbox(db, consumer="app", table=table) as inbox:
        return inbox.transaction(read)


async def test_the_loop_indexes_the_kept_payloads_when_its_source_is_idle(
    journal: tuple[str, str], tmp_path: Path
) -> None:
    """A consumer with `keep_payloads` left running (not `once`): once its source is idle, every payload it kept is
    indexed by the loop before anything searches (on SQLite; PostgreSQL indexes them as they settle), and a search
    then finds a value inside one."""
    db, table = journal
    source = f"dir://{tmp_path}/spool"
    await publish(source, MESSAGES)

    async def handler(tx: Tx, message: Message) -> None:
        """The side effect: none (the store is what is looked at)."""

    stop = asyncio.Event()
    consumer = AsyncConsumer(
        source, handler, db=db, table=table, consumer="app", keep_payloads=True, batch_size=10, poll_timeout=0.1
    )
    running = asyncio.ensure_future(consumer.run(stop=stop))
    try:
        deadline = time.monotonic() + 30
        while (found := await asyncio.to_thread(kept, db, table)) != (30, 0):
            assert time.monotonic() < deadline, f"kept and waiting: {found}"
            assert not running.done()
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        totals = await running
    assert totals == {"processed": 30}
    with Inbox(db, consumer="app", table=table) as inbox:
        assert [hit.message_id for hit in inbox.search("PO-00017")] == ["m17"]


def test_a_consumer_without_the_store_keeps_nothing(journal: tuple[str, str], tmp_path: Path) -> None:
    """`keep_payloads` off (the library's default): the loop settles and keeps no payload."""
    db, table = journal
    source = f"dir://{tmp_path}/spool"
    asyncio.run(publish(source, MESSAGES[:5]))
    totals = consume(source, lambda tx, m: None, db=db, table=table, consumer="app", once=True, idle_timeout=0.3)
    assert totals == {"processed": 5}
    assert kept(db, table) == (0, 0)


def test_consume_once_leaves_no_kept_payload_waiting(journal: tuple[str, str], tmp_path: Path) -> None:
    """`consume(..., keep_payloads=True, once=True)` with a plain handler (a sync inbox in a thread keeps them):
    every payload kept is indexed when it returns."""
    db, table = journal
    source = f"dir://{tmp_path}/spool"
    asyncio.run(publish(source, MESSAGES))
    totals = consume(
        source, lambda tx, m: None, db=db, table=table, consumer="app", keep_payloads=True, once=True, idle_timeout=0.3
    )
    assert totals == {"processed": 30}
    assert kept(db, table) == (30, 0)


def test_a_busy_loop_catches_its_index_up_every_few_seconds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop that stays busy indexes nothing between its catch-ups (`EVERY` seconds apart); a catch-up indexes
    batch after batch until nothing waits (1,200 payloads: three batches), within its `BUSY_BUDGET`, and one batch
    when that budget is spent at once; so a busy hour leaves no backlog for the first search to pay."""
    import logging

    from edinbox import AsyncInbox
    from edinbox.loop import _index
    from edinbox.loop._outage import Outage

    async def nothing(tx: object, messages: object) -> None:
        """A batch handler with no effect."""

    async def run() -> list[int]:
        async with AsyncInbox(f"sqlite:///{tmp_path}/app.db", consumer="app", keep_payloads=True) as inbox:
            await inbox.create_schema()
            messages = [Message(f"m{i}", "s", b"BGM+220+PO-%05d+9'" % i) for i in range(1700)]
            for start in range(0, 1700, 100):
                await inbox.process_batch(messages[start : start + 100], nothing)
            outage = Outage(logging.getLogger("edinbox.test"), give_up_after=None)
            indexer = _index.Indexer(inbox, outage=outage, enabled=True)
            steps = [await indexer.step(100)]  # busy, within `EVERY` of the last catch-up
            monkeypatch.setattr(_index, "EVERY", 0.0)
            monkeypatch.setattr(_index, "BUSY_BUDGET", 0.0)
            steps.append(await indexer.step(100))  # the budget spent at once: one batch
            monkeypatch.setattr(_index, "BUSY_BUDGET", 60.0)
            steps.append(await indexer.step(100))
            steps.append(await inbox.index_payloads())
            return steps

    assert asyncio.run(run()) == [0, 500, 1200, 0]
