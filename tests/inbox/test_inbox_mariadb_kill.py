"""The store's own MariaDB connection killed from another session (`KILL CONNECTION <id>`): who pays, what is left.

Only the store's connection dies (the shared server runs on), at each point of a delivery: in the middle of a
batch's handler (its next statement meets the dead connection), as the handler's last act (the COMMIT meets it),
while the connection sits idle between two calls. Each time the call raises StoreError (transient: nothing is
charged), neither a journal row nor an effect of the cut transaction exists, and the next call settles every
message once, at attempt 1, on a new connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from inbox_harness import Harness, MySQLHarness, aexecute, execute

from edinbox import Message, Outcome, Status, StoreError, TransientError, Tx
from services import MYSQL_URL, require_service

APIS = [pytest.param(False, id="sync"), pytest.param(True, id="async")]


@pytest.fixture(params=APIS)
def h(request: pytest.FixtureRequest, unique_name: str) -> Iterator[Harness]:
    """A fresh inbox on the shared MariaDB, sync or async, by URL (the store's own connections)."""
    require_service("mariadb")
    harness = MySQLHarness(MYSQL_URL, table=unique_name, asynchronous=request.param)
    harness.make(harness.target)
    yield harness
    harness.close()


def connection_id(h: Harness) -> int:
    """The id of the connection the store holds for its next call (the one a handler's `tx` would use)."""
    ids: list[int] = []
    statement = "SELECT CONNECTION_ID()"
    if h.asynchronous:

        async def note(tx: Tx, message: Message) -> None:
            async with tx.connection.cursor() as cursor:
                await cursor.execute(statement)
                ids.append(int((await cursor.fetchone())[0]))

    else:

        def note(tx: Tx, message: Message) -> None:  # type: ignore[misc]
            with tx.connection.cursor() as cursor:
                cursor.execute(statement)
                ids.append(int(cursor.fetchone()[0]))

    assert h.call("process", Message(f"probe{len(h.seen)}", "p"), note) == Outcome.PROCESSED
    h.seen.append([])  # the next probe gets another id
    return ids[0]


def killing(h: Harness, *, then: str | None) -> Any:
    """A handler that writes each message's effect, kills its own connection from another session, then runs
    `then` on the dead connection (None: nothing, so the COMMIT is the first statement to meet it)."""
    sql = h.insert_effect_sql()

    def batch_of(message: Message | list[Message]) -> list[Message]:
        return message if isinstance(message, list) else [message]

    if h.asynchronous:

        async def async_handler(tx: Tx, message: Message | list[Message]) -> None:
            for m in batch_of(message):
                await aexecute(tx.connection, sql, (m.source, m.message_id))
            h.admin(f"KILL CONNECTION {tx.connection.thread_id()}")
            if then is not None:
                await aexecute(tx.connection, then)

        return async_handler

    def sync_handler(tx: Tx, message: Message | list[Message]) -> None:
        for m in batch_of(message):
            execute(tx.connection, sql, (m.source, m.message_id))
        h.admin(f"KILL CONNECTION {tx.connection.thread_id()}")
        if then is not None:
            execute(tx.connection, then)

    return sync_handler


def nothing_left_then_settled(h: Harness, ids: list[str]) -> None:
    """No journal row and no effect of the cut transaction; the next delivery settles each message once, at
    attempt 1."""
    assert h.admin(f"SELECT count(*) FROM {h.table} WHERE source = 's'") == [(0,)]
    assert h.effects() == 0
    assert h.process_batch([Message(i, "s") for i in ids]) == [Outcome.PROCESSED] * len(ids)
    assert h.effects() == len(ids)
    for i in ids:
        record = h.call("get", "s", i)
        assert (record.status, record.attempts) == (Status.PROCESSED, 1)


@pytest.mark.parametrize("then", ["SELECT 1", None], ids=["in-handler", "at-commit"])
def test_a_connection_killed_inside_process_is_a_transient_store_error(h: Harness, then: str | None) -> None:
    """process(): the connection is killed inside the handler (its next statement, or the COMMIT, meets it): a
    transient StoreError, no row, no effect, no attempt charged; the next call settles it on a new connection."""
    with pytest.raises(StoreError) as raised:
        h.call("process", Message("one", "s"), killing(h, then=then))
    assert isinstance(raised.value, TransientError)
    nothing_left_then_settled(h, ["one"])


@pytest.mark.parametrize("isolate", [False, True], ids=["batch", "isolate"])
@pytest.mark.parametrize("then", ["SELECT 1", None], ids=["in-handler", "at-commit"])
def test_a_connection_killed_mid_batch_settles_none_of_it(h: Harness, isolate: bool, then: str | None) -> None:
    """process_batch(): the connection is killed after the batch's effects are written: the StoreError propagates
    (isolate or not), nothing of the batch is written or charged, and the next batch settles each message once."""
    ids = [f"b{i}" for i in range(5)]
    with pytest.raises(StoreError):
        h.call("process_batch", [Message(i, "s") for i in ids], killing(h, then=then), isolate=isolate)
    nothing_left_then_settled(h, ids)


def test_a_connection_killed_while_idle_costs_one_call_at_most(h: Harness) -> None:
    """The store's idle connection killed between two calls: the next call either fails with StoreError before its
    handler runs (charging nothing) or works; the one after works on a new connection."""
    killed = connection_id(h)
    h.admin(f"KILL CONNECTION {killed}")
    try:
        first = h.process_batch([Message("i", "s")])
    except StoreError:
        assert h.effects() == 0
        first = h.process_batch([Message("i", "s")])
    assert first == [Outcome.PROCESSED]
    assert h.effects() == 1
    record = h.call("get", "s", "i")
    assert (record.status, record.attempts) == (Status.PROCESSED, 1)
    assert connection_id(h) != killed
