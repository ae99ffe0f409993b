"""SQLAlchemy: process(..., session=) joins the session's transaction on PostgreSQL, MariaDB and SQLite, sync and
async; an Inbox built from an Engine uses the engine's database."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from edinbox import AsyncInbox, Inbox, Message, Outcome, Status, Tx
from services import MYSQL_URL, POSTGRES_URL, drop_database, require_service
from threads import in_threads


class Boom(Exception):
    """A handler failure."""


@dataclass
class Database:
    """One database as SQLAlchemy reaches it: sync and async URLs, the journal's table, the business table."""

    sync_url: str
    async_url: str
    table: str
    effects: Table


@pytest.fixture(params=["postgresql", "mysql", "sqlite"])
def database(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[Database]:
    """A fresh journal (schema-qualified where the database has schemas) and a business table beside it."""
    schema: str | None = unique_name
    if request.param == "postgresql":
        require_service("postgres")
        plain = POSTGRES_URL.split("://", 1)[1]
        urls = (f"postgresql+psycopg://{plain}", f"postgresql+psycopg://{plain}")
    elif request.param == "mysql":
        require_service("mariadb")
        plain = MYSQL_URL.split("://", 1)[1]
        urls = (f"mysql+pymysql://{plain}", f"mysql+asyncmy://{plain}")
    else:
        schema = None
        urls = (f"sqlite:///{tmp_path / 'app.db'}", f"sqlite+aiosqlite:///{tmp_path / 'app.db'}")
    effects = Table(
        "effects", MetaData(), Column("id", Integer, primary_key=True), Column("note", String(8)), schema=schema
    )
    engine = create_engine(urls[0])
    table = f"{schema}.inbox" if schema else "inbox"
    with Inbox(engine, consumer="c", table=table) as inbox:
        inbox.create_schema()  # creates the schema (PostgreSQL) or database (MariaDB) too
    effects.metadata.create_all(engine)
    yield Database(urls[0], urls[1], table, effects)
    if request.param == "postgresql":
        with engine.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    elif request.param == "mysql":
        drop_database(unique_name)
    engine.dispose()


def count(database: Database, sql: str) -> int:
    """One number, read on a connection of its own (committed rows only)."""
    engine = create_engine(database.sync_url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(text(sql)).scalar_one())
    finally:
        engine.dispose()


def add_effect(database: Database, note: str = "effect") -> Any:
    """A handler adding a business row through the session it gets as tx.connection."""

    def handler(tx: Tx, message: Message) -> None:
        tx.connection.execute(database.effects.insert().values(note=note))

    return handler


def test_the_journal_row_commits_and_rolls_back_with_the_session(database: Database) -> None:
    """The inbox never commits the session: the caller's rollback drops the journal row and the effect, its
    commit keeps both; a redelivery is then DUPLICATE without calling the handler."""
    engine = create_engine(database.sync_url)
    inbox = Inbox(engine, consumer="c", table=database.table)
    calls: list[str] = []

    def handler(tx: Tx, message: Message) -> None:
        calls.append(message.message_id)
        assert isinstance(tx.connection, Session)
        add_effect(database)(tx, message)

    try:
        with Session(engine) as session:
            assert inbox.process(Message("1", "s"), handler, session=session) is Outcome.PROCESSED
            assert count(database, f"SELECT count(*) FROM {database.table}") == 0  # not committed by the inbox
            session.rollback()
        assert count(database, f"SELECT count(*) FROM {database.effects.fullname}") == 0
        with Session(engine) as session:
            session.execute(database.effects.insert().values(note="caller"))
            assert inbox.process(Message("1", "s"), handler, session=session) is Outcome.PROCESSED
            session.commit()
        with Session(engine) as session:
            assert inbox.process(Message("1", "s"), handler, session=session) is Outcome.DUPLICATE
            session.execute(database.effects.insert().values(note="after"))
            session.commit()
        assert calls == ["1", "1"]
        assert count(database, f"SELECT count(*) FROM {database.table}") == 1
        assert count(database, f"SELECT count(*) FROM {database.effects.fullname}") == 3
    finally:
        inbox.close()
        engine.dispose()


def test_a_handler_failure_discards_its_orm_work_and_keeps_the_callers(database: Database) -> None:
    """A failing handler's statements and its session work roll back to the savepoint; the caller's earlier work
    and the recorded attempt commit with the session; the next delivery runs the handler again."""
    engine = create_engine(database.sync_url)
    inbox = Inbox(engine, consumer="c", table=database.table)

    def failing(tx: Tx, message: Message) -> None:
        add_effect(database, "lost")(tx, message)
        raise Boom

    try:
        with Session(engine) as session:
            session.execute(database.effects.insert().values(note="caller"))
            with pytest.raises(Boom):
                inbox.process(Message("1", "s"), failing, session=session)
            session.commit()
        assert count(database, f"SELECT count(*) FROM {database.effects.fullname} WHERE note = 'lost'") == 0
        assert count(database, f"SELECT count(*) FROM {database.effects.fullname}") == 1
        assert inbox.get("s", "1").attempts == 1  # type: ignore[union-attr]
        with Session(engine) as session:
            assert inbox.process(Message("1", "s"), add_effect(database), session=session) is Outcome.PROCESSED
            session.commit()
        assert inbox.get("s", "1").status is Status.PROCESSED  # type: ignore[union-attr]
    finally:
        inbox.close()
        engine.dispose()


@pytest.mark.parametrize("database", ["postgresql", "mysql"], indirect=True)  # SQLite stores any length
def test_a_value_the_database_refuses_at_flush_parks_the_message(database: Database) -> None:
    """A value too long for the business column, refused when the session flushes, is the message's permanent
    fault: DEAD with a DataError reason, nothing of it written (on the databases that enforce VARCHAR lengths)."""
    engine = create_engine(database.sync_url)
    inbox = Inbox(engine, consumer="c", table=database.table, max_attempts=5)
    try:
        with Session(engine) as session:
            handler = add_effect(database, "far too long for eight")
            assert inbox.process(Message("1", "s"), handler, session=session) is Outcome.DEAD
            session.commit()
        record = inbox.get("s", "1")
        assert record is not None
        assert record.last_error is not None
        assert record.last_error.startswith("DataError: ")
        assert count(database, f"SELECT count(*) FROM {database.effects.fullname}") == 0
    finally:
        inbox.close()
        engine.dispose()


def test_two_sessions_delivering_one_message_at_once_make_one_effect(database: Database) -> None:
    """Two threads, each with its own session, deliver the same message at the same moment: one effect; the
    other waits for the first commit and gets DUPLICATE."""
    engine = create_engine(database.sync_url, connect_args={"timeout": 30} if "sqlite" in database.sync_url else {})
    inbox = Inbox(engine, consumer="c", table=database.table)
    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]

    def slow(tx: Tx, message: Message) -> None:
        add_effect(database)(tx, message)
        tx.connection.flush()
        threading.Event().wait(0.2)

    def deliver(index: int) -> None:
        with Session(engine) as session:
            session.connection()  # connect before the start line
            barrier.wait()
            try:
                results[index] = inbox.process(Message("1", "s"), slow, session=session)
                session.commit()
            except Exception as exc:
                results[index] = exc

    in_threads(lambda: deliver(0), lambda: deliver(1))
    inbox.close()
    engine.dispose()
    assert sorted(str(r) for r in results) == ["Outcome.DUPLICATE", "Outcome.PROCESSED"]
    assert count(database, f"SELECT count(*) FROM {database.effects.fullname}") == 1


def test_async_session_joins_the_same_way(database: Database) -> None:
    """AsyncInbox with an AsyncSession (psycopg, asyncmy, aiosqlite): rollback drops, commit keeps, then DUPLICATE;
    an AsyncInbox built from the AsyncEngine reads the same journal."""

    async def handler(tx: Tx, message: Message) -> None:
        assert isinstance(tx.connection, AsyncSession)
        await tx.connection.execute(database.effects.insert().values(note="async"))

    async def scenario() -> list[Outcome]:
        engine = create_async_engine(database.async_url)
        outcomes = []
        async with AsyncInbox(engine, consumer="c", table=database.table) as inbox:
            async with AsyncSession(engine) as session:
                outcomes.append(await inbox.process(Message("1", "s"), handler, session=session))
                await session.rollback()
            async with AsyncSession(engine) as session:
                outcomes.append(await inbox.process(Message("1", "s"), handler, session=session))
                await session.commit()
            async with AsyncSession(engine) as session:
                outcomes.append(await inbox.process(Message("1", "s"), handler, session=session))
                await session.commit()
            outcomes.append(Outcome(str((await inbox.get("s", "1")).status.value)))  # type: ignore[union-attr]
        await engine.dispose()
        return outcomes

    assert asyncio.run(scenario()) == [Outcome.PROCESSED, Outcome.PROCESSED, Outcome.DUPLICATE, Outcome.PROCESSED]
    assert count(database, f"SELECT count(*) FROM {database.effects.fullname}") == 1


def test_an_in_memory_sqlite_engine_is_refused() -> None:
    """An in-memory SQLite engine is one database per connection: the inbox refuses to open its own."""
    from edinbox import ConfigurationError

    with pytest.raises(ConfigurationError, match="in-memory"):
        Inbox(create_engine("sqlite://"), consumer="c")


def test_lease_mode_has_no_session_to_join(database: Database) -> None:
    """Lease mode runs the handler outside any transaction: with a session it is a ConfigurationError."""
    from datetime import timedelta

    from edinbox import ConfigurationError

    engine = create_engine(database.sync_url)
    try:
        with (
            Inbox(engine, consumer="c", table=database.table) as inbox,
            Session(engine) as session,
            pytest.raises(ConfigurationError, match="lease"),
        ):
            inbox.process(Message("1", "s"), add_effect(database), session=session, lease=timedelta(seconds=5))
    finally:
        engine.dispose()


def add_effects(database: Database, note: str = "effect", *, fail_on: str | None = None) -> Any:
    """A batch handler adding one business row per message through the session (tx.connection); it raises Boom
    when it meets message `fail_on`, after adding that message's row."""

    def handler(tx: Tx, messages: list[Message]) -> None:
        assert isinstance(tx.connection, Session)
        for message in messages:
            tx.connection.execute(database.effects.insert().values(note=note))
            if message.message_id == fail_on:
                raise Boom

    return handler


def test_a_batch_joins_the_session_and_commits_or_rolls_back_with_it(database: Database) -> None:
    """process_batch(session=) writes the journal rows and the handler's work in the session's transaction and
    never commits it: the caller's rollback drops them, its commit keeps them (with the caller's own row and what
    before_commit wrote through the session); a redelivered batch is all DUPLICATE."""
    engine = create_engine(database.sync_url)
    inbox = Inbox(engine, consumer="c", table=database.table)
    batch = [Message(str(n), "s") for n in range(3)]

    def bookkeeping(tx: Tx, outcomes: list[Outcome]) -> None:
        assert isinstance(tx.connection, Session)
        tx.connection.execute(database.effects.insert().values(note="books"))

    try:
        with Session(engine) as session:
            assert inbox.process_batch(batch, add_effects(database), session=session) == [Outcome.PROCESSED] * 3
            assert count(database, f"SELECT count(*) FROM {database.table}") == 0  # not committed by the inbox
            session.rollback()
        assert count(database, f"SELECT count(*) FROM {database.effects.fullname}") == 0
        with Session(engine) as session:
            session.execute(database.effects.insert().values(note="caller"))
            outcomes = inbox.process_batch(batch, add_effects(database), before_commit=bookkeeping, session=session)
            assert outcomes == [Outcome.PROCESSED] * 3
            session.commit()
        with Session(engine) as session:
            assert inbox.process_batch(batch, add_effects(database), session=session) == [Outcome.DUPLICATE] * 3
            session.commit()
        assert count(database, f"SELECT count(*) FROM {database.table} WHERE status = 'processed'") == 3
        assert count(database, f"SELECT count(*) FROM {database.effects.fullname} WHERE note = 'effect'") == 3
        assert count(database, f"SELECT count(*) FROM {database.effects.fullname}") == 5  # + caller, books
    finally:
        inbox.close()
        engine.dispose()


def test_a_batch_in_a_session_keeps_its_payloads_found_again_after_forget(database: Database) -> None:
    """process_batch(session=) with `keep_payloads` keeps each payload in the session's transaction; a message
    forgotten and processed again in a later batch replaces what was kept of it: the search finds the new value, not
    the old one."""
    engine = create_engine(database.sync_url)
    inbox = Inbox(engine, consumer="c", table=database.table, keep_payloads=True)
    batch = [Message(str(n), "s", b"BGM+220+PO-%05d+9'" % n) for n in range(3)]
    try:
        with Session(engine) as session:
            assert inbox.process_batch(batch, add_effects(database), session=session) == [Outcome.PROCESSED] * 3
            session.commit()
        assert [hit.message_id for hit in inbox.search("PO-00001")] == ["1"]
        assert inbox.forget("s", "1")
        again = [Message("1", "s", b"BGM+220+PO-99001+9'"), Message("3", "s", b"BGM+220+PO-00003+9'")]
        with Session(engine) as session:
            assert inbox.process_batch(again, add_effects(database), session=session) == [Outcome.PROCESSED] * 2
            session.commit()
        assert inbox.search("PO-00001") == []
        assert [hit.message_id for hit in inbox.search("PO-99001")] == ["1"]
        assert [hit.message_id for hit in inbox.search("PO-00003")] == ["3"]
    finally:
        inbox.close()
        engine.dispose()


def test_a_failing_batch_in_a_session_keeps_the_callers_work(database: Database) -> None:
    """A batch handler failure rolls back to the savepoint (its rows and journal rows gone, no attempt charged)
    and propagates; the caller's earlier work commits. With isolate=True each message settles alone inside the
    session's transaction: only the failing one is charged, the others' effects commit with the caller."""
    engine = create_engine(database.sync_url)
    inbox = Inbox(engine, consumer="c", table=database.table)
    batch = [Message(str(n), "s") for n in range(3)]
    try:
        with Session(engine) as session:
            session.execute(database.effects.insert().values(note="caller"))
            with pytest.raises(Boom):
                inbox.process_batch(batch, add_effects(database, "lost", fail_on="1"), session=session)
            session.commit()
        assert count(database, f"SELECT count(*) FROM {database.effects.fullname} WHERE note = 'lost'") == 0
        assert count(database, f"SELECT count(*) FROM {database.effects.fullname}") == 1
        assert count(database, f"SELECT count(*) FROM {database.table}") == 0
        with Session(engine) as session:
            results = inbox.process_batch(
                batch, add_effects(database, "kept", fail_on="1"), isolate=True, session=session
            )
            session.commit()
        assert results[0] is Outcome.PROCESSED
        assert isinstance(results[1], Boom)
        assert results[2] is Outcome.PROCESSED
        assert count(database, f"SELECT count(*) FROM {database.effects.fullname} WHERE note = 'kept'") == 2
        assert inbox.get("s", "1").attempts == 1  # type: ignore[union-attr]
        assert inbox.get("s", "1").status is Status.FAILED  # type: ignore[union-attr]
    finally:
        inbox.close()
        engine.dispose()


def test_an_async_batch_joins_the_async_session(database: Database) -> None:
    """AsyncInbox.process_batch(session=AsyncSession): rolled back with the session, then committed with it."""

    async def handler(tx: Tx, messages: list[Message]) -> None:
        assert isinstance(tx.connection, AsyncSession)
        for _ in messages:
            await tx.connection.execute(database.effects.insert().values(note="async"))

    async def scenario() -> list[list[Outcome]]:
        engine = create_async_engine(database.async_url)
        batch = [Message(str(n), "s") for n in range(2)]
        results = []
        async with AsyncInbox(engine, consumer="c", table=database.table) as inbox:
            async with AsyncSession(engine) as session:
                results.append(await inbox.process_batch(batch, handler, session=session))
                await session.rollback()
            async with AsyncSession(engine) as session:
                results.append(await inbox.process_batch(batch, handler, session=session))
                await session.commit()
            async with AsyncSession(engine) as session:
                results.append(await inbox.process_batch(batch, handler, session=session))
                await session.commit()
        await engine.dispose()
        return results

    assert asyncio.run(scenario()) == [[Outcome.PROCESSED] * 2, [Outcome.PROCESSED] * 2, [Outcome.DUPLICATE] * 2]
    assert count(database, f"SELECT count(*) FROM {database.effects.fullname}") == 2
