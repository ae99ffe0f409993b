"""SQLAlchemy's ORM inside `process(..., session=)`: a failing handler's ORM objects are discarded, flushed or not, a
failed flush rolls back to the delivery's savepoint and keeps the caller's work, on PostgreSQL, MariaDB and SQLite,
sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, select
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session, registry

from edinbox import AsyncInbox, Inbox, Message, Outcome, Tx
from integrations.test_sqlalchemy import Boom, Database, count, database

__all__ = ["database"]  # the fixture, shared with the Core tests


def mapped(database: Database) -> type:
    """A class of its own mapped on the test's business table (id, note)."""

    class Effect:
        def __init__(self, note: str, id: int | None = None) -> None:
            self.id = id
            self.note = note

    registry().map_imperatively(Effect, database.effects)
    return Effect


def notes(database: Database) -> list[str]:
    """The committed notes of the business table, sorted."""
    engine = create_engine(database.sync_url)
    try:
        with Session(engine) as session:
            return sorted(session.scalars(select(database.effects.c.note)))
    finally:
        engine.dispose()


def test_a_failing_handler_discards_its_orm_objects_flushed_or_not(database: Database) -> None:
    """Objects a failing handler added (flushed, in one flush or two, or still pending) leave the session and their
    rows are gone; an object it deleted without flushing is back, persistent; the caller's own objects commit, one
    attempt is counted."""
    Effect: Any = mapped(database)
    engine = create_engine(database.sync_url)
    inbox = Inbox(engine, consumer="c", table=database.table)
    added: list[Any] = []
    caller = Effect("caller")

    def flushing(tx: Tx, message: Message) -> None:
        for note in ("flushed", "flushed2"):  # each flush in a nested transaction of its own
            added.append(Effect(note))
            tx.connection.add(added[-1])
            tx.connection.flush()
        added.append(Effect("pending"))
        tx.connection.add(added[-1])
        raise Boom

    def deleting(tx: Tx, message: Message) -> None:
        tx.connection.delete(caller)
        added.append(Effect("pending2"))
        tx.connection.add(added[-1])
        raise Boom

    try:
        with Session(engine) as session:
            session.add(caller)
            session.commit()
            with pytest.raises(Boom):
                inbox.process(Message("1", "s"), flushing, session=session)
            with pytest.raises(Boom):
                inbox.process(Message("2", "s"), deleting, session=session)
            assert all(obj not in session for obj in added)
            assert caller in session
            assert inspect(caller).persistent
            assert not session.deleted
            session.add(Effect("again"))
            session.commit()
        assert notes(database) == ["again", "caller"]
        assert inbox.get("s", "1").attempts == 1  # type: ignore[union-attr]
        assert inbox.get("s", "2").attempts == 1  # type: ignore[union-attr]
    finally:
        inbox.close()
        engine.dispose()


def test_a_failed_flush_rolls_back_to_the_savepoint_not_the_callers_transaction(database: Database) -> None:
    """A handler whose flush fails (a primary key taken by the caller's uncommitted row) does not roll back the
    caller's transaction: the caller's row commits with the session, the handler's object is gone, and a later
    delivery in the same session is PROCESSED."""
    Effect: Any = mapped(database)
    engine = create_engine(database.sync_url)
    inbox = Inbox(engine, consumer="c", table=database.table)

    def clashing(tx: Tx, message: Message) -> None:
        tx.connection.add(Effect("clash", id=7))

    def fine(tx: Tx, message: Message) -> None:
        tx.connection.add(Effect("fine"))

    try:
        with Session(engine) as session:
            session.add(Effect("caller", id=7))
            session.flush()
            try:
                outcome: Any = inbox.process(Message("1", "s"), clashing, session=session)
            except Exception as exc:  # whichever way it is judged, the caller's work stays
                outcome = exc
            assert outcome is not Outcome.PROCESSED
            assert session.is_active
            assert inbox.process(Message("2", "s"), fine, session=session) is Outcome.PROCESSED
            session.commit()
        assert notes(database) == ["caller", "fine"]
    finally:
        inbox.close()
        engine.dispose()


def test_an_async_session_discards_a_failing_handlers_flushed_objects(database: Database) -> None:
    """AsyncSession (psycopg, asyncmy, aiosqlite): a handler's flushed ORM object leaves the session with its row
    when the handler fails; the next delivery's object commits with the caller's."""
    Effect: Any = mapped(database)

    async def failing(tx: Tx, message: Message) -> None:
        tx.connection.add(Effect("lost"))
        await tx.connection.flush()
        raise Boom

    async def fine(tx: Tx, message: Message) -> None:
        tx.connection.add(Effect("kept"))

    async def scenario() -> bool:
        engine = create_async_engine(database.async_url)
        async with AsyncInbox(engine, consumer="c", table=database.table) as inbox, AsyncSession(engine) as session:
            caller = Effect("caller")  # held: the session's identity map holds its objects weakly
            session.add(caller)
            await session.flush()
            with pytest.raises(Boom):
                await inbox.process(Message("1", "s"), failing, session=session)
            empty = not session.new and list(session.identity_map.values()) == [caller]
            assert await inbox.process(Message("2", "s"), fine, session=session) is Outcome.PROCESSED
            await session.commit()
        await engine.dispose()
        return empty

    assert asyncio.run(scenario())
    assert notes(database) == ["caller", "kept"]
    assert count(database, f"SELECT count(*) FROM {database.table}") == 2


def test_a_handlers_own_nested_transaction_works_and_its_work_is_discarded_with_the_delivery(
    database: Database,
) -> None:
    """A handler that opens nested transactions of its own (with unflushed objects before, and flushing inside)
    commits all its objects with the caller's; when it fails after them, every object it made persistent leaves the
    session and its rows are gone, an object it deleted inside one is back, and the caller's work commits."""
    Effect: Any = mapped(database)
    engine = create_engine(database.sync_url)
    inbox = Inbox(engine, consumer="c", table=database.table)
    made: list[Any] = []
    caller = Effect("caller")

    def nesting(tx: Tx, message: Message) -> None:
        made.append(Effect(f"a{message.message_id}"))
        tx.connection.add(made[-1])
        with tx.connection.begin_nested():
            made.append(Effect(f"b{message.message_id}"))
            tx.connection.add(made[-1])
        made.append(Effect(f"c{message.message_id}"))
        tx.connection.add(made[-1])

    def failing(tx: Tx, message: Message) -> None:
        nesting(tx, message)
        with tx.connection.begin_nested():
            tx.connection.delete(caller)
        tx.connection.flush()
        raise Boom

    try:
        with Session(engine) as session:
            session.add(caller)
            session.commit()
            assert inbox.process(Message("1", "s"), nesting, session=session) is Outcome.PROCESSED
            kept = list(made)
            made.clear()
            with pytest.raises(Boom):
                inbox.process(Message("2", "s"), failing, session=session)
            assert all(obj not in session and inspect(obj).transient for obj in made)
            assert all(obj in session for obj in kept)
            assert caller in session
            assert inspect(caller).persistent
            assert caller.note == "caller"
            session.commit()
        assert notes(database) == ["a1", "b1", "c1", "caller"]
        assert inbox.get("s", "2").attempts == 1  # type: ignore[union-attr]
    finally:
        inbox.close()
        engine.dispose()
