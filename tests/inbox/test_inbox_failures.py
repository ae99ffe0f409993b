"""Who pays for a failure on PostgreSQL, where a lock can time out and a connection can be killed mid-delivery."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from inbox_harness import Harness, PostgresHarness

from edinbox import Message, Outcome, SchemaError, Status, StoreError, Tx

APIS = [pytest.param(False, id="sync"), pytest.param(True, id="async")]


class Boom(Exception):
    """A handler failure."""


@pytest.fixture(params=APIS)
def h(request: pytest.FixtureRequest, harness_factory: Any) -> Harness:
    """A fresh PostgreSQL inbox, sync or async."""
    return harness_factory("postgresql", asynchronous=request.param)  # type: ignore[no-any-return]


def test_a_lock_timeout_in_the_handler_sql_costs_no_attempt(h: Harness) -> None:
    """A lock timeout of the handler's SQL is a StoreError chained from the driver's: nothing recorded, retry runs."""
    assert isinstance(h, PostgresHarness)
    h.admin(f"CREATE TABLE {h.schema}.locked (v int)")
    statement = f"SET LOCAL lock_timeout = '50ms'; SELECT * FROM {h.schema}.locked"
    message = Message("lt", "s")
    with psycopg.connect(h.url) as holder:
        holder.execute(f"LOCK TABLE {h.schema}.locked IN ACCESS EXCLUSIVE MODE".encode())
        with pytest.raises(StoreError) as raised:
            h.call("process", message, h.statement_handler(statement))
        assert isinstance(raised.value.__cause__, psycopg.errors.LockNotAvailable)
        assert h.call("get", "s", "lt") is None
    assert h.call("process", message, h.statement_handler(statement)) is Outcome.PROCESSED
    assert h.call("get", "s", "lt").attempts == 1


def test_a_missing_journal_table_is_a_schema_error_not_an_outage(h: Harness) -> None:
    """A journal table dropped under a running inbox (SQLSTATE 42P01) is a SchemaError naming `edinbox init`: the
    operator's to fix, never a StoreError that a hub would wait out for ever."""
    assert isinstance(h, PostgresHarness)
    assert h.call("process", Message("before", "s"), h.statement_handler("SELECT 1")) is Outcome.PROCESSED
    h.admin(f"DROP TABLE {h.schema}.inbox CASCADE")
    with pytest.raises(SchemaError, match="edinbox init") as raised:
        h.call("process", Message("after", "s"), h.statement_handler("SELECT 1"))
    assert isinstance(raised.value.__cause__, psycopg.errors.UndefinedTable)


def test_a_failure_that_cannot_be_recorded_leaves_the_message_unsettled(h: Harness) -> None:
    """When the connection dies before the failed attempt is recorded: StoreError, no row, the next delivery runs."""
    assert isinstance(h, PostgresHarness)
    url = h.url

    def kill(tx: Tx) -> None:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (tx.connection.info.backend_pid,))

    if h.asynchronous:

        async def handler(tx: Tx, message: Message) -> None:
            kill(tx)
            raise Boom("the handler failed")

    else:

        def handler(tx: Tx, message: Message) -> None:  # type: ignore[misc]
            kill(tx)
            raise Boom("the handler failed")

    with pytest.raises(StoreError, match="recording that failure failed too") as raised:
        h.call("process", Message("k", "s"), handler)
    assert "Boom: the handler failed" in str(raised.value)
    assert h.call("get", "s", "k") is None
    assert h.process(Message("k", "s")) is Outcome.PROCESSED
    record = h.call("get", "s", "k")
    assert (record.status, record.attempts) == (Status.PROCESSED, 1)
