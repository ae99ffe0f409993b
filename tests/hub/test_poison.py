"""Poison never spreads: a bad message, file or value is parked alone and its neighbours go through.

End to end on SQLite and PostgreSQL through the spool: good interchanges mixed with every bad input of
`tests/hub/poison.py`; each bad one is parked with its reason, every good invoice is created once in the first run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from edinbox import Message, StoreError
from edinbox.hub import Accounting, Created, HubConfig, open_hub
from edinbox.hub.database._journal import open_inbox
from edinbox.hub.deliveries._items import HEAD
from edinbox.sources import Delivery, Source
from edinbox.sources.spool import publish
from hub_ops import list_rows, show, stats

from .poison import BAD, EDIFACT, SlowAccounting, bad_date, bad_inputs, good, huge_total

MAX_PAYLOAD = 1024 * 1024


def files(spool: Path, folder: str) -> list[str]:
    """Names in a spool sub-folder (claims included for processing/)."""
    root = spool / folder
    if folder == "processing":
        return [n for d in root.iterdir() if d.is_dir() for n in os.listdir(d)] if root.exists() else []
    return sorted(os.listdir(root)) if root.exists() else []


def oversized() -> bytes:
    """Valid interchanges, more than MAX_PAYLOAD of them: refused by size, so none of their invoices is created."""
    one = good(800_000_000, prefix="BIG")
    return b"".join(good(800_000_000 + n, prefix="BIG") for n in range(MAX_PAYLOAD // len(one) + 2))


def traffic() -> tuple[list[tuple[str, bytes]], int]:
    """Good interchanges with every bad input between them, and a file of one good and one bad interchange.

    Returns the files and the number of good invoices in them.
    """
    goods = [good(i) for i in range(1, 11)] + [good(i, partner=EDIFACT) for i in range(11, 16)]
    bads = [*bad_inputs(), ("oversized", oversized())]
    out: list[tuple[str, bytes]] = []
    for i, payload in enumerate(goods):
        out.append((f"good-{i}", payload))
        if i < len(bads):
            out.append(bads[i])
    out.append(("pair", good(16) + bad_date().replace(b"900000001", b"900000009")))
    return out, len(goods) + 1


async def test_every_bad_input_is_parked_alone_and_every_good_invoice_created_once(
    hub_config: HubConfig, spool: Path
) -> None:
    """One run over mixed traffic: good invoices created once, each bad input parked with its reason, nothing left."""
    config = hub_config.with_overrides(batch_size=8, max_payload=MAX_PAYLOAD)
    payloads, invoices = traffic()
    await publish(config.source, payloads)
    async with open_hub(config) as hub:
        totals = dict(await hub.run(once=True))
    counts = await stats(config)
    parked = await list_rows(config, status="rejected", limit=50)
    reasons = {row["delivery"].split("~")[-1].removesuffix(".edi"): row["reason"] for row in parked}
    assert counts["invoices"] == invoices
    assert counts["processed"] == invoices
    assert len(parked) == len(BAD) + 2  # every bad input, the oversized file, the bad half of the pair
    assert "not a date" in reasons["bad-date"]
    assert "DTM+137" in reasons["missing-dtm137"]
    assert "digits before the decimal point" in reasons["total-1e21"]
    assert "over the limit of 512" in reasons["control-10000"]  # the key limit (the parser or Message says so)
    assert "quantity" in reasons["quantity-500000-digits"]
    assert "not a valid EDI interchange" in reasons["not-edi"]
    assert "max_payload" in reasons["oversized"]
    assert "not a date" in reasons["pair"]
    assert (counts["rejected"], counts["dead"], counts["duplicate"]) == (len(BAD) + 2, 0, 0)
    assert counts["received"] == sum(totals.values()) == invoices + len(BAD) + 2  # one count per item
    assert files(spool, "inbound") == []
    assert files(spool, "processing") == []
    rejected = [n for n in files(spool, "rejected") if not n.endswith(".reason")]
    assert len(rejected) == len(BAD) + 1  # the pair's file was acked: its good half is settled
    assert len(files(spool, "archive")) == invoices


async def stored_payload(config: HubConfig, key: str) -> bytes:
    """The bytes the rejected table holds for a parked payload (`rejected/ID`)."""
    params = {"consumer": config.consumer, "id": int(key.split("/")[1])}
    async with open_inbox(config) as inbox:
        rows = await inbox.transaction(lambda tx: tx.unit.fetch("hub_rejected_row", params))
    return bytes(rows[0][5])


@pytest.mark.parametrize("size", [3 * MAX_PAYLOAD, MAX_PAYLOAD // 2])
async def test_a_big_rejected_payload_is_kept_once(hub_config: HubConfig, spool: Path, size: int) -> None:
    """A big random file (over max_payload: never parsed; under it: not EDI) is kept whole once, in the spool's
    rejected/; the table keeps its first 64 KiB, and its reason gives the full size and names that folder."""
    config = hub_config.with_overrides(max_payload=MAX_PAYLOAD)
    big = os.urandom(size)
    await publish(config.source, [("huge", big), ("ok", good(1))])
    async with open_hub(config) as hub:
        totals = dict(await hub.run(once=True))
    assert totals == {"processed": 1, "rejected": 1}
    [row] = await list_rows(config, status="rejected", limit=5)
    assert f"of its {len(big)} bytes" in row["reason"]
    assert f"{spool}/rejected" in row["reason"]
    assert ("max_payload" in row["reason"]) == (size > MAX_PAYLOAD)
    assert await stored_payload(config, row["key"]) == big[:HEAD]
    [parked] = [n for n in files(spool, "rejected") if not n.endswith(".reason")]
    assert (spool / "rejected" / parked).read_bytes() == big


class KeptElsewhere(Source):
    """The spool, its rejects saying the whole payload was kept elsewhere (as a Kafka reject whose dead letter was too
    large for its topic: the payload stays in the topic read)."""

    def __init__(self, inner: Source) -> None:
        """Wrap the hub's open source."""
        self.inner = inner
        self.url = inner.url

    async def open(self) -> None:
        """Nothing: the inner source is open."""

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """The inner source's deliveries."""
        return await self.inner.receive(max_messages=max_messages, timeout=timeout)

    async def ack(self, delivery: Delivery) -> None:
        """The inner source's ack."""
        await self.inner.ack(delivery)

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """The inner source's nack."""
        await self.inner.nack(delivery, delay=delay)

    async def reject(self, delivery: Delivery, *, reason: str) -> str | None:
        """The inner source's reject, then where the whole payload was kept instead."""
        await self.inner.reject(delivery, reason=reason)
        return f"the archive at {delivery.coordinates}"

    async def aclose(self) -> None:
        """Nothing: the inner source is closed by the hub's exit."""


async def test_a_rejected_payload_the_source_kept_elsewhere_says_where_it_is(
    hub_config: HubConfig, caplog: pytest.LogCaptureFixture
) -> None:
    """A source whose reject says it kept the whole payload elsewhere (the value it returns): the reason of the row
    that keeps the first 64 KiB of a big payload names that place instead of where the source keeps the others, in
    the table and in the `settled` line; a small payload kept whole keeps its reason as it was."""
    big = os.urandom(3 * HEAD)
    await publish(hub_config.source, [("big", big), ("date", bad_date()), ("ok", good(1))])
    async with open_hub(hub_config.with_overrides(batch_size=1)) as hub:
        hub.source = KeptElsewhere(hub.source)
        with caplog.at_level(logging.INFO, logger="edinbox.hub"):
            totals = dict(await hub.run(once=True))
    assert totals == {"processed": 1, "rejected": 2}
    rows = {row["delivery"]: row for row in await list_rows(hub_config, status="rejected", limit=5)}
    [(name, row)] = [(name, row) for name, row in rows.items() if "bytes are kept here" in row["reason"]]
    where = f"the whole payload is in the archive at {name}"
    assert row["reason"].endswith(f"of its {len(big)} bytes are kept here, {where}")
    assert "dead letters" not in row["reason"]
    [small] = [r for r in rows.values() if r is not row]
    assert "archive" not in small["reason"]
    assert "bytes" not in small["reason"]
    settled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("settled")]
    assert [line for line in settled if where in line] != []


async def test_a_small_rejected_payload_is_kept_whole(hub_config: HubConfig, spool: Path) -> None:
    """A rejected payload under 64 KiB is kept whole in the table, its reason untouched."""
    await publish(hub_config.source, [("date", bad_date())])
    async with open_hub(hub_config) as hub:
        await hub.run(once=True)
    [row] = await list_rows(hub_config, status="rejected", limit=5)
    assert "bytes" not in row["reason"]
    detail = await show(hub_config, row["key"])
    assert detail is not None
    assert "20261399" in detail["payload"]


class PoisonAccounting(Accounting):
    """A sink that raises its own exception for one invoice number, the way a broken accounting rule would."""

    def __init__(self, inner: Accounting, *, poison: str) -> None:
        self.inner = inner
        self.poison = poison
        self.calls = 0

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Fail for the poison invoice, create the others."""
        self.calls += 1
        if any(i.number == self.poison for i in invoices):
            raise RuntimeError(f"accounting refused {self.poison}")
        return await self.inner.create(tx, message, invoices)


async def test_one_handler_failure_in_a_batch_of_six_leaves_five_processed(hub_config: HubConfig, spool: Path) -> None:
    """With max_attempts=1, one failing message in a batch of 6 is parked dead; the 5 others are processed at once,
    charged nothing (no error on their rows), and the stats add up."""
    config = hub_config.with_overrides(max_attempts=1, batch_size=6, idle_timeout=2.0)  # outlasts the nack's delay
    payloads = [(f"m{i}", good(300 + i)) for i in range(6)]
    await publish(config.source, payloads)
    async with open_hub(config) as hub:
        hub.accounting = PoisonAccounting(hub.accounting, poison="G-303")
        first = await hub.step()
        assert first == 6
        after_first = await stats(config)
        assert (after_first["processed"], after_first["invoices"]) == (5, 5)
        totals = dict(await hub.run(once=True))
    counts = await stats(config)
    assert (counts["processed"], counts["invoices"], counts["dead"]) == (5, 5, 1)
    rows = await list_rows(config, status=None, limit=20)
    dead = [r for r in rows if r["status"] == "dead"]
    assert len(dead) == 1
    assert "accounting refused G-303" in dead[0]["error"]
    assert all(r["error"] == "" for r in rows if r["status"] == "processed")
    assert totals == {"processed": 5, "not-settled": 1, "dead": 1}  # the failed delivery came back once, dead
    assert counts["received"] == 6  # settled deliveries: the unsettled one was counted when it settled
    assert files(spool, "inbound") == files(spool, "processing") == []


@pytest.mark.parametrize("bad", ["bad-date", "missing-dtm137", "total-1e21"])
async def test_a_data_error_of_one_invoice_is_not_a_database_failure(
    hub_config: HubConfig, spool: Path, bad: str
) -> None:
    """A bad date, a missing DTM+137 or a total of 10^21 among ten good invoices (it once made every delivery of
    the batch dead, 0 invoices): the ten are created in the first run, the bad one parked alone."""
    config = hub_config.with_overrides(batch_size=11, max_attempts=3)
    payloads = [(f"ok{i}", good(400 + i)) for i in range(10)]
    payloads.insert(4, ("bad", BAD[bad]()))
    await publish(config.source, payloads)
    async with open_hub(config) as hub:
        totals = dict(await hub.run(once=True))
    assert totals == {"processed": 10, "rejected": 1}
    counts = await stats(config)
    assert (counts["invoices"], counts["dead"]) == (10, 0)


def test_run_once_over_poison_exits_zero(hub_config: HubConfig, spool: Path) -> None:
    """`edinbox run --once` over every bad input and good ones exits 0 (no hub process exits on bad data)."""

    payloads = [*bad_inputs(), ("g", good(500))]
    asyncio.run(publish(hub_config.source, payloads))
    args = ["run", "--once", "--db", hub_config.db, "--table", hub_config.table, "--source", hub_config.source]
    done = subprocess.run(
        [sys.executable, "-m", "edinbox.cli", *args, "--idle-timeout", "0.2", "--max-payload", "1MiB"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert files(spool, "inbound") == files(spool, "processing") == []
    counts = asyncio.run(stats(hub_config))
    assert (counts["invoices"], counts["rejected"]) == (1, len(BAD))


class DriverErrorAccounting(Accounting):
    """A sink whose own SQL hits a value the database refuses (a driver data error) for one invoice number."""

    def __init__(self, inner: Accounting, *, poison: str) -> None:
        self.inner = inner
        self.poison = poison

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Run a statement the database refuses for the poison invoice (the driver's own exception), else create."""
        if any(i.number == self.poison for i in invoices):
            if tx.dialect == "sqlite":
                await tx.connection.execute("CREATE TEMP TABLE IF NOT EXISTS strict_probe (x INTEGER) STRICT")
                await tx.connection.execute("INSERT INTO strict_probe VALUES ('not a number')")
            elif tx.dialect == "mysql":
                async with tx.connection.cursor() as cursor:
                    await cursor.execute("SELECT 18446744073709551615 + 1")  # BIGINT value out of range
            else:
                await tx.connection.execute("SELECT 1e30::numeric(20, 4)")
        return await self.inner.create(tx, message, invoices)


async def test_a_driver_data_error_in_the_handler_parks_its_message_at_once(hub_config: HubConfig, spool: Path) -> None:
    """A value the database refuses in the handler's SQL is that message's permanent fault: dead at once (no retry,
    max_attempts untouched), its five batch-mates processed in the same run, the database never taken for down."""
    config = hub_config.with_overrides(batch_size=6, max_attempts=5)
    await publish(config.source, [(f"d{i}", good(600 + i)) for i in range(6)])
    async with open_hub(config) as hub:
        hub.accounting = DriverErrorAccounting(hub.accounting, poison="G-602")
        totals = dict(await hub.run(once=True))
    assert totals == {"processed": 5, "dead": 1}
    counts = await stats(config)
    assert (counts["processed"], counts["invoices"], counts["dead"]) == (5, 5, 1)
    [dead] = await list_rows(config, status="dead", limit=5)
    assert dead["attempts"] == 1
    assert files(spool, "inbound") == files(spool, "processing") == []


async def test_a_slow_batch_beats_in_progress_for_each_delivery(hub_config: HubConfig, spool: Path) -> None:
    """A batch held longer than a third of the source's ack_wait calls in_progress on each of its deliveries."""
    await publish(hub_config.source, [("s1", good(700)), ("s2", good(701))])
    beats: list[str] = []
    async with open_hub(hub_config.with_overrides(batch_size=2)) as hub:

        async def in_progress(delivery: Any) -> None:
            beats.append(delivery.key)

        hub.source.ack_wait = 0.3  # type: ignore[misc]  # as a broker with a 0.3 s ack wait would say
        hub.source.in_progress = in_progress  # type: ignore[method-assign]
        hub.accounting = SlowAccounting(hub.accounting, seconds=0.4)
        assert await hub.step() == 2
    assert {"s1", "s2"} <= set(beats)


class OutageAccounting(Accounting):
    """A sink whose handler fails for one invoice (its own error) and meets a database failure at another."""

    def __init__(self, inner: Accounting, *, poison: str, outage: str) -> None:
        self.inner = inner
        self.poison = poison
        self.outage = outage

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Fail for the poison invoice, raise StoreError at the outage invoice, create the others."""
        numbers = {i.number for i in invoices}
        if self.poison in numbers:
            raise RuntimeError(f"accounting refused {self.poison}")
        if self.outage in numbers:
            raise StoreError("the database went away")
        return await self.inner.create(tx, message, invoices)


async def test_a_store_error_during_isolation_makes_the_whole_step_transient(
    hub_config: HubConfig, spool: Path
) -> None:
    """A StoreError while the batch is settled message by message is an outage: the step raises it, every delivery
    goes back, nothing more is charged; once the database is back everything settles and nothing doubles."""
    config = hub_config.with_overrides(batch_size=5, max_attempts=3, idle_timeout=2.0)
    await publish(config.source, [(f"o{i}", good(800 + i)) for i in range(5)])
    async with open_hub(config) as hub:
        sink = hub.accounting
        hub.accounting = OutageAccounting(sink, poison="G-800", outage="G-802")
        with pytest.raises(StoreError, match="went away"):
            await hub.step()
        assert files(spool, "processing") == []  # all five handed back
        rows = {r["key"].rsplit("/", 1)[1]: r for r in await list_rows(config, status=None, limit=20)}
        assert rows["000000800"]["attempts"] == 1  # the handler's own failure: one attempt
        assert rows["000000801"]["status"] == "processed"  # settled alone before the outage
        assert not {"000000802", "000000803", "000000804"} & rows.keys()  # the outage and after: charged nothing
        hub.accounting = sink  # the database is back, the accounting rule fixed
        await hub.run(once=True)
    counts = await stats(config)
    assert (counts["invoices"], counts["dead"]) == (5, 0)
    assert files(spool, "inbound") == files(spool, "processing") == []


@pytest.mark.parametrize("hub_config", ["postgresql"], indirect=True)  # SQLite keeps money as text: any total fits
async def test_the_sql_sink_lets_a_database_data_error_park_its_message(hub_config: HubConfig) -> None:
    """Past the plan's checks, a total PostgreSQL's NUMERIC(20, 4) cannot hold raises from the SQL sink's own INSERT
    as a DataError: the inbox parks that message dead at once, with the database's reason, and no attempt is left."""
    from edinbox.edi import parse
    from edinbox.hub import SqlAccounting

    [interchange] = parse(huge_total())
    invoices = interchange.invoices()
    sink = SqlAccounting(consumer=hub_config.consumer)

    async def handler(tx: Any, message: Message) -> None:
        await sink.create(tx, message, invoices)

    async with open_inbox(hub_config) as inbox:
        outcome = await inbox.process(interchange.message(), handler)
    assert outcome.value == "dead"
    [row] = await list_rows(hub_config, status="dead", limit=5)
    assert "out of range" in row["error"] or "overflow" in row["error"]
    counts = await stats(hub_config)
    assert counts["invoices"] == 0
