"""The operator commands on a journal the library made alone (no `edinbox init`, so no hub tables), beside an
application's own `invoices` table: each command works and shows the journal and its outbox, and the relay sends
what the handlers published, once per key, after the commit."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aio_pika
import psycopg
import pytest
from click.testing import CliRunner, Result

from cli.library_views import check_views
from edinbox import AsyncInbox, Inbox, Message, Outcome, Tx
from edinbox.cli import main
from edinbox.hub.config._model import HubConfig
from outbox.test_relay_brokers import drain
from services import MYSQL_URL, drop_database, mariadb_admin, require_service
from sources.test_rabbitmq import drop as drop_queue

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"


def cli(*args: str) -> Result:
    """Run an `edinbox` command in-process."""
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def cli_json(*args: str) -> Any:
    """Run an `edinbox` command with `--json`; its parsed output (the command must succeed)."""
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(params=["postgresql", "mariadb", "sqlite"])
def journal(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """`(database URL, journal table)` of a fresh schema (PostgreSQL), database (MariaDB) or file (SQLite) that also
    holds the application's own `invoices` table."""
    kind = request.param
    if kind == "sqlite":
        url, table, invoices = f"sqlite:///{tmp_path / 'shop.db'}", "inbox", "invoices"
    elif kind == "postgresql":
        url, table = str(request.getfixturevalue("postgres_url")), f"{unique_name}.inbox"
        invoices = f"{unique_name}.invoices"
    else:
        require_service("mariadb")
        url, table, invoices = MYSQL_URL, f"{unique_name}.inbox", f"{unique_name}.invoices"
    with Inbox(url, consumer="shop", table=table) as inbox:
        inbox.create_schema()
        if kind == "mariadb":  # DDL ends a MariaDB transaction: on a connection of its own
            mariadb_admin(f"CREATE TABLE {invoices} (number TEXT)")
        else:
            inbox.transaction(lambda tx: tx.connection.cursor().execute(f"CREATE TABLE {invoices} (number TEXT)"))
    yield url, table
    if kind == "postgresql":
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA {unique_name} CASCADE".encode())
    elif kind == "mariadb":
        drop_database(unique_name)


def handle(queue: str) -> Any:
    """The application's handler: publish the payload to a RabbitMQ queue through the outbox; `bad` fails."""

    def handler(tx: Tx, message: Message) -> None:
        if message.payload == b"bad":
            raise ValueError("the application refuses this message")
        tx.publish(f"{RABBITMQ}?queue={queue}", message.payload, key=f"out-{message.message_id}")

    return handler


def test_operator_commands_work_on_a_library_journal(journal: tuple[str, str], unique_name: str) -> None:
    """stats, list, show, doctor, requeue, forget, purge and migrate work on a journal without hub tables, showing
    the journal and its outbox only, and `relay` sends each published row once, after its commit."""
    require_service("rabbitmq")
    url, table = journal
    db = ["--db", url, "--table", table, "--consumer", "shop"]
    with Inbox(url, consumer="shop", table=table, max_attempts=1) as inbox:
        for n in ("1", "2", "3", "2"):  # 2 twice: the second is a duplicate, publishing nothing
            inbox.process(Message(n, "orders", f"order {n}".encode()), handle(unique_name))
        with pytest.raises(ValueError, match="refuses"):
            inbox.process(Message("4", "orders", b"bad"), handle(unique_name))
        assert inbox.process(Message("4", "orders", b"bad"), handle(unique_name)) is Outcome.DEAD
    try:
        checks = {c["check"]: c for c in cli_json("doctor", *db)}
        assert all(c["status"] == "ok" for c in checks.values()), checks
        assert checks["hub"]["detail"].startswith("library journal, no hub tables")

        stats = cli_json("stats", *db)
        assert stats["hub"] is False
        assert "invoices" not in stats
        assert "acknowledgments" not in stats
        assert stats["journal"]["processed"] == 3
        assert stats["journal"]["dead"] == 1
        assert stats["outbox"]["backlog"] == 3

        listed = cli_json("list", *db)
        assert sorted(r["key"] for r in listed) == ["orders/1", "orders/2", "orders/3", "orders/4"]
        assert cli_json("list", *db, "--status", "rejected") == []
        shown = cli_json("show", "orders/2", *db)
        assert shown["status"] == "processed"
        assert shown["message_id"] == "2"
        assert shown["invoices"] == []
        assert shown["acknowledgments"] == []

        assert cli_json("relay", *db, "--once", "--destinations", RABBITMQ) == {"sent": 3, "parked": 0}
        assert cli_json("relay", *db, "--once", "--destinations", RABBITMQ) == {"sent": 0, "parked": 0}
        got = asyncio.run(drain(f"{RABBITMQ}?queue={unique_name}", 3, within=20))
        assert sorted((d.message_id, d.payload) for d in got) == [
            ("out-1", b"order 1"),
            ("out-2", b"order 2"),
            ("out-3", b"order 3"),
        ]
        assert cli_json("stats", *db)["outbox"] == {
            "backlog": 0,
            "parked": 0,
            "sent": 3,
            "oldest_unsent_age_seconds": None,
        }

        assert cli_json("show", "orders/4", *db)["payload"] == "bad"  # a dead row keeps its payload
        assert cli("requeue", "orders/4", *db).exit_code == 0
        assert cli_json("show", "orders/4", *db)["status"] == "requeued"
        assert cli("forget", "orders/4", *db, "--yes").exit_code == 0
        assert cli("show", "orders/4", *db).exit_code != 0
        purged = cli("purge", *db, "--older-than", "0s", "--horizon", "0s")
        assert purged.exit_code == 0, purged.output
        assert cli_json("stats", *db)["journal"]["processed"] == 0
        migrated = cli("migrate", *db)
        assert migrated.exit_code == 0, migrated.output
        assert "nothing to migrate" in migrated.output
    finally:
        asyncio.run(drop_queue(unique_name))


FROZEN = Path(__file__).resolve().parents[1] / "inbox" / "schema_v1" / "sqlite.sql"


def test_a_migrated_library_journal_is_still_a_library_journal(tmp_path: Path) -> None:
    """A version-1 SQLite journal the hub never used, upgraded by `edinbox migrate` (whose released steps 4 and 5
    leave hub counters and answers beside it), is still seen as a library journal: doctor and stats work."""
    path = tmp_path / "app.db"
    db = ["--db", f"sqlite:///{path}", "--consumer", "app"]
    with sqlite3.connect(path) as conn:
        body = "\n".join(line for line in FROZEN.read_text().splitlines() if not line.startswith("--"))
        for statement in body.format(table="inbox", key_index="inbox_key", version_table="inbox_version").split(";"):
            conn.execute(statement)
    migrated = cli("migrate", *db)
    assert migrated.exit_code == 0, migrated.output
    checks = {c["check"]: c["status"] for c in cli_json("doctor", *db)}
    assert checks == {"database": "ok", "hub": "ok", "journal": "ok", "purge": "ok", "retention": "ok"}
    assert cli_json("stats", *db)["hub"] is False


def test_init_beside_an_applications_invoices_keeps_them_apart(journal: tuple[str, str]) -> None:
    """`edinbox init` beside an application's own `invoices` table creates the hub's tables under names of their own
    (`edinbox_hub_*`), leaves the application's table as it was, and the journal then counts as a hub's."""
    url, table = journal
    db = ["--db", url, "--table", table, "--consumer", "shop"]
    done = cli("init", *db)
    assert done.exit_code == 0, done.output
    assert cli_json("stats", *db)["hub"] is True
    with Inbox(url, consumer="shop", table=table) as inbox:
        assert inbox.unique_keys("invoices") == []  # the application's: no key given, none added
        assert ["issue_date", "kind", "number", "seller"] in (inbox.unique_keys("edinbox_hub_invoices") or [])
        assert inbox.unique_keys("edinbox_hub_console_audit") is not None


def test_an_aio_pika_consumers_journal(postgres_url: str, unique_name: str) -> None:
    """A plain aio-pika consumer that processes each delivery through AsyncInbox (its handler publishing a reply
    through the outbox) and acks after the commit: the operator commands and the console's data layer read its
    journal, and the relay sends each reply once, a redelivered order's included."""
    require_service("rabbitmq")
    config = HubConfig(db=postgres_url, table=f"{unique_name}.inbox", consumer="orders")

    async def handler(tx: Tx, message: Message) -> None:
        reply = b"done " + message.payload
        await tx.publish(f"{RABBITMQ}?queue={unique_name}", reply, key=f"done-{message.message_id}")

    async def consume() -> list[Outcome]:
        outcomes = []
        async with AsyncInbox(config.db, consumer=config.consumer, table=config.table) as inbox:
            await inbox.create_schema()
            connection = await aio_pika.connect(RABBITMQ)
            async with connection:
                channel = await connection.channel()
                queue = await channel.declare_queue(f"{unique_name}-in", auto_delete=True)
                for n in ("1", "2", "1", "3"):  # order 1 twice: a producer's retry
                    body = aio_pika.Message(f"order {n}".encode(), message_id=n)
                    await channel.default_exchange.publish(body, routing_key=queue.name)
                async with queue.iterator() as deliveries:
                    async for delivery in deliveries:
                        message = Message(delivery.message_id or "", "orders", delivery.body)
                        outcomes.append(await inbox.process(message, handler))
                        await delivery.ack()
                        if len(outcomes) == 4:
                            break
        return outcomes

    try:
        assert asyncio.run(consume()).count(Outcome.DUPLICATE) == 1
        published = [(f"done-{n}", f"done order {n}".encode()) for n in ("1", "2", "3")]
        check_views(config, key="orders/1", queue=unique_name, published=published)
    finally:
        asyncio.run(drop_queue(unique_name))
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {unique_name} CASCADE".encode())
