"""Client CPU per message on PostgreSQL: the inbox against the hand-written inboxes, interleaved in one run.

    .venv/bin/python -m bench.inbox_cpu [--url postgresql://...] [--turns 40] [--chunk 20] [--only NAME ...]

Measures the benchmark process's own CPU time (`time.process_time`) per message, which other processes on a
shared machine hardly move, and the wall-clock rate beside it (labelled with the load average). Sections:

- one message per transaction: a bare BEGIN / business INSERT / COMMIT; an Eventuate-style inbox (INSERT ... ON
  CONFLICT DO NOTHING into a 3-column table, the business INSERT, COMMIT); the inbox's own journal SQL by hand
  (`BEGIN; EXECUTE` of the prepared INSERT, as one query); `Inbox.process`;
- joining the caller's transaction: `Inbox(driver connection).process` + COMMIT against
  `process(..., session=session)` + `session.commit()`;
- ORM objects in the caller's session (`orm`): the handler adds two mapped objects, flushed once (when it returns) or
  in two flushes, against the raw connection path writing the same two rows;
- 8 tasks: a hand-written inbox on a bare `AsyncConnectionPool` of 8 against `AsyncInbox` defaults.

Variants take turns on `--chunk` fresh messages each, the order rotated every turn, so load hits them alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import psycopg_pool

from edinbox import AsyncInbox, Inbox, Message, Tx

CONSUMER = "bench"
Variant = Callable[[list[Message]], None]


def fresh(prefix: str, count: int) -> list[Message]:
    """`count` new messages (fingerprints computed before any timing)."""
    tag = uuid.uuid4().hex[:8]
    return [Message(f"{prefix}-{tag}-{i}", "bench:source", b"x" * 200) for i in range(count)]


def interleave(title: str, variants: dict[str, Variant], *, turns: int, chunk: int) -> None:
    """Run the variants turn by turn (order rotated), then print CPU us/msg, msg/s and ratios to the first."""
    cpu = dict.fromkeys(variants, 0.0)
    wall = dict.fromkeys(variants, 0.0)
    for name, run in variants.items():  # warm-up: connections, prepared statements, caches
        run(fresh(f"warm-{name}", chunk))
    before = os.getloadavg()[0]
    order = list(variants)
    for _ in range(turns):
        order = order[1:] + order[:1]
        for name in order:
            messages = fresh(name, chunk)
            wall_start, cpu_start = time.perf_counter(), time.process_time()
            variants[name](messages)
            cpu[name] += time.process_time() - cpu_start
            wall[name] += time.perf_counter() - wall_start
    count = turns * chunk
    base = next(iter(variants))
    print(
        f"\n## {title}\n   ({turns} interleaved turns of {chunk} messages per variant, load {before:.1f} -> "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    for name in variants:
        rate = count / wall[name]
        print(
            f"  {name:<34} client CPU {cpu[name] / count * 1e6:6.1f} us/msg  {rate:8,.0f} msg/s"
            f"  CPU x{cpu[name] / cpu[base]:.2f}, rate x{rate / (count / wall[base]):.2f} of {base}"
        )


def one_per_transaction(url: str, schema: str, *, turns: int, chunk: int) -> None:
    """Bare transaction, Eventuate-style inbox, the journal SQL by hand, Inbox.process."""
    connection = psycopg.connect(url)
    business = f"INSERT INTO {schema}.business (message_id, body) VALUES (%s, %s)".encode()
    eventuate = (
        f"INSERT INTO {schema}.received (consumer, message_id, received_at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
    ).encode()
    inbox = Inbox(url, consumer=CONSUMER, table=f"{schema}.inbox")
    # The inbox's own journal INSERT, prepared once and sent as 'BEGIN; EXECUTE ...' with client-bound values.
    by_hand = psycopg.connect(url, autocommit=True)
    by_hand.execute(
        f"PREPARE by_hand AS INSERT INTO {schema}.inbox AS t (consumer, source, message_id, fingerprint, status, "
        "attempts, received_at, settled_at, trace) VALUES ($1, $2, $3, $4, 'processed', 1, now(), now(), $5::text) "
        "ON CONFLICT DO NOTHING".encode()
    )
    client = psycopg.ClientCursor(by_hand)

    def bare(messages: list[Message]) -> None:
        for m in messages:
            connection.execute(business, (m.message_id, m.payload))
            connection.commit()

    def eventuate_style(messages: list[Message]) -> None:
        for m in messages:
            if connection.execute(eventuate, (CONSUMER, m.message_id, int(time.time() * 1000))).rowcount == 1:
                connection.execute(business, (m.message_id, m.payload))
            connection.commit()

    def journal_by_hand(messages: list[Message]) -> None:
        for m in messages:
            client.execute(
                b"BEGIN; EXECUTE by_hand (%s, %s, %s, %s, %s)",
                (CONSUMER, m.source, m.message_id, m.fingerprint, None),
                prepare=False,
            )
            client.nextset()
            if client.rowcount == 1:
                by_hand.execute(business, (m.message_id, m.payload))
            by_hand.execute(b"COMMIT")

    def handler(tx: Tx, m: Message) -> None:
        tx.connection.execute(business, (m.message_id, m.payload))

    def process(messages: list[Message]) -> None:
        for m in messages:
            inbox.process(m, handler)

    try:
        interleave(
            "PostgreSQL, one message per transaction",
            {
                "bare transaction": bare,
                "Eventuate-style inbox": eventuate_style,
                "journal SQL by hand": journal_by_hand,
                "Inbox.process": process,
            },
            turns=turns,
            chunk=chunk,
        )
    finally:
        inbox.close()
        by_hand.close()
        connection.close()


def joined(url: str, schema: str, *, turns: int, chunk: int) -> None:
    """Inbox(driver connection).process + COMMIT against process(session=) + session.commit()."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    insert = text(f"INSERT INTO {schema}.business (message_id, body) VALUES (:m, :b)")
    raw = engine.raw_connection()
    driver: Any = raw.driver_connection
    raw_inbox = Inbox(driver, consumer=CONSUMER, table=f"{schema}.inbox")
    session_inbox = Inbox(engine, consumer=CONSUMER, table=f"{schema}.inbox")
    business = f"INSERT INTO {schema}.business (message_id, body) VALUES (%s, %s)".encode()

    def raw_handler(tx: Tx, m: Message) -> None:
        tx.connection.execute(business, (m.message_id, m.payload))

    def raw_path(messages: list[Message]) -> None:
        for m in messages:
            raw_inbox.process(m, raw_handler)
            driver.commit()

    def session_handler(tx: Tx, m: Message) -> None:
        tx.connection.execute(insert, {"m": m.message_id, "b": m.payload})

    def session_path(messages: list[Message]) -> None:
        with Session(engine) as session:
            for m in messages:
                session_inbox.process(m, session_handler, session=session)
                session.commit()

    journal = text(
        f"INSERT INTO {schema}.inbox AS t (consumer, source, message_id, fingerprint, status, attempts, received_at, "
        "settled_at, trace) VALUES (:c, :s, :m, :f, 'processed', 1, now(), now(), NULL) ON CONFLICT DO NOTHING"
    )

    def session_by_hand(messages: list[Message]) -> None:
        with Session(engine) as session:
            for m in messages:
                nested = session.begin_nested()
                keys = {"c": CONSUMER, "s": m.source, "m": m.message_id, "f": m.fingerprint}
                if session.execute(journal, keys).rowcount == 1:  # type: ignore[attr-defined]
                    session_handler(Tx(session, "postgresql"), m)
                    session.flush()
                nested.commit()
                session.commit()

    try:
        interleave(
            "PostgreSQL, joining the caller's transaction",
            {
                "raw connection": raw_path,
                "SQLAlchemy session": session_path,
                "the same through the session by hand": session_by_hand,
            },
            turns=turns,
            chunk=chunk,
        )
    finally:
        raw_inbox.close()
        session_inbox.close()
        raw.close()
        engine.dispose()


def tasks_of_eight(url: str, schema: str, *, turns: int, chunk: int) -> None:
    """8 tasks at once: a hand-written inbox on a bare pool of 8 against AsyncInbox defaults."""
    loop = asyncio.new_event_loop()
    business = f"INSERT INTO {schema}.business (message_id, body) VALUES (%s, %s)".encode()
    journal = (
        f"INSERT INTO {schema}.received (consumer, message_id, received_at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
    ).encode()
    pool = psycopg_pool.AsyncConnectionPool(url, min_size=8, max_size=8, open=False)
    loop.run_until_complete(pool.open(wait=True))
    inbox = AsyncInbox(url, consumer=CONSUMER, table=f"{schema}.inbox")
    # The same with the pool's check (a round trip) on every checkout, as before CHECK_AFTER: set before the pool opens.
    checked = AsyncInbox(url, consumer=CONSUMER, table=f"{schema}.inbox")
    checked._store._check = psycopg_pool.AsyncConnectionPool.check_connection  # type: ignore[attr-defined]

    async def bare_one(messages: list[Message]) -> None:
        for m in messages:
            async with pool.connection() as conn, conn.transaction():
                cursor = await conn.execute(journal, (CONSUMER, m.message_id, int(time.time() * 1000)))
                if cursor.rowcount == 1:
                    await conn.execute(business, (m.message_id, m.payload))

    async def handler(tx: Any, m: Message) -> None:
        await tx.connection.execute(business, (m.message_id, m.payload))

    def through(target: AsyncInbox) -> Callable[[list[Message]], Any]:
        async def one(messages: list[Message]) -> None:
            for m in messages:
                await target.process(m, handler)

        return one

    def eight(one: Callable[[list[Message]], Any]) -> Variant:
        def run(messages: list[Message]) -> None:
            size = max(1, len(messages) // 8)
            parts = [messages[i : i + size] for i in range(0, len(messages), size)]

            async def together() -> None:
                await asyncio.gather(*(one(part) for part in parts))

            loop.run_until_complete(together())

        return run

    try:
        interleave(
            "PostgreSQL, 8 tasks at once",
            {
                "bare pool of 8": eight(bare_one),
                "AsyncInbox, defaults": eight(through(inbox)),
                "AsyncInbox, check every checkout": eight(through(checked)),
            },
            turns=turns,
            chunk=chunk * 8,
        )
    finally:
        loop.run_until_complete(pool.close())
        loop.run_until_complete(inbox.aclose())
        loop.run_until_complete(checked.aclose())
        loop.close()


def joined_orm(url: str, schema: str, *, turns: int, chunk: int) -> None:
    """process(session=) with ORM objects: the handler's two objects flushed once (when it returns) or in two
    flushes (one inside the handler), against the raw connection path writing the same two rows."""
    from sqlalchemy import Column, Integer, LargeBinary, MetaData, String, Table, create_engine
    from sqlalchemy.orm import Session, registry

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    table = Table("effects", MetaData(), Column("id", Integer, primary_key=True), Column("message_id", String),
                  Column("body", LargeBinary), schema=schema)  # fmt: skip
    table.create(engine)
    effect: Any = type("Effect", (), {})
    registry().map_imperatively(effect, table)
    raw = engine.raw_connection()
    driver: Any = raw.driver_connection
    raw_inbox = Inbox(driver, consumer=CONSUMER, table=f"{schema}.inbox")
    session_inbox = Inbox(engine, consumer=CONSUMER, table=f"{schema}.inbox")
    business = f"INSERT INTO {schema}.effects (message_id, body) VALUES (%s, %s), (%s, %s)".encode()

    def raw_path(messages: list[Message]) -> None:
        for m in messages:
            raw_inbox.process(m, lambda tx, m: tx.connection.execute(business, (m.message_id, m.payload) * 2))
            driver.commit()

    def orm_path(flushes: int) -> Variant:
        def handler(tx: Tx, m: Message) -> None:
            for i in range(2):
                tx.connection.add(effect(message_id=m.message_id, body=m.payload))
                if i == 0 and flushes == 2:
                    tx.connection.flush()

        def run(messages: list[Message]) -> None:
            with Session(engine) as session:
                for m in messages:
                    session_inbox.process(m, handler, session=session)
                    session.commit()

        return run

    try:
        variants = {"raw connection": raw_path, "session, one flush": orm_path(1), "session, two flushes": orm_path(2)}
        interleave("PostgreSQL, ORM objects in the caller's session", variants, turns=turns, chunk=chunk)
    finally:
        raw_inbox.close()
        session_inbox.close()
        raw.close()
        engine.dispose()


SECTIONS = {"one": one_per_transaction, "joined": joined, "orm": joined_orm, "tasks": tasks_of_eight}


def main() -> None:
    """Create a fresh schema, run the chosen sections, drop the schema."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--chunk", type=int, default=20)
    parser.add_argument("--only", nargs="*", choices=list(SECTIONS), default=list(SECTIONS))
    args = parser.parse_args()
    schema = "bench_cpu_" + uuid.uuid4().hex[:8]
    with psycopg.connect(args.url, autocommit=True) as setup:
        setup.execute(f"CREATE SCHEMA {schema}".encode())
        setup.execute(f"CREATE TABLE {schema}.business (message_id text NOT NULL, body bytea)".encode())
        setup.execute(
            f"CREATE TABLE {schema}.received (consumer text NOT NULL, message_id text NOT NULL, "
            f"received_at bigint NOT NULL, PRIMARY KEY (consumer, message_id))".encode()
        )
    with Inbox(args.url, consumer=CONSUMER, table=f"{schema}.inbox") as owner:
        owner.create_schema()
    try:
        for name in args.only:
            SECTIONS[name](args.url, schema, turns=args.turns, chunk=args.chunk)
    finally:
        with psycopg.connect(args.url, autocommit=True) as setup:
            setup.execute(f"DROP SCHEMA {schema} CASCADE".encode())


if __name__ == "__main__":
    main()
