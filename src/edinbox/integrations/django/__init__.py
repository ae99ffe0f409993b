"""Django: exactly-once effects with the ORM, the journal in Django's own database and transaction.

Add `"edinbox.integrations.django"` to INSTALLED_APPS and run `migrate` (it creates the journal table). Settings
(all optional): `EDINBOX_CONSUMER` (default "default"), `EDINBOX_TABLE` ("edinbox_inbox"), `EDINBOX_MAX_ATTEMPTS`
(5), `EDINBOX_HORIZON` (a timedelta, 7 days). Then, in a view, a Celery task or a consumer:

    from edinbox.integrations.django import process

    outcome = process(message, create_invoice)   # create_invoice(tx, message) uses the ORM

`process` runs inside `transaction.atomic()` on Django's connection: the journal row and the handler's ORM writes
commit together, once per message key; a concurrent duplicate waits for the first and returns DUPLICATE.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from edinbox._message import Message, Outcome
from edinbox._records import Tx
from edinbox._sync_inbox import Inbox
from edinbox._sync_session import JoinedInboxes

__all__ = ["inbox", "process"]

Handler = Callable[[Tx, Message], object]

_joined: dict[str, JoinedInboxes] = {}


def _settings() -> dict[str, Any]:
    from django.conf import settings

    return {
        "consumer": getattr(settings, "EDINBOX_CONSUMER", "default"),
        "table": getattr(settings, "EDINBOX_TABLE", "edinbox_inbox"),
        "max_attempts": getattr(settings, "EDINBOX_MAX_ATTEMPTS", 5),
        "horizon": getattr(settings, "EDINBOX_HORIZON", timedelta(days=7)),
    }


def inbox(using: str = "default") -> Inbox:
    """The inbox on Django's connection `using` (its driver connection: psycopg, sqlite3, or PyMySQL)."""
    from django.db import connections

    connection = connections[using]
    connection.ensure_connection()
    joined = _joined.get(using)
    if joined is None:
        joined = _joined[using] = JoinedInboxes(lambda raw: Inbox(raw, **_settings()))
    return joined.get(connection.connection)  # type: ignore[no-any-return]


def process(message: Message, handler: Handler, *, using: str = "default") -> Outcome:
    """Run `handler(tx, message)` once per key inside `transaction.atomic(using=using)`; return the outcome.

    `tx.connection` is the driver's connection under Django's (the ORM works as usual in the handler). Called
    inside an atomic block of the caller, the journal row joins it (a savepoint) and commits with it. A failure
    of the handler rolls back to the savepoint and is recorded (an attempt, or DEAD for a PermanentError): that
    record commits, then the exception propagates, so the caller does not ack.
    """
    from django.db import transaction

    failure: Exception | None = None
    with transaction.atomic(using=using):
        try:
            outcome = inbox(using).process(message, handler)
        except Exception as exc:  # recorded in this transaction: commit the record, then raise
            failure = exc
    if failure is not None:
        raise failure
    return outcome
