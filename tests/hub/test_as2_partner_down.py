"""An AS2 partner's endpoint down while the relay sends to it: the relay keeps running, the outage is one line down
and one back (`relay-down`, `relay-back`), and once the endpoint listens again every outbox row reaches it once,
settled by its MDN."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from edinbox import AsyncInbox
from outbox.test_relay_brokers import fill, relay_for, until
from servers import free_port

from .test_as2 import Certs, certs
from .test_as2_outbound import Peer

__all__ = ["certs"]


async def test_rows_wait_for_a_partner_endpoint_that_is_down_and_go_once_it_is_back(
    certs: Certs, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Six acknowledgments for a partner whose endpoint refuses connections: the relay logs `relay-down` once and
    retries with backoff; the endpoint started on its port, each row is sent, once, and marked sent."""
    peer = Peer(certs, port=free_port())
    url = peer.url()
    keys = [f"ack/{n}" for n in range(6)]
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    fill(db, url, keys)
    caplog.set_level(logging.INFO, logger="edinbox.test")
    async with AsyncInbox(db, consumer="hub") as inbox:
        relay = relay_for(inbox, limit=2, destinations=())
        running = asyncio.ensure_future(relay.run())
        try:
            await until(lambda: "relay-down" in caplog.text, within=30, what="the relay-down line")
            await asyncio.sleep(1.0)  # a few retries against the closed port
            assert not running.done(), "the relay stopped on a partner's outage"
            assert relay.totals["sent"] == 0
            server = await asyncio.start_server(peer.serve, "127.0.0.1", peer.port)
            async with server:
                await until(lambda: relay.totals["sent"] >= 6, within=60, what="every row sent once it is back")
            assert not running.done()
        finally:
            relay.stop.set()
            await running
        stats = await inbox.outbox_stats()
    assert (stats.backlog, stats.parked, stats.sent) == (0, 0, 6)
    assert len(peer.received) == 6
    assert caplog.text.count("relay-down") == 1
    assert caplog.text.count("relay-back") == 1
