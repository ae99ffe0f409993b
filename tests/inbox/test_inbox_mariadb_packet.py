"""A value bigger than MariaDB's max_allowed_packet (16 MiB by default) is a DataError of its one message, sent
nothing: the server would refuse the statement and close the connection, which a client still sending sees as a lost
connection (a StoreError, retried for ever). The store's connection stays usable, or is replaced when the server
closed it. Sync and async, on the store's own connections."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from edinbox import AsyncInbox, DataError, Inbox, Message, Outcome, PermanentError, StoreError, Tx
from services import MYSQL_URL, mariadb_admin, require_service

HUGE = b"Z" * (20 * 1024 * 1024)
APIS = [pytest.param(False, id="sync"), pytest.param(True, id="async")]


class Refused(PermanentError):
    """A handler's permanent failure."""


async def nothing(tx: Tx, message: Message | Sequence[Message]) -> None:
    """A handler with no effect."""


def fails(tx: Tx, message: Message) -> None:
    """A handler that fails for good."""
    raise Refused("this message can never succeed")


class Journal:
    """One inbox (sync or async) on a fresh journal, called the same way."""

    def __init__(self, *, use_async: bool) -> None:
        self.table = "t" + uuid.uuid4().hex[:12]
        self.use_async = use_async
        self.inbox: Any = (AsyncInbox if use_async else Inbox)(MYSQL_URL, consumer="c", table=self.table)

    async def call(self, method: str, *args: Any, **options: Any) -> Any:
        """`inbox.method(*args, **options)`, awaited, or run in a thread (sync)."""
        if self.use_async:
            return await getattr(self.inbox, method)(*args, **options)
        return await asyncio.to_thread(getattr(self.inbox, method), *args, **options)

    async def process(self, message: Message, handler: Any = None) -> Outcome:
        """Process `message` with `handler` (no effect by default)."""
        if handler is None:
            handler = nothing if self.use_async else lambda tx, m: None
        elif self.use_async:
            handler = _async(handler)
        return await self.call("process", message, handler)

    async def status(self, key: str) -> str:
        """The journal row's status for message `key` of source "s"."""
        record = await self.call("get", "s", key)
        return str(record.status.value)


def _async(handler: Any) -> Any:
    async def wrapped(tx: Tx, message: Message) -> None:
        handler(tx, message)

    return wrapped


@pytest.fixture(params=APIS)
async def journal(request: pytest.FixtureRequest) -> AsyncIterator[Journal]:
    """A fresh journal in the test database, through the sync or async inbox; dropped afterwards."""
    require_service("mariadb")
    made = Journal(use_async=request.param)
    await made.call("create_schema")
    yield made
    await made.call("aclose" if made.use_async else "close")
    names = ", ".join(f"test.{made.table}{suffix}" for suffix in ("", "_version", "_outbox", "_payloads"))
    mariadb_admin(f"DROP TABLE IF EXISTS {names}")


async def test_a_conflicting_copy_too_big_is_a_data_error_and_the_next_delivery_settles(journal: Journal) -> None:
    """A copy of a processed key with 20 MiB of other content raises DataError naming max_allowed_packet, the row
    stays processed, and the next delivery settles on the same store."""
    assert await journal.process(Message("k1", "s", b"first")) is Outcome.PROCESSED
    with pytest.raises(DataError, match="max_allowed_packet"):
        await journal.process(Message("k1", "s", HUGE))
    assert await journal.status("k1") == "processed"
    assert await journal.process(Message("k2", "s", b"next")) is Outcome.PROCESSED


async def test_a_permanent_failure_of_a_payload_too_big_is_a_data_error(journal: Journal) -> None:
    """A handler's permanent failure on 20 MiB, whose payload the journal cannot keep, raises DataError (not a
    StoreError, retried for ever) and the next delivery settles."""
    with pytest.raises(DataError, match="max_allowed_packet"):
        await journal.process(Message("k1", "s", HUGE), fails)
    assert await journal.process(Message("k2", "s", b"next")) is Outcome.PROCESSED


async def test_a_batch_with_a_conflicting_copy_too_big_is_a_data_error(journal: Journal) -> None:
    """`process_batch` with a 20 MiB conflicting copy raises DataError, and the next batch settles."""
    assert await journal.process(Message("k1", "s", b"first")) is Outcome.PROCESSED
    handler = nothing if journal.use_async else lambda tx, messages: None
    with pytest.raises(DataError, match="max_allowed_packet"):
        await journal.call("process_batch", [Message("k1", "s", HUGE), Message("k2", "s", b"x")], handler)
    batch = [Message("k2", "s", b"x"), Message("k3", "s", b"y")]
    assert await journal.call("process_batch", batch, handler) == [Outcome.PROCESSED] * 2


async def test_a_statement_the_server_refuses_replaces_the_connection_it_closed(journal: Journal) -> None:
    """When the server itself refuses a statement as too big (a limit the store has not measured against: DataError
    1153, or StoreError when the server's reset reaches the client first), the connection it closed is replaced."""
    assert await journal.process(Message("k1", "s", b"first")) is Outcome.PROCESSED
    journal.inbox._store._sql.packet = 1 << 40  # as if the server's limit had been lowered since it was read
    with pytest.raises((DataError, StoreError), match=r"1153|2006|2013"):
        await journal.process(Message("k1", "s", HUGE))
    assert await journal.process(Message("k2", "s", b"next")) is Outcome.PROCESSED


async def test_an_isolated_batch_charges_a_conflicting_copy_too_big_to_its_message_alone(journal: Journal) -> None:
    """`process_batch(isolate=True)` with a 20 MiB conflicting copy settles its batch-mates and holds a DataError in
    that copy's place alone."""
    assert await journal.process(Message("k1", "s", b"first")) is Outcome.PROCESSED
    handler = nothing if journal.use_async else lambda tx, messages: None
    batch = [Message("k0", "s", b"x"), Message("k1", "s", HUGE), Message("k2", "s", b"y")]
    first, refused, last = await journal.call("process_batch", batch, handler, isolate=True)
    assert (first, last) == (Outcome.PROCESSED, Outcome.PROCESSED)
    assert isinstance(refused, DataError)
    assert "max_allowed_packet" in str(refused)
    assert await journal.status("k1") == "processed"
