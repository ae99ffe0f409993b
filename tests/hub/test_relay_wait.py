"""The relay's wait between passes: a wait that fails (PostgreSQL refuses the listening connection while the passes'
own connection works) is logged and replaced by a plain wait of `idle` seconds, never by a pass after a pass."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from cli.test_privileges import as_user
from edinbox import AsyncInbox
from edinbox.loop import Relay
from edinbox.loop._outage import Outage


@pytest.fixture
def role(postgres_url: str, unique_name: str) -> Iterator[str]:
    """A fresh LOGIN role that may create schemas, dropped afterwards with what it created."""
    name = sql.Identifier(unique_name)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(name))
        conn.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(sql.Identifier(conn.info.dbname), name))
    yield unique_name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(name))
        conn.execute(sql.SQL("DROP ROLE {}").format(name))


async def test_a_relay_whose_wait_fails_waits_idle_instead_of_passing_again_at_once(
    postgres_url: str, role: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The role's connection limit leaves the relay its pool's connection but refuses the one it listens on: the
    relay says so in one line and passes about once per `idle` (0.5 s), not hundreds of times in 2 s."""
    inbox = AsyncInbox(as_user(postgres_url, role), consumer="hub", table=f"{role}.inbox")
    await inbox.create_schema()
    relay = Relay(inbox, outage=Outage(logging.getLogger("edinbox.test"), give_up_after=None), stop=asyncio.Event())
    relay.idle = 0.5
    await relay.step()  # the passes' connection is open now
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        query = "SELECT count(*) FROM pg_stat_activity WHERE usename = %s"
        [(open_now,)] = conn.execute(query, (role,)).fetchall()
        conn.execute(sql.SQL("ALTER ROLE {} CONNECTION LIMIT {}").format(sql.Identifier(role), sql.Literal(open_now)))
    passes = 0
    step = relay.step

    async def counted() -> object:
        nonlocal passes
        passes += 1
        return await step()

    relay.step = counted  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="edinbox.hub"):
        running = asyncio.ensure_future(relay.run())
        await asyncio.sleep(2.0)
        relay.stop.set()
        await asyncio.wait_for(running, timeout=30)
    await inbox.aclose()
    assert 1 <= passes <= 8
    failed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("relay-wait-failed")]
    assert len(failed) == 1, failed
    assert "too many connections" in failed[0]
