"""`edinbox chaos` through a PostgreSQL failover: the hubs, on a multi-host URL, go on through the loss of a
synchronous primary and the promotion of its standby; nothing lost, nothing doubled, no hub exits."""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg
import pytest

from servers_ha import PrivatePostgresPair

from .test_chaos import chaos_with_restart

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="private PostgreSQL servers are started on Linux")


def test_a_chaos_run_through_a_synchronous_failover_loses_and_doubles_nothing(tmp_path: Path) -> None:
    """Two hubs on `postgresql://h1:p1,h2:p2/db?target_session_attrs=read-write`, killed every 1.5 s, 40 invoices
    and 10 redeliveries on a spool; a third of the way in the primary is stopped at once (`-m immediate`) and its
    synchronous standby promoted: `lost=0 doubled=0`, exit 0, and every invoice is on the promoted server once."""
    with PrivatePostgresPair(synchronous=True) as pair:
        spool = f"dir://{tmp_path / 'spool'}"
        done = chaos_with_restart(spool, pair.url, pair.failover_command(), "ha.inbox", tmp_path)
        assert not pair.primary.running()
        with psycopg.connect(pair.url, autocommit=True) as conn:
            assert conn.info.port == pair._standby.port
            rows = conn.execute("SELECT count(*), count(DISTINCT (seller, number)) FROM ha.edinbox_hub_invoices")
            assert rows.fetchone() == (40, 40), done.stdout
