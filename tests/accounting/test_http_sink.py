"""The HTTP accounting sink in the inbox's lease mode, against the real accounting service over HTTP."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from edinbox import AsyncInbox, ConfigurationError, Message, NotSettledError, Outcome, Tx
from edinbox.hub.demo.accounting_service import AccountingService
from edinbox.hub.sinks._http import AccountingError, HttpAccounting

LEASE = timedelta(seconds=1)
CRASH_LEASE = timedelta(seconds=5)
"""The lease of the process killed after its POST: long enough to be live when the parent redelivers."""


@dataclass(frozen=True, slots=True)
class Party:
    """A seller or buyer, shaped like `edinbox.edi.InvoiceParty`."""

    id: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class Invoice:
    """An invoice shaped like `edinbox.edi.Invoice`."""

    number: str
    issue_date: date
    kind: str
    seller: Party
    buyer: Party
    currency: str | None
    total: Decimal
    tax_total: Decimal


def invoice(number: str) -> Invoice:
    """An invoice of ACME to the hub's company."""
    return Invoice(
        number, date(2026, 11, 30), "invoice", Party("ACME"), Party("HUB"), "EUR", Decimal("119.00"), Decimal("19.00")
    )


@pytest.fixture
def service(tmp_path: Path) -> Iterator[AccountingService]:
    """The real accounting service on a free port."""
    with AccountingService(tmp_path / "accounting.db") as running:
        yield running


@pytest.fixture
async def inbox(tmp_path: Path) -> AsyncIterator[AsyncInbox]:
    """A SQLite inbox for the consumer `accounting`."""
    async with AsyncInbox(f"sqlite:///{tmp_path / 'hub.db'}", consumer="accounting") as opened:
        await opened.create_schema()
        yield opened


async def test_invoices_are_posted_with_keys_derived_from_the_inbox_key(
    service: AccountingService, inbox: AsyncInbox
) -> None:
    """Each invoice is POSTed once with `<inbox idempotency key>-<n>`; a redelivery after completion posts nothing."""
    sink = HttpAccounting(service.url)
    message = Message("000000905", "X12:ZZ:ACME>ZZ:HUB", b"ISA...")
    keys: list[str] = []

    async def handler(tx: Tx, msg: Message) -> None:
        assert tx.connection is None
        assert tx.idempotency_key
        keys.append(tx.idempotency_key)
        posted = await sink.create(tx, msg, [invoice("INV-1"), invoice("INV-2")])
        assert (posted.created, posted.existing) == (2, 0)

    assert await inbox.process(message, handler, lease=LEASE) is Outcome.PROCESSED
    assert await inbox.process(message, handler, lease=LEASE) is Outcome.DUPLICATE
    assert len(keys) == 1
    stored = service.invoices()
    assert [(i["number"], i["total"], i["issue_date"], i["seller"]) for i in stored] == [
        ("INV-1", "119.00", "2026-11-30", "ACME"),
        ("INV-2", "119.00", "2026-11-30", "ACME"),
    ]
    assert stored[0]["message_id"] == "000000905"


async def test_an_invoice_resent_in_a_new_interchange_counts_as_existing(
    service: AccountingService, inbox: AsyncInbox
) -> None:
    """The same invoice in another interchange (another inbox key) is reported existing (409), not created twice."""
    sink = HttpAccounting(service.url)
    results = []

    async def handler(tx: Tx, msg: Message) -> None:
        results.append(await sink.create(tx, msg, [invoice("INV-7")]))

    for control in ("000000001", "000000002"):
        await inbox.process(Message(control, "X12:ZZ:ACME>ZZ:HUB", control.encode()), handler, lease=LEASE)
    assert [(r.created, r.existing) for r in results] == [(1, 0), (0, 1)]
    assert len(service.invoices()) == 1


async def test_unreachable_api_leaves_the_message_unsettled(inbox: AsyncInbox) -> None:
    """A refused connection raises AccountingError: the message is not settled, and the next delivery retries it."""
    sink = HttpAccounting("http://127.0.0.1:9/invoices", timeout=2)

    async def handler(tx: Tx, msg: Message) -> None:
        await sink.create(tx, msg, [invoice("INV-1")])

    with pytest.raises(AccountingError, match="failed"):
        await inbox.process(Message("m", "s", b"x"), handler, lease=LEASE)
    assert (await inbox.stats()).failed == 1


async def test_the_sink_refuses_to_run_outside_lease_mode() -> None:
    """Without the lease's idempotency key the sink refuses, rather than POSTing without a key."""
    with pytest.raises(ConfigurationError, match="lease"):
        await HttpAccounting("http://127.0.0.1:9/invoices").create(Tx(None, "sqlite"), Message("m", "s"), [])
    with pytest.raises(ConfigurationError, match="http"):
        HttpAccounting("ftp://example/invoices")


_POST_THEN_DIE = """
import asyncio, os, signal, sys
from datetime import date, timedelta
from decimal import Decimal
from edinbox import AsyncInbox, Message
from edinbox.hub.sinks._http import HttpAccounting
sys.path.insert(0, sys.argv[3])
from test_http_sink import invoice

async def main():
    inbox = AsyncInbox(f"sqlite:///{sys.argv[1]}", consumer="accounting")
    sink = HttpAccounting(sys.argv[2])

    async def handler(tx, message):
        posted = await sink.create(tx, message, [invoice("INV-9")])
        print(tx.idempotency_key, posted.created, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # the invoice exists; the completion never commits

    lease = timedelta(seconds=float(sys.argv[4]))
    await inbox.process(Message("000000909", "X12:ZZ:ACME>ZZ:HUB", b"ISA..."), handler, lease=lease)

asyncio.run(main())
"""


async def test_crash_after_the_post_is_retried_with_the_same_key_and_creates_one_invoice(
    service: AccountingService, inbox: AsyncInbox, tmp_path: Path
) -> None:
    """A hub killed after the POST, before completing: redelivered in the lease it is not settled; after it, the
    retry sends the same key, the service replays its answer, and there is still one invoice."""
    # the dead process's lease must still be live when the parent redelivers, however slowly it exits
    held = CRASH_LEASE.total_seconds()
    child = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-c",
            _POST_THEN_DIE,
            str(tmp_path / "hub.db"),
            service.url,
            str(Path(__file__).parent),
            str(held),
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert child.returncode == -9, child.stderr
    first_key, created = child.stdout.split()
    assert created == "1"
    message = Message("000000909", "X12:ZZ:ACME>ZZ:HUB", b"ISA...")
    sink = HttpAccounting(service.url)
    retried: list[str] = []

    async def handler(tx: Tx, msg: Message) -> None:
        assert tx.idempotency_key is not None
        retried.append(tx.idempotency_key)
        posted = await sink.create(tx, msg, [invoice("INV-9")])
        assert (posted.created, posted.existing) == (1, 0)  # the replayed answer of the first POST

    exited = time.monotonic()  # the lease was claimed before the child died: it ends before exited + held
    with pytest.raises(NotSettledError):  # the dead process's lease is still live
        await inbox.process(message, handler, lease=LEASE)
    await asyncio.sleep(exited + held + 0.2 - time.monotonic())
    assert await inbox.process(message, handler, lease=LEASE) is Outcome.PROCESSED
    assert retried == [first_key]
    assert [i["number"] for i in service.invoices()] == ["INV-9"]
    assert (await inbox.stats()).processed == 1


async def test_a_network_error_is_transient_and_costs_no_attempt(inbox: AsyncInbox) -> None:
    """A refused connection is AccountingUnreachable, a TransientError: unsettled, and the attempt is given back."""
    from edinbox import TransientError
    from edinbox.hub.sinks._http import AccountingUnreachable

    sink = HttpAccounting("http://127.0.0.1:9/invoices", timeout=2)

    async def handler(tx: Tx, msg: Message) -> None:
        await sink.create(tx, msg, [invoice("INV-1")])

    with pytest.raises(AccountingUnreachable) as caught:
        await inbox.process(Message("m", "s", b"x"), handler, lease=LEASE)
    assert isinstance(caught.value, TransientError)
    record = await inbox.get("s", "m")
    assert record is not None
    assert record.attempts == 0


async def test_a_4xx_refusal_is_permanent_and_parks_the_interchange_at_once(
    service: AccountingService, inbox: AsyncInbox
) -> None:
    """A 400 from the API (data it cannot take) is AccountingRefused: the interchange is parked on its first try."""
    sink = HttpAccounting(service.url)

    async def handler(tx: Tx, msg: Message) -> None:
        await sink.create(tx, msg, [invoice("")])  # no invoice number: the API answers 400

    outcome = await inbox.process(Message("m", "s", b"x"), handler, lease=LEASE)
    assert outcome is Outcome.DEAD
    record = await inbox.get("s", "m")
    assert record is not None
    assert record.attempts == 1
    assert "answered 400" in (record.last_error or "")
    assert service.invoices() == []


async def test_the_token_is_sent_and_a_refused_one_is_the_operators_not_the_messages(
    tmp_path: Path, inbox: AsyncInbox
) -> None:
    """With the service's token the invoice is created; with another one the API answers 401, which is a
    ConfigurationError (the hub stops with exit 1): no attempt is charged and nothing is parked."""
    from accounting.test_service_limits import TOKEN
    from edinbox.hub.sinks._http import AccountingForbidden

    with AccountingService(tmp_path / "accounting.db", token=TOKEN) as service:

        def handler_of(sink: HttpAccounting, number: str) -> Any:
            async def handler(tx: Tx, msg: Message) -> None:
                await sink.create(tx, msg, [invoice(number)])

            return handler

        wrong = HttpAccounting(service.url, token="x" * 20)
        with pytest.raises(AccountingForbidden, match="answered 401") as caught:
            await inbox.process(Message("m", "s", b"x"), handler_of(wrong, "INV-1"), lease=LEASE)
        assert isinstance(caught.value, ConfigurationError)
        assert TOKEN not in str(caught.value)
        record = await inbox.get("s", "m")
        assert record is not None
        assert (record.attempts, record.status.value) == (0, "failed")
        right = HttpAccounting(service.url, token=TOKEN)
        await asyncio.sleep(LEASE.total_seconds())
        outcome = await inbox.process(Message("m", "s", b"x"), handler_of(right, "INV-1"), lease=LEASE)
        assert outcome is Outcome.PROCESSED
        assert [i["number"] for i in service.invoices()] == ["INV-1"]


async def test_a_busy_service_is_a_503_the_sink_waits_out(tmp_path: Path, inbox: AsyncInbox) -> None:
    """A service whose one place is held answers 503 with Retry-After: the sink raises AccountingUnreachable (a
    TransientError), the message stays unsettled with no attempt charged, and the retry after creates the invoice."""
    from accounting.test_service_limits import TOKEN, read_all, stalled
    from edinbox import TransientError
    from edinbox.hub.demo.accounting_service import Limits
    from edinbox.hub.sinks._http import AccountingUnreachable

    limits = Limits(workers=1, queue=0, read_timeout=2.0)
    with AccountingService(tmp_path / "accounting.db", token=TOKEN, limits=limits) as service:
        sink = HttpAccounting(service.url, token=TOKEN)

        async def handler(tx: Tx, msg: Message) -> None:
            await sink.create(tx, msg, [invoice("INV-1")])

        sock = stalled(service)
        try:
            await asyncio.sleep(0.3)  # the stalled request holds the only place
            with pytest.raises(AccountingUnreachable, match="answered 503") as caught:
                await inbox.process(Message("m", "s", b"x"), handler, lease=LEASE)
            assert isinstance(caught.value, TransientError)
            record = await inbox.get("s", "m")
            assert record is not None
            assert record.attempts == 0
            await asyncio.to_thread(read_all, sock, timeout=10)  # dropped after the read timeout
        finally:
            sock.close()
        outcome = await inbox.process(Message("m", "s", b"x"), handler, lease=LEASE)
        assert outcome is Outcome.PROCESSED
        assert [i["number"] for i in service.invoices()] == ["INV-1"]
