"""The hub end to end on a real database (SQLite file and PostgreSQL) and a real spool folder."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from edinbox import Message
from edinbox.hub import Accounting, Created, HubConfig, SqlAccounting, open_hub
from edinbox.hub.demo._traffic import PARTNERS, Doc, generate, render
from edinbox.sources.spool import publish
from hub_ops import list_rows, show, stats

X12, EDIFACT = PARTNERS[0], PARTNERS[4]


async def settle(config: HubConfig, **kwargs: Any) -> dict[str, int]:
    """Run the hub in this process until the spool is idle; return its totals."""
    async with open_hub(config, **kwargs) as hub:
        return dict(await hub.run(once=True))


def doc(partner: Any = X12, control: str = "000000101", number: str = "INV-1", **kwargs: Any) -> Doc:
    """An invoice interchange with two lines."""
    lines = ((2, Decimal("6.50")), (3, Decimal("10.00")))
    return Doc(partner, control, kwargs.pop("kind", "invoice"), number, lines=lines, **kwargs)


def files(spool: Path, folder: str) -> list[str]:
    """Names in a spool sub-folder (claims included for processing/)."""
    root = spool / folder
    if folder == "processing":
        return [n for d in root.iterdir() if d.is_dir() for n in os.listdir(d)] if root.exists() else []
    return sorted(os.listdir(root)) if root.exists() else []


async def test_generated_traffic_creates_each_invoice_once(hub_config: HubConfig, spool: Path) -> None:
    """Duplicates, re-rendered copies, conflicts, resends, acks and junk: one invoice per unique valid invoice."""
    traffic = generate(60, duplicate_rate=0.5, seed=3)
    await publish(hub_config.source, traffic.files)
    totals = await settle(hub_config.with_overrides(batch_size=7))
    counts = await stats(hub_config)
    assert counts["invoices"] == traffic.invoices
    assert counts["processed"] + counts["resent"] == traffic.unique_interchanges
    assert counts["resent"] == traffic.resends
    assert counts["duplicate"] == traffic.duplicates
    assert counts["conflict"] == traffic.conflicts
    assert counts["bypassed"] == traffic.acks
    assert counts["rejected_payloads"] == traffic.malformed
    assert counts["received"] == len(traffic.files) == sum(totals.values())
    assert files(spool, "inbound") == []
    assert files(spool, "processing") == []
    assert len([n for n in files(spool, "rejected") if not n.endswith(".reason")]) == traffic.malformed


async def test_redelivered_batch_is_all_duplicates(hub_config: HubConfig, spool: Path) -> None:
    """The same files delivered again (as after a crash before the ack) create nothing and count as duplicates."""
    payloads = [render(doc(control=f"00000020{i}", number=f"INV-2{i}")) for i in range(3)]
    await publish(hub_config.source, [(str(i), p) for i, p in enumerate(payloads)])
    await settle(hub_config)
    await publish(hub_config.source, [(str(i), p) for i, p in enumerate(payloads)])
    await settle(hub_config)
    counts = await stats(hub_config)
    assert (counts["processed"], counts["duplicate"], counts["invoices"]) == (3, 3, 3)


async def test_rerendered_copy_is_a_duplicate_and_changed_amount_a_conflict(hub_config: HubConfig, spool: Path) -> None:
    """Other separators give the same key and fingerprint; a changed amount under the same key is a conflict."""
    original = doc(partner=EDIFACT, control="IC1")
    other_style = replace(PARTNERS[5].style, decimal=".")
    changed = replace(original, lines=((2, Decimal("7.50")),))
    await publish(hub_config.source, [("a", render(original))])
    await settle(hub_config)
    await publish(hub_config.source, [("b", render(original, other_style)), ("c", render(changed))])
    await settle(hub_config)
    counts = await stats(hub_config)
    assert (counts["processed"], counts["duplicate"], counts["conflict"], counts["invoices"]) == (1, 1, 1, 1)
    [row] = await list_rows(hub_config, status="conflict", limit=10)
    assert row["key"].endswith("/IC1")


async def test_partner_resend_in_a_new_interchange_is_caught_by_the_invoice_key(
    hub_config: HubConfig, spool: Path
) -> None:
    """The same invoice inside a new interchange (a new inbox key) is reported as resent, not created twice."""
    first = doc(control="000000301", number="INV-3")
    again = replace(first, control="000000302")
    await publish(hub_config.source, [("1", render(first)), ("2", render(again))])
    totals = await settle(hub_config)
    assert totals == {"processed": 1, "resent": 1}
    counts = await stats(hub_config)
    assert (counts["invoices"], counts["resent"]) == (1, 1)


async def test_a_batch_with_resends_counts_each_interchange_as_if_inserted_alone(
    hub_config: HubConfig, spool: Path
) -> None:
    """One batch mixing new invoices, a resend of a stored one and one invoice sent twice: the batch's single insert
    falls back, and each interchange is counted as inserting it alone finds (the first copy in the batch wins)."""
    stored = doc(control="000000501", number="INV-50")
    await publish(hub_config.source, [("0", render(stored))])
    assert await settle(hub_config) == {"processed": 1}
    twice = doc(control="000000503", number="INV-53")
    batch = [
        doc(control="000000502", number="INV-52"),
        replace(stored, control="000000511"),  # resent: its invoice is already stored
        twice,
        doc(control="000000504", number="INV-54"),
        replace(twice, control="000000513"),  # the same invoice again, later in the batch
        doc(control="000000505", number="INV-55"),
    ]
    await publish(hub_config.source, [(str(i), render(d)) for i, d in enumerate(batch, 1)])
    assert await settle(hub_config) == {"processed": 4, "resent": 2}
    counts = await stats(hub_config)
    assert (counts["invoices"], counts["processed"], counts["resent"]) == (5, 5, 2)


async def test_acknowledgments_bypass_the_inbox(hub_config: HubConfig, spool: Path) -> None:
    """997 and CONTRL are acked and counted without a journal row; INVOIC/810 get one."""
    ack_x12 = replace(doc(control="000000401"), kind="ack")
    ack_edifact = replace(doc(partner=EDIFACT, control="IC401"), kind="ack")
    await publish(hub_config.source, [("1", render(ack_x12)), ("2", render(ack_edifact))])
    totals = await settle(hub_config)
    assert totals == {"bypassed": 2}
    counts = await stats(hub_config)
    assert counts["journal_rows"] == 0
    assert files(spool, "archive") != []


async def test_malformed_payloads_are_parked_once_and_visible(hub_config: HubConfig, spool: Path) -> None:
    """Garbage and a missing trailer go to rejected/ with a reason and into the rejected table, never retried."""
    broken = render(doc(control="000000501"), trailer=False)
    await publish(hub_config.source, [("junk", b"%PDF-1.4 not EDI"), ("notrailer", broken)])
    totals = await settle(hub_config)
    assert totals == {"rejected": 2}
    parked = await list_rows(hub_config, status="rejected", limit=10)
    assert len(parked) == 2
    reasons = " ".join(r["reason"] for r in parked)
    assert "unkeyable" in reasons
    assert "not a valid EDI interchange" in reasons or "no EDI interchange" in reasons
    detail = await show(hub_config, parked[0]["key"])
    assert detail is not None
    assert detail["payload"]
    names = files(spool, "rejected")
    parked_files = [n for n in names if not n.endswith(".reason")]
    assert len(parked_files) == 2
    assert all(f"{n}.reason" in names for n in parked_files)
    assert files(spool, "inbound") == []
    counts = await stats(hub_config)
    assert (counts["rejected"], counts["invoices"], counts["journal_rows"]) == (2, 0, 0)


class FailingAccounting(Accounting):
    """A sink that refuses one invoice number, the way a broken accounting rule would."""

    def __init__(self, inner: SqlAccounting, *, poison: str) -> None:
        self.inner = inner
        self.poison = poison

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Fail for the poison invoice, create the others."""
        if any(i.number == self.poison for i in invoices):
            raise RuntimeError(f"accounting refused {self.poison}")
        return await self.inner.create(tx, message, invoices)


async def test_failing_invoice_goes_dead_and_the_rest_of_the_batch_settles(hub_config: HubConfig, spool: Path) -> None:
    """A handler failure rolls back only that message's attempts; after max_attempts it is parked as dead."""
    config = hub_config.with_overrides(max_attempts=2)
    good = [render(doc(control=f"00000060{i}", number=f"OK-{i}")) for i in range(3)]
    bad = render(doc(control="000000699", number="POISON"))
    await publish(config.source, [("g0", good[0]), ("bad", bad), ("g1", good[1]), ("g2", good[2])])
    async with open_hub(config) as hub:
        hub.accounting = FailingAccounting(hub.accounting, poison="POISON")  # type: ignore[arg-type]
        deadline = time.monotonic() + 20
        while files(spool, "inbound") + files(spool, "processing") and time.monotonic() < deadline:
            await hub.step()
    counts = await stats(config)
    assert (counts["processed"], counts["invoices"], counts["dead"]) == (3, 3, 1)
    [row] = await list_rows(config, status="dead", limit=10)
    assert "accounting refused POISON" in row["error"]
    assert files(spool, "inbound") == []


def _drop_invoices(config: HubConfig) -> None:
    """Drop the hub's invoices table behind its back, on whichever database `config` names."""
    schema = config.table.rpartition(".")[0]
    table = f"{schema}.edinbox_hub_invoices" if schema else "edinbox_hub_invoices"
    if config.db.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(config.db.removeprefix("sqlite:///")) as connection:
            connection.execute(f"DROP TABLE {table}")
    elif config.db.startswith("mysql"):
        from services import mariadb_admin

        mariadb_admin(f"DROP TABLE {table}")
    else:
        import psycopg

        with psycopg.connect(config.db, autocommit=True) as connection:
            connection.execute(f"DROP TABLE {table}")


async def test_a_table_dropped_under_the_hub_is_a_schema_error_and_loses_nothing(
    hub_config: HubConfig, spool: Path
) -> None:
    """A hub table dropped while the hub runs ends the run with a SchemaError naming `edinbox init` on every
    database (no wait brings a table back), and the interchange in hand is settled by the next run after init."""
    from edinbox import SchemaError
    from hub_ops import init

    await publish(hub_config.source, [("a", render(doc()))])
    async with open_hub(hub_config) as hub:
        await hub.run(once=True)
        _drop_invoices(hub_config)
        await publish(hub_config.source, [("b", render(doc(control="000000102", number="INV-2")))])
        with pytest.raises(SchemaError, match="edinbox init"):
            await asyncio.wait_for(hub.run(once=True), 60)
    await init(hub_config)
    await settle(hub_config)
    counts = await stats(hub_config)
    assert (counts["processed"], counts["invoices"]) == (2, 1)  # the dropped table took INV-1 with it


def _edinbox(*args: str, env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "edinbox.cli", *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def _run_args(config: HubConfig, *extra: str) -> list[str]:
    return ["run", "--db", config.db, "--table", config.table, "--source", config.source, *extra]


async def test_crash_between_commit_and_ack_redelivers_and_nothing_doubles(hub_config: HubConfig, spool: Path) -> None:
    """A hub killed by the fault point after its commit leaves its claims (and logs them as its last words); the
    restart settles them as duplicates."""
    payloads = [(str(i), render(doc(control=f"{700 + i:09d}", number=f"C-{i}"))) for i in range(10)]
    await publish(hub_config.source, payloads)
    crashed = _edinbox(*_run_args(hub_config, "--once", "--batch-size", "4"), env={"EDINBOX_FAULT": "after_commit:2"})
    _, err = crashed.communicate(timeout=60)
    assert crashed.returncode == -signal.SIGKILL, err
    # the second batch (committed, never acked) and the two files left, claimed ahead while it committed
    assert len(files(spool, "processing")) == 6
    assert err.count("killed delivery=") == 4  # its last words: each delivery the killed commit settled
    assert len(files(spool, "archive")) == 4
    restarted = _edinbox(*_run_args(hub_config, "--once", "--batch-size", "4", "--idle-timeout", "0.2"))
    _, err = restarted.communicate(timeout=60)
    assert restarted.returncode == 0, err
    assert "outcome=duplicate" in err
    counts = await stats(hub_config)
    assert (counts["processed"], counts["duplicate"], counts["invoices"]) == (10, 4, 10)
    assert files(spool, "processing") == []


async def test_sigterm_finishes_the_batch_in_hand_then_exits(hub_config: HubConfig, spool: Path) -> None:
    """SIGTERM stops the hub gracefully: exit 0, nothing left claimed, every archived file committed."""
    payloads = [(str(i), render(doc(control=f"{800 + i:09d}", number=f"T-{i}"))) for i in range(200)]
    await publish(hub_config.source, payloads)
    hub = _edinbox(*_run_args(hub_config, "--batch-size", "1"))
    assert hub.stderr is not None
    for line in hub.stderr:
        if "outcome=processed" in line:
            break
    hub.send_signal(signal.SIGTERM)
    _, err = hub.communicate(timeout=30)
    assert hub.returncode == 0, err
    assert files(spool, "processing") == []
    counts = await stats(hub_config)
    assert 0 < counts["invoices"] == len(files(spool, "archive")) < 200
    assert counts["invoices"] + len(files(spool, "inbound")) == 200


def test_run_refuses_a_bad_fault_spec(tmp_path: Path) -> None:
    """EDINBOX_FAULT with a bad value is a usage error, not a silent no-op."""
    (tmp_path / "x.db").touch()  # past the check that the database exists: the fault spec is what is wrong
    proc = _edinbox(
        "run",
        "--db",
        f"sqlite:///{tmp_path / 'x.db'}",
        "--source",
        f"dir://{tmp_path}",
        "--once",
        env={"EDINBOX_FAULT": "after_commit:zero"},
    )
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1  # a configuration error; 2 means the hub gave up waiting
    assert "after_commit:N" in err


class LedgerApi(Accounting):
    """An accounting system outside the database that honours idempotency keys (like an HTTP API would)."""

    lease = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.ledger: dict[str, list[str]] = {}

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Record the call; an idempotency key seen before creates nothing new."""
        assert tx.connection is None
        assert tx.idempotency_key
        self.calls.append((tx.idempotency_key, message.message_id))
        if tx.idempotency_key in self.ledger:
            return Created(created=0, existing=len(invoices))
        self.ledger[tx.idempotency_key] = [i.number for i in invoices]
        return Created(created=len(invoices), existing=0)


async def test_lease_mode_sink_gets_each_interchange_once_with_its_idempotency_key(
    hub_config: HubConfig, spool: Path
) -> None:
    """A non-transactional sink is called once per new interchange, with a stable key; copies are duplicates."""
    payloads = [(str(i), render(doc(control=f"{900 + i:09d}", number=f"L-{i}"))) for i in range(3)]
    await publish(hub_config.source, [*payloads, payloads[0], payloads[2]])
    api = LedgerApi()
    async with open_hub(hub_config, accounting=api) as hub:
        totals = dict(await hub.run(once=True))
    assert totals == {"processed": 3, "duplicate": 2}
    assert len(api.calls) == 3
    assert sorted(n for numbers in api.ledger.values() for n in numbers) == ["L-0", "L-1", "L-2"]
    counts = await stats(hub_config)
    assert (counts["processed"], counts["duplicate"], counts["invoices"]) == (3, 2, 0)


async def test_one_file_with_a_good_and_a_broken_interchange(hub_config: HubConfig, spool: Path) -> None:
    """In a file of two interchanges, the complete one is processed and the one without trailer is parked."""
    good = render(doc(control="000001001", number="F-1"))
    broken = render(doc(control="000001002", number="F-2"), trailer=False)
    await publish(hub_config.source, [("pair", good + broken)])
    totals = await settle(hub_config)
    assert totals == {"processed": 1, "rejected": 1}
    counts = await stats(hub_config)
    assert (counts["invoices"], counts["rejected"]) == (1, 1)
    [parked] = await list_rows(hub_config, status="rejected", limit=5)
    detail = await show(hub_config, parked["key"])
    assert detail is not None
    assert "000001002" in detail["payload"]
    assert "000001001" not in detail["payload"]
    assert len(files(spool, "archive")) == 1  # the file itself was acked: its good part is settled


async def test_non_edi_payloads_can_be_keyed_by_producer_id(hub_config: HubConfig, spool: Path) -> None:
    """With non_edi = "inbox", a payload that is not EDI is deduplicated by its producer id instead of parked."""
    config = hub_config.with_overrides(non_edi="inbox")
    await publish(config.source, [("order-17", b'{"order": 17}'), ("order-17", b'{"order": 17}')])
    totals = await settle(config)
    assert totals == {"processed": 1, "duplicate": 1}
    [row] = await list_rows(config, status="processed", limit=5)
    assert row["key"] == "dir:spool/order-17"


async def test_routes_come_from_the_configuration(hub_config: HubConfig, spool: Path) -> None:
    """A route table that sends INVOIC and 810 past the inbox creates no journal rows and no invoices."""
    config = hub_config.with_overrides(routes={"INVOIC": "bypass", "810": "bypass"})
    await publish(config.source, [("1", render(doc(control="000001101"))), ("2", render(doc(EDIFACT, "IC1101")))])
    assert await settle(config) == {"bypassed": 2}
    counts = await stats(config)
    assert (counts["journal_rows"], counts["invoices"]) == (0, 0)


async def test_logs_are_json_on_request(hub_config: HubConfig, spool: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Rendered as JSON, each settled message is one JSON object with its key, outcome and duration."""
    import json

    from edinbox.loop import EventFormatter

    await publish(hub_config.source, [("1", render(doc(control="000001201")))])
    with caplog.at_level(logging.INFO, logger="edinbox.hub"):
        async with open_hub(hub_config) as hub:
            await hub.run(once=True)
    lines = [json.loads(EventFormatter(json=True).format(r)) for r in caplog.records]
    settled = [e for e in lines if e.get("event") == "settled"]  # beside it, the purge's lines (hourly by default)
    assert [(e["event"], e["outcome"]) for e in settled] == [("settled", "processed")]
    assert {"key", "ms", "delivery"} <= set(settled[0])


def test_log_lines_mask_passwords() -> None:
    """A password inside any logged value is replaced by ***, in logfmt and in JSON."""
    from edinbox.loop import EventFormatter, format_line
    from logfmt import event_record

    fields = {"db": "postgresql://hub:s3cret@db/hub", "error": "cannot connect to amqp://guest:pw@mq/ (refused)"}
    record = event_record("probe", fields)
    for line in (
        format_line("probe", fields),
        EventFormatter().format(record),
        EventFormatter(json=True).format(record),
    ):
        assert "s3cret" not in line
        assert ":pw@" not in line
        assert "hub:***@db" in line
