"""MariaDB stopped under the inbox (a private server, stopped and started again): who pays, and what is left.

The server goes down inside the handler, after the batch's effects are written and before the commit. The call
raises StoreError (transient: nothing is charged), and after the restart neither a journal row nor an effect of
that transaction exists; the next delivery processes every message once, at attempt 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from inbox_harness import Harness, MySQLHarness

from edinbox import Message, Outcome, Status, StoreError, Tx
from servers import PrivateMariaDB

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="private MariaDB servers are started on Linux")

APIS = [pytest.param(False, id="sync"), pytest.param(True, id="async")]


class Boom(Exception):
    """A handler failure."""


@pytest.fixture(scope="module")
def server() -> Iterator[PrivateMariaDB]:
    """One private MariaDB for the module (each test has its own tables); started again if a test left it down."""
    with PrivateMariaDB() as db:
        yield db


@pytest.fixture(params=APIS)
def h(request: pytest.FixtureRequest, server: PrivateMariaDB, unique_name: str) -> Iterator[Harness]:
    """A fresh inbox on the private server, sync or async, by URL (the store's own connections)."""
    if not server.running():
        server.start()
    harness = MySQLHarness(server.url, table=unique_name, asynchronous=request.param)
    harness.make(harness.target)
    yield harness
    if not server.running():
        server.start()
    harness.close()


def stopping(h: Harness, server: PrivateMariaDB, *, fail: BaseException | None = None) -> Any:
    """A handler that writes each message's effect, then stops the server (then raises `fail`, if given)."""
    write = h.handler()

    def stop_then_fail() -> None:
        server.stop()
        if fail is not None:
            raise fail

    if h.asynchronous:

        async def async_handler(tx: Tx, message: Message | list[Message]) -> None:
            await write(tx, message)
            stop_then_fail()

        return async_handler

    def sync_handler(tx: Tx, message: Message | list[Message]) -> None:
        write(tx, message)
        stop_then_fail()

    return sync_handler


def after_restart(h: Harness, server: PrivateMariaDB, ids: list[str]) -> None:
    """Start the server again; nothing of the cut transaction is there, and the next delivery settles each once."""
    server.start()
    assert h.admin(f"SELECT count(*) FROM {h.table}") == [(0,)]
    assert h.effects() == 0
    outcomes = h.process_batch([Message(i, "s") for i in ids])
    assert outcomes == [Outcome.PROCESSED] * len(ids)
    assert h.effects() == len(ids)
    for i in ids:
        record = h.call("get", "s", i)
        assert (record.status, record.attempts) == (Status.PROCESSED, 1)


def test_the_server_stopped_inside_process_is_a_store_error_that_costs_nothing(
    h: Harness, server: PrivateMariaDB
) -> None:
    """process(): the server stops before the commit; StoreError, no row, no effect; after the restart it runs."""
    with pytest.raises(StoreError):
        h.call("process", Message("one", "s"), stopping(h, server))
    after_restart(h, server, ["one"])


@pytest.mark.parametrize("isolate", [False, True], ids=["batch", "isolate"])
def test_the_server_stopped_inside_a_batch_settles_none_of_it(
    h: Harness, server: PrivateMariaDB, isolate: bool
) -> None:
    """process_batch(): the server stops mid-batch; the StoreError propagates (isolate or not), nothing half-written."""
    ids = [f"b{i}" for i in range(5)]
    with pytest.raises(StoreError):
        h.call("process_batch", [Message(i, "s") for i in ids], stopping(h, server), isolate=isolate)
    after_restart(h, server, ids)


def test_an_isolated_batch_failing_as_the_server_stops_leaves_every_message_unsettled(
    h: Harness, server: PrivateMariaDB
) -> None:
    """isolate=True, the handler fails while the server stops: the first message alone meets the StoreError, which
    stops the isolation; every message holds it (none settled, none charged)."""
    ids = [f"i{i}" for i in range(4)]
    handler = stopping(h, server, fail=Boom("the batch failed"))
    results = h.call("process_batch", [Message(i, "s") for i in ids], handler, isolate=True)
    assert len(results) == len(ids)
    assert all(isinstance(r, StoreError) for r in results), results
    assert len({id(r) for r in results}) == 1  # the one StoreError, the rest untried
    after_restart(h, server, ids)


def test_a_failure_whose_recording_meets_a_stopped_server_is_not_counted(h: Harness, server: PrivateMariaDB) -> None:
    """The handler fails while the server stops: the failure cannot be recorded, so it costs no attempt."""
    with pytest.raises(StoreError, match="recording that failure failed too"):
        h.call("process", Message("f", "s"), stopping(h, server, fail=Boom("the handler failed")))
    after_restart(h, server, ["f"])


def test_a_server_that_is_down_is_a_store_error_until_it_is_back(h: Harness, server: PrivateMariaDB) -> None:
    """Deliveries while the server is down raise StoreError (no handler run); once it is back they settle."""
    ran: list[str] = []
    handler: Callable[..., Any]
    if h.asynchronous:

        async def handler(tx: Tx, message: Message) -> None:
            ran.append(message.message_id)

    else:

        def handler(tx: Tx, message: Message) -> None:  # type: ignore[misc]
            ran.append(message.message_id)

    server.stop()
    for _ in range(2):
        with pytest.raises(StoreError):
            h.call("process", Message("d", "s"), handler)
    assert ran == []
    after_restart(h, server, ["d"])


def test_after_a_restart_one_call_meets_the_broken_connection_and_the_pool_starts_afresh(
    server: PrivateMariaDB, unique_name: str
) -> None:
    """The store's idle connections (opened by overlapping calls) are all broken by a restart: the first call to
    find its connection lost fails alone (StoreError) and closes the idle ones, so the next overlapping calls all
    work on new connections instead of each meeting a broken one."""
    import asyncio

    from edinbox import AsyncInbox

    if not server.running():
        server.start()

    async def main() -> None:
        async with AsyncInbox(server.url, consumer="c", table=unique_name) as inbox:
            await inbox.create_schema()
            await asyncio.gather(*[inbox.stats() for _ in range(4)])  # the store's connection and 3 more
            server.stop()
            server.start()
            with pytest.raises(StoreError):
                await inbox.stats()
            after = await asyncio.gather(*[inbox.stats() for _ in range(4)], return_exceptions=True)
            assert [r for r in after if isinstance(r, BaseException)] == []

    asyncio.run(main())
