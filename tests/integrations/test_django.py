"""Django: the app's migration makes the journal, process() runs in transaction.atomic() on Django's connection,
and the management commands read and purge the journal (the test project in tests/django_project), on PostgreSQL
(alias `default`) and on MariaDB (alias `mariadb`, Django's MySQL backend on PyMySQL)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from edinbox import Message, Outcome, Status, Tx
from services import POSTGRES_URL, drop_database, mariadb_admin, require_service
from threads import in_threads


class Boom(Exception):
    """A handler failure."""


class Project:
    """The test project on one database alias: its Invoice model's manager there, and the alias."""

    def __init__(self, alias: str, invoice: Any) -> None:
        self.alias = alias
        self.invoices = invoice.objects.using(alias)


@pytest.fixture(scope="module", params=["default", "mariadb"])
def project(request: pytest.FixtureRequest) -> Iterator[Project]:
    """The test project on one alias, set up once: its schema (PostgreSQL) or database (MariaDB) created, then
    `migrate` run there (the journal and the shop's table); dropped afterwards."""
    alias = str(request.param)
    require_service("postgres" if alias == "default" else "mariadb")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "django_project.settings")
    import django
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    django.setup()
    if alias == "default":
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {settings.SCHEMA}".encode())
    else:
        mariadb_admin(f"CREATE DATABASE {settings.SCHEMA} CHARACTER SET utf8mb4")
    call_command("migrate", database=alias, run_syncdb=True, verbosity=0)
    from django_project.shop.models import Invoice

    yield Project(alias, Invoice)
    connections.close_all()
    if alias == "default":
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {settings.SCHEMA} CASCADE".encode())
    else:
        drop_database(settings.SCHEMA)


def create(project: Project, *, hold: float = 0.0, fail: bool = False) -> Any:
    """A handler creating one Invoice through the ORM (holding its transaction `hold` seconds, then failing)."""

    def handler(tx: Tx, message: Message) -> None:
        project.invoices.create(number=message.message_id)
        time.sleep(hold)
        if fail:
            raise Boom

    return handler


def test_the_migration_makes_a_journal_that_verifies(project: Project) -> None:
    """`migrate` created the journal with its unique key and schema version."""
    from edinbox.integrations.django import inbox

    inbox(project.alias).verify()


def test_the_same_message_from_two_threads_makes_one_row(project: Project) -> None:
    """Two threads deliver one message at the same moment: one Invoice row; the second waits for the first
    commit and returns DUPLICATE."""
    from django.db import connections

    from edinbox.integrations.django import process

    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]

    def deliver(index: int) -> None:
        try:
            connections[project.alias].ensure_connection()  # connect before the start line
            barrier.wait()
            results[index] = process(Message("two-threads", "s"), create(project, hold=0.3), using=project.alias)
        except Exception as exc:
            results[index] = exc
        finally:
            connections.close_all()

    in_threads(lambda: deliver(0), lambda: deliver(1))
    assert sorted(str(r) for r in results) == ["Outcome.DUPLICATE", "Outcome.PROCESSED"]
    assert project.invoices.filter(number="two-threads").count() == 1


def test_a_handler_failure_leaves_no_row_and_counts_an_attempt(project: Project) -> None:
    """A failing handler's ORM row rolls back with the savepoint, the attempt commits, the exception propagates;
    the next delivery creates the row once."""
    from edinbox.integrations.django import inbox, process

    with pytest.raises(Boom):
        process(Message("fails-once", "s"), create(project, fail=True), using=project.alias)
    assert project.invoices.filter(number="fails-once").count() == 0
    record = inbox(project.alias).get("s", "fails-once")
    assert record is not None
    assert (record.status, record.attempts) == (Status.FAILED, 1)
    assert process(Message("fails-once", "s"), create(project), using=project.alias) is Outcome.PROCESSED
    assert project.invoices.filter(number="fails-once").count() == 1


def test_inside_the_callers_atomic_block_the_row_commits_with_it(project: Project) -> None:
    """Called in the caller's own atomic block, the journal row joins it: the caller's rollback undoes both."""
    from django.db import transaction

    from edinbox.integrations.django import inbox, process

    class Undo(Exception):
        """The caller's own failure after processing."""

    outcomes = []

    def caller() -> None:
        with transaction.atomic(using=project.alias):
            outcomes.append(process(Message("undone", "s"), create(project), using=project.alias))
            raise Undo

    with pytest.raises(Undo):
        caller()
    assert outcomes == [Outcome.PROCESSED]
    assert inbox(project.alias).get("s", "undone") is None
    assert project.invoices.filter(number="undone").count() == 0


def test_the_management_commands_count_and_purge(project: Project) -> None:
    """`edinbox_stats` prints the counts by status as JSON; `edinbox_purge` refuses a retention shorter than the
    horizon or a rate of 0, and deletes old processed rows, throttled."""
    from django.core.management import CommandError, call_command
    from django.db import connections

    from edinbox.integrations.django import process

    process(Message("old", "s"), create(project), using=project.alias)
    out = io.StringIO()
    call_command("edinbox_stats", "--database", project.alias, stdout=out)
    counts = json.loads(out.getvalue())
    assert counts["processed"] >= 1
    with pytest.raises(CommandError, match="horizon"):
        call_command("edinbox_purge", "--older-than-days", "1", "--database", project.alias)
    with pytest.raises(CommandError, match="max_rate"):
        call_command("edinbox_purge", "--older-than-days", "8", "--max-rate", "0", "--database", project.alias)
    month = "interval '30 days'" if project.alias == "default" else "INTERVAL 30 DAY"
    with connections[project.alias].cursor() as cursor:
        cursor.execute(f"UPDATE edinbox_inbox SET settled_at = settled_at - {month}")
    out = io.StringIO()
    purge = ("edinbox_purge", "--older-than-days", "8", "--max-rate", "1000", "--database", project.alias)
    call_command(*purge, stdout=out)
    assert out.getvalue().strip() == f"purged {counts['processed']} rows"
    out = io.StringIO()
    call_command("edinbox_stats", "--database", project.alias, stdout=out)
    assert json.loads(out.getvalue())["processed"] == 0


def test_the_operator_commands_read_a_django_journal(project: Project, unique_name: str) -> None:
    """A Django project's journal (`migrate` made it in Django's database, as `EDINBOX_TABLE`): doctor, stats, show,
    relay and the console's data layer work on it with no hub tables, and the relay sends what the handlers
    published (inside transaction.atomic(), with the Invoice rows) once per key."""
    require_service("rabbitmq")
    from django.conf import settings

    from cli.library_views import RABBITMQ, check_views
    from edinbox.hub.config._model import HubConfig
    from edinbox.integrations.django import inbox, process
    from services import MYSQL_URL
    from sources.test_rabbitmq import drop

    def handler(tx: Tx, message: Message) -> None:
        project.invoices.create(number=message.message_id)
        tx.publish(f"{RABBITMQ}?queue={unique_name}", message.payload, key=f"inv-{message.message_id}")

    for n in ("ops-1", "ops-2", "ops-1"):
        process(Message(n, "shop-orders", n.encode()), handler, using=project.alias)
    db = POSTGRES_URL if project.alias == "default" else MYSQL_URL
    config = HubConfig(db=db, table=f"{settings.SCHEMA}.{settings.EDINBOX_TABLE}", consumer=settings.EDINBOX_CONSUMER)
    published = [("inv-ops-1", b"ops-1"), ("inv-ops-2", b"ops-2")]
    try:
        processed = inbox(project.alias).stats().processed
        check_views(config, key="shop-orders/ops-1", queue=unique_name, published=published, processed=processed)
    finally:
        asyncio.run(drop(unique_name))
