"""No credentials at rest in the outbox: a row names its destination without the broker's password, `pg_dump` and
the SQLite file hold none (also after `migrate` rewrote rows an older edinbox stored with it), and the relay still
delivers them with the password it is given."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from edinbox import AsyncInbox, ConfigurationError, Inbox
from edinbox._core import MIGRATIONS
from edinbox._urls import with_password
from services import MYSQL_URL, drop_database, require_service
from sources.test_rabbitmq import drop as drop_queue

from .test_relay_brokers import drain, relay_for

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"
ELSEWHERE = "amqp://app:S3cret-Pa55@broker.invalid:5672/?queue=orders"
"""A destination never relayed here: its password is one no other text of the database holds."""

BEFORE = max(v for v in MIGRATIONS if v < 9)
"""The version before the outbox lost its passwords (9)."""


@pytest.fixture(params=["postgresql", "sqlite", "mariadb"])
def db(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """`(kind, database URL, journal table)`: a schema (PostgreSQL) or database (MariaDB) of its own, or a file."""
    kind = request.param
    if kind == "sqlite":
        yield kind, f"sqlite:///{tmp_path / 'shop.db'}", "inbox"
        return
    if kind == "postgresql":
        url = str(request.getfixturevalue("postgres_url"))
        yield kind, url, f"{unique_name}.inbox"
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {unique_name} CASCADE".encode())
        return
    require_service("mariadb")
    yield kind, MYSQL_URL, f"{unique_name}.inbox"
    drop_database(unique_name)


def at_rest(kind: str, url: str, table: str) -> bytes:
    """What the database keeps: `pg_dump` of the journal's schema, the SQLite file's bytes (with its WAL), or the
    outbox's destinations on MariaDB."""
    if kind == "postgresql":
        schema = table.split(".", maxsplit=1)[0]
        dump = ["pg_dump", "--no-owner", "--schema", schema, url]
        return subprocess.run(dump, capture_output=True, check=True, timeout=60).stdout
    if kind == "sqlite":
        path = Path(url.removeprefix("sqlite:///"))
        return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())
    with Inbox(url, consumer="shop", table=table) as inbox:
        rows = inbox.read(lambda tx: tx.unit.fetch("outbox_destinations", {}))
    return "\n".join(str(row[0]) for row in rows).encode()


def publish(url: str, table: str, queue: str) -> None:
    """Commit three rows for the password-protected RabbitMQ queue and one for a broker that is never relayed."""
    with Inbox(url, consumer="shop", table=table) as inbox:
        inbox.create_schema()
        inbox.transaction(
            lambda tx: [tx.publish(f"{RABBITMQ}?queue={queue}", f"row {n}".encode(), key=f"k{n}") for n in range(3)]
        )
        inbox.transaction(lambda tx: tx.publish(ELSEWHERE, b"kept", key="elsewhere"))


def relay_and_receive(url: str, table: str, queue: str) -> list[tuple[str | None, bytes]]:
    """Relay the outbox once, the password given by the relay's settings; what the queue received."""

    async def run() -> list[tuple[str | None, bytes]]:
        async with AsyncInbox(url, consumer="shop", table=table) as inbox:
            totals = await relay_for(inbox, limit=10, destinations=[RABBITMQ]).run(once=True)
            assert totals["sent"] == 3
            assert totals["parked"] == 1  # ELSEWHERE: no password given for it, parked with that reason
        got = await drain(f"{RABBITMQ}?queue={queue}", 3, within=20)
        return sorted((d.message_id, d.payload) for d in got)

    return asyncio.run(run())


def test_the_outbox_keeps_no_password_and_the_relay_still_delivers(db: tuple[str, str, str], unique_name: str) -> None:
    """Rows published to a password-protected broker are stored with the password masked (a dump or the file's bytes
    hold neither password), and the relay, given the broker's URL, delivers each of them once."""
    require_service("rabbitmq")
    kind, url, table = db
    publish(url, table, unique_name)
    try:
        kept = at_rest(kind, url, table)
        assert b"S3cret-Pa55" not in kept
        assert b"guest:guest" not in kept
        assert b"guest:***@127.0.0.1" in kept
        assert relay_and_receive(url, table, unique_name) == [(f"k{n}", f"row {n}".encode()) for n in range(3)]
    finally:
        asyncio.run(drop_queue(unique_name))


def test_migrate_removes_the_passwords_an_older_outbox_kept(db: tuple[str, str, str], unique_name: str) -> None:
    """Rows an older edinbox stored with their passwords lose them to `migrate` (version 9); the relay then delivers
    them with the password from its settings."""
    require_service("rabbitmq")
    kind, url, table = db
    with Inbox(url, consumer="shop", table=table) as inbox:
        inbox.create_schema()

        def older(tx: object) -> None:  # as an outbox before version 9 stored them: the URL as given
            run = tx.unit.run  # type: ignore[attr-defined]
            for n in range(3):
                params = {"destination": f"{RABBITMQ}?queue={unique_name}", "key": f"k{n}", "headers": None}
                run("outbox_insert", {**params, "payload": f"row {n}".encode()})
            run("outbox_insert", {"destination": ELSEWHERE, "key": "elsewhere", "payload": b"kept", "headers": None})
            run("set_version", {"version": BEFORE})
            if kind == "sqlite":  # nor had it the journal's trace (version 10), whose ADD COLUMN cannot run twice here
                tx.connection.execute(f"ALTER TABLE {table} DROP COLUMN trace")  # type: ignore[attr-defined]

        inbox.transaction(older)
        assert b"S3cret-Pa55" in at_rest(kind, url, table)  # the test's premise: the old rows hold the password
        assert inbox.migrate() == [v for v in sorted(MIGRATIONS) if v > BEFORE]
    try:
        kept = at_rest(kind, url, table)
        assert b"S3cret-Pa55" not in kept
        assert b"guest:guest" not in kept
        assert relay_and_receive(url, table, unique_name) == [(f"k{n}", f"row {n}".encode()) for n in range(3)]
    finally:
        asyncio.run(drop_queue(unique_name))


def test_a_masked_password_is_supplied_by_scheme_user_host_and_port() -> None:
    """The relay's URLs give a destination its password only where scheme, user, host and port all match, and a
    destination none of them matches is a configuration error (the row is parked, never sent without it)."""
    stored = "amqp://guest:***@127.0.0.1:5672/?queue=acks"
    given = ["amqp://other:x@127.0.0.1:5672/", "amqp://guest:g%40st@127.0.0.1:5672/vhost?queue=ignored"]
    assert with_password(stored, given) == "amqp://guest:g%40st@127.0.0.1:5672/?queue=acks"
    assert with_password("dir:///srv/out", []) == "dir:///srv/out"
    redis = "redis://127.0.0.1:6379/0?stream=acks&password=***"  # an option, whatever delimiter was before it
    assert with_password(redis, ["redis://127.0.0.1:6379/0?password=p%26w"]) == redis.replace("***", "p%26w")
    with pytest.raises(ConfigurationError, match="no password for the outbox's destination"):
        with_password(stored, ["amqp://guest:guest@127.0.0.2:5672/", "amqps://guest:guest@127.0.0.1:5672/"])


async def test_the_loops_relay_gives_replies_to_its_broker_the_sources_password(
    tmp_path: Path, unique_name: str
) -> None:
    """`AsyncConsumer(..., relay=True)` on a password-protected RabbitMQ: a reply its handler publishes to that broker
    is kept without the password and sent with the source URL's, once, under the handler's key."""
    require_service("rabbitmq")
    from edinbox import AsyncConsumer, Message, Tx
    from edinbox.sources import open_publisher

    db = f"sqlite:///{tmp_path / 'app.db'}"
    async with AsyncInbox(db, consumer="app") as inbox:
        await inbox.create_schema()
    publisher = open_publisher(f"{RABBITMQ}?queue={unique_name}-in")
    await publisher.open()
    try:
        from edinbox import Outgoing

        await publisher.send([Outgoing("order-1", b"order", None)])
    finally:
        await publisher.aclose()

    async def handler(tx: Tx, message: Message) -> None:
        await tx.publish(f"{RABBITMQ}?queue={unique_name}", b"confirmed", key=f"confirm-{message.message_id}")

    try:
        loop = AsyncConsumer(f"{RABBITMQ}?queue={unique_name}-in", handler, db=db, consumer="app", relay=True)
        totals = await loop.run(once=True, idle_timeout=1.0)
        assert (totals["processed"], totals["relayed"], totals["outbox_parked"]) == (1, 1, 0)
        got = await drain(f"{RABBITMQ}?queue={unique_name}", 1, within=20)
        assert [(d.message_id, d.payload) for d in got] == [("confirm-order-1", b"confirmed")]
        assert b"guest:guest" not in await asyncio.to_thread((tmp_path / "app.db").read_bytes)
    finally:
        await drop_queue(unique_name)
        await drop_queue(f"{unique_name}-in")
