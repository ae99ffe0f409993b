"""The relay with MariaDB restarted under it (a private server): nothing lost, order per key kept, a row sent again
only when the server went down between its send and its mark (at least once, under the same key)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator, Sequence

import pytest

from edinbox import AsyncInbox, Inbox, Outgoing, StoreError, Tx
from servers import PrivateMariaDB

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="private MariaDB servers are started on Linux")

ROWS = 30
KEYS = 3


@pytest.fixture
def mariadb() -> Iterator[PrivateMariaDB]:
    """A private MariaDB with a journal and its outbox holding ROWS committed rows over KEYS keys."""
    with PrivateMariaDB() as server:
        with Inbox(server.url, consumer="c") as inbox:
            inbox.create_schema()

            def work(tx: Tx) -> None:
                for n in range(ROWS):
                    tx.publish("dir:///o", str(n).encode(), key=f"k{n % KEYS}")

            inbox.transaction(work)
        yield server


def in_key_order(got: list[tuple[str, int]]) -> None:
    """Each key's rows arrived in the order published (a row sent again repeats an earlier one)."""
    for k in range(KEYS):
        firsts = list(dict.fromkeys(n for key, n in got if key == f"k{k}"))
        assert firsts == sorted(firsts)


def test_a_restart_between_send_and_mark_sends_those_rows_again_and_loses_none(mariadb: PrivateMariaDB) -> None:
    """The server stops inside a send: the pass raises StoreError, passes fail while it is down, and after the
    restart the relay drains the outbox; only the cut pass's rows come twice."""
    got: list[tuple[str, int]] = []
    cut: list[int] = []

    def record(destination: str, messages: Sequence[Outgoing]) -> None:
        got.extend((m.message_id, int(m.payload)) for m in messages)

    def record_then_stop(destination: str, messages: Sequence[Outgoing]) -> None:
        record(destination, messages)
        cut.extend(int(m.payload) for m in messages)
        mariadb.stop()

    with Inbox(mariadb.url, consumer="c") as inbox:
        assert inbox.relay(record, limit=3).sent == 3
        with pytest.raises(StoreError):
            inbox.relay(record_then_stop, limit=3)
        with pytest.raises(StoreError):
            inbox.relay(record, limit=3)
        mariadb.start()
        while inbox.relay(record, limit=4).sent:
            pass
        stats = inbox.outbox_stats()
        assert (stats.backlog, stats.sent, stats.parked) == (0, ROWS, 0)
    assert len(cut) == 3
    assert sorted(n for _, n in got) == sorted([*range(ROWS), *cut])
    in_key_order(got)


def test_an_async_relay_waits_out_a_restart_between_passes(mariadb: PrivateMariaDB) -> None:
    """AsyncInbox: the server restarted between two passes; the pass meeting the outage raises StoreError and sends
    nothing, the next ones after the restart send every row exactly once."""
    got: list[tuple[str, int]] = []

    async def send(destination: str, messages: Sequence[Outgoing]) -> None:
        got.extend((m.message_id, int(m.payload)) for m in messages)

    async def main() -> None:
        async with AsyncInbox(mariadb.url, consumer="c") as inbox:
            assert (await inbox.relay(send, limit=5)).sent == KEYS  # one row per key and pass
            mariadb.stop()
            with pytest.raises(StoreError):
                await inbox.relay(send, limit=5)
            mariadb.start()
            while (await inbox.relay(send, limit=5)).sent:
                pass
            assert (await inbox.outbox_stats()).sent == ROWS

    asyncio.run(main())
    assert sorted(n for _, n in got) == list(range(ROWS))
    in_key_order(got)
