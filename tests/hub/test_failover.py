"""A PostgreSQL failover under `edinbox.consume`, on a private primary and streaming standby (the hubs' chaos run
through one: test_failover_chaos.py; the relay's: test_failover_relay.py).

A consumer whose primary is fenced read-only (SQLSTATE 25006 on every write) before its standby is promoted waits
that out as an outage, charges no attempt and reconnects to the new primary. `edinbox doctor` warns when the journal
replicates asynchronously. Failover URLs (both libpq spellings) are accepted and masked; the ones libpq would refuse
at every connection are refused at once.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from edinbox import AsyncInbox
from edinbox._errors import ConfigurationError
from edinbox._urls import database_url, mask
from edinbox.hub import HubConfig
from edinbox.hub.database._journal import HUB
from edinbox.hub.ops._replication import replication
from edinbox.sources.spool import publish as spool_publish
from hub_ops import doctor, init
from loop.test_consume_faults import effects, prepare, start, stopped_within, wait_for, with_duplicates
from servers_ha import PrivatePostgresPair

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="private PostgreSQL servers are started on Linux")


def test_a_fenced_primary_is_an_outage_and_the_consumer_goes_on_on_the_promoted_standby(
    tmp_path: Path, unique_name: str
) -> None:
    """`edinbox.consume` on `postgresql:///db?host=a,b&port=x,y&target_session_attrs=read-write`, 150 messages and 30
    redeliveries: its primary is fenced read-only mid-run (every write fails with 25006), then its standby promoted.
    The consumer logs one outage naming the read-only transaction, does not exit, charges no attempt (each row is
    settled at its first) and finishes on the promoted server: every effect there once. Before the fence, doctor
    finds the standby synchronous."""
    with PrivatePostgresPair(synchronous=True) as pair:
        ports = f"{pair.primary.port},{pair._standby.port}"
        url = f"postgresql://postgres@/postgres?host=127.0.0.1,127.0.0.1&port={ports}&target_session_attrs=read-write"
        assert asyncio.run(_replication(url, unique_name))[0] == "ok"
        prepare(url, unique_name)
        source = f"dir://{tmp_path / 'spool'}"
        asyncio.run(spool_publish(source, with_duplicates(150)))
        proc = start(source, url, unique_name, pause=0.01)
        try:
            wait_for(lambda: effects(url, unique_name)[1] >= 20, timeout=20, what="the first effects")
            with psycopg.connect(pair.primary.url, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
                conn.execute("SELECT pg_reload_conf()")
            time.sleep(1.0)  # writes refused meanwhile; reads (the journal's lookups) still answered
            assert proc.poll() is None, "the consumer exited on a read-only primary"
            subprocess.run(pair._failover_commands()[1], capture_output=True, check=True, timeout=60)  # promote
            wait_for(lambda: effects(url, unique_name)[1] == 150, timeout=30, what="every effect after the promotion")
            time.sleep(0.5)  # the last redeliveries: duplicates now
            stopped_within(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
        _, err = proc.communicate()
        assert err.count("-down") == 1, err[-3000:]
        assert "read-only transaction" in err
        assert effects(url, unique_name) == (150, 150)
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.info.port == pair._standby.port
            query = sql.SQL("SELECT count(*) FROM {} WHERE attempts <> 1 OR status <> 'processed'")
            assert conn.execute(query.format(sql.Identifier(unique_name))).fetchone() == (0,)


async def _replication(url: str, table: str, *, user: str = "postgres") -> tuple[str, str] | None:
    """The doctor's replication verdict on the journal `table` at `url`, connected as `user`."""
    async with AsyncInbox(url.replace("postgres@", f"{user}@", 1), consumer="c", table=table, applications=[HUB]) as ib:
        return await replication(ib)


def test_doctor_warns_when_the_journal_replicates_asynchronously(unique_name: str) -> None:
    """On an asynchronous pair `edinbox doctor` warns that a failover can lose acknowledged commits; a role that may
    not read the standbys' sync state is told "unknown", a warning, not a failure."""
    with PrivatePostgresPair(synchronous=False) as pair:
        config = HubConfig(db=pair.url, table=f"{unique_name}.inbox")
        asyncio.run(init(config))
        checks = {check.name: check for check in asyncio.run(doctor(config))}
        assert checks["replication"].status == "warn"
        assert "1 standby(s) replicate asynchronously (synchronous_standby_names is empty)" in str(checks)
        with psycopg.connect(pair.primary.url, autocommit=True) as conn:
            conn.execute("CREATE ROLE watcher LOGIN")
        status, detail = asyncio.run(_replication(pair.url, f"{unique_name}.inbox", user="watcher")) or ("", "")
        assert (status, detail.split(":")[0]) == ("warn", "unknown")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:pw@h1:5432,h2:5433/db?target_session_attrs=read-write",
        "postgresql://u:pw@/db?host=h1,h2&port=5432,5433&target_session_attrs=primary",
        "postgresql://u:pw@[::1]:5432,h2/db?target_session_attrs=read-write&load_balance_hosts=random",
    ],
)
def test_a_failover_url_is_accepted_and_its_password_masked(url: str) -> None:
    """Both libpq spellings of several hosts (authority and `host=`/`port=` query) parse as PostgreSQL, and mask
    hides their password."""
    assert database_url(url).dialect == "postgresql"
    assert "pw" not in mask(url)


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("postgresql://u@/db?host=h1,h2&port=1,2,3", "3 ports for 2 hosts"),
        ("postgresql://u@h1,h2/db?target_session_attrs=primary-only", "target_session_attrs must be one of any"),
        ("host=h1,h2 port=1,2 dbname=db password=pw", "is a libpq keyword string"),
    ],
)
def test_a_failover_url_libpq_would_refuse_is_refused_at_once(url: str, error: str) -> None:
    """What libpq would refuse at every connection (an outage waited out for ever) is a ConfigurationError now; a
    libpq keyword string is told how to write it as a URL, its password masked."""
    with pytest.raises(ConfigurationError, match=error) as raised:
        database_url(url)
    assert "pw" not in str(raised.value)
