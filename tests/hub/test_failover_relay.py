"""Acknowledgments through a failover: `edinbox run` with a partner agreement (its relay in a child process) on the
multi-host URL of a private synchronous pair whose primary is lost mid-run and whose standby is promoted."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from edinbox.hub.config._model import HubConfig
from edinbox.sources.spool import publish
from hub_ops import init
from servers_ha import PrivatePostgresPair

from .test_outage import HubProcess, counts, invoices, spool_empty, wait_for
from .test_outage_acks import _rows, arrived, outbox

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="private PostgreSQL servers are started on Linux")


def test_the_hub_and_its_relay_child_go_on_on_the_promoted_standby(spool: Path, tmp_path: Path) -> None:
    """The primary stopped at once (`-m immediate`) after the first acknowledgments are sent, the standby promoted
    while traffic keeps coming: the hub and its relay child each log the outage and stay up (no `relay-exited`),
    each invoice is on the promoted server once, and every acknowledgment is marked sent there and reaches its
    partner under its key."""
    (tmp_path / "hub.toml").write_text(f'[partners."*"]\noutbound = "dir://{tmp_path}/out/{{id}}"\n', encoding="utf-8")
    source = f"dir://{spool}"
    with PrivatePostgresPair(synchronous=True) as pair:
        url = pair.url
        asyncio.run(init(HubConfig(db=url)))
        asyncio.run(publish(source, invoices(60)))
        hub = HubProcess("--config", str(tmp_path / "hub.toml"), "--db", url, "--source", source, "--batch-size", "2")
        try:
            wait_for(lambda: outbox(url)[1] >= 10, timeout=60, what="the first acknowledgments sent")
            pair.failover()
            asyncio.run(publish(source, invoices(20, start=60)))
            wait_for(lambda: spool_empty(spool), timeout=90, what="the hub to catch up on the promoted server")
            wait_for(lambda: outbox(url)[0] == outbox(url)[1], timeout=60, what="every acknowledgment sent")
            assert hub.proc.poll() is None  # it never exited on its own
            assert hub.stop() == 0
        finally:
            if hub.proc.poll() is None:
                hub.proc.kill()
        assert counts(url) == (80, 80, 80)
        total, sent = outbox(url)
        keys = {str(k) for (k,) in _rows(url, "SELECT key FROM inbox_outbox")}
    assert total == sent >= 80
    assert set(arrived(tmp_path / "out")) == keys  # a key may arrive twice (sent, not yet marked), none lost
    assert not hub.events("relay-exited"), "\n".join(hub.lines)
    # the hub's own line of the outage: its step's, or its index batch's when the failover fell between two steps
    assert hub.events("dependency-down"), "\n".join(hub.lines)
    assert hub.events("relay-down"), "\n".join(hub.lines)
    assert not [line for line in hub.lines if "Traceback" in line or " ERROR " in line], "\n".join(hub.lines)
