"""The plan phase and its settings: max_payload, per-interchange parking, where a big payload is kept, progress."""

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

from edinbox import ConfigurationError, SourceError
from edinbox.hub import HubConfig, load_config
from edinbox.hub.config import Route
from edinbox.hub.config._model import MAX_PAYLOAD, parse_size
from edinbox.hub.deliveries._items import HEAD, Item, plan
from edinbox.loop import progress
from edinbox.sources import Delivery, Source

from .poison import bad_date, good, huge_total, long_control_number


def delivery(payload: bytes, **kwargs: object) -> Delivery:
    """A delivery as a broker would hand it over."""
    return Delivery(payload, message_id="m1", coordinates="q#1", source="amqp:q", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "size"),
    [("65536", 65536), ("100KB", 100_000), ("100kb", 100_000), ("32MiB", 32 * 1024**2), ("1.5 GB", 1_500_000_000)],
)
def test_sizes_are_read_in_bytes_or_with_a_unit(text: str, size: int) -> None:
    """Plain bytes and KB/MB/GB (powers of 1000) or KiB/MiB/GiB (powers of 1024) are accepted."""
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "big", "32 MiBs", "-1", "MiB", "1e6"])
def test_a_bad_size_is_a_configuration_error_with_examples(text: str) -> None:
    """Anything else is refused with a sentence that names the setting and shows examples."""
    with pytest.raises(ConfigurationError, match=r"max_payload .* is not a size \(examples"):
        parse_size(text)


def test_max_payload_from_toml_and_overrides(tmp_path: Path) -> None:
    """`max_payload` is read from the TOML file (a size text or a number) and overridden like any setting."""
    path = tmp_path / "hub.toml"
    path.write_text('[hub]\nmax_payload = "100KB"\n')
    assert load_config(path).max_payload == 100_000
    path.write_text("[hub]\nmax_payload = 4096\n")
    assert load_config(path).max_payload == 4096
    assert load_config(path).with_overrides(max_payload="2MiB").max_payload == 2 * 1024**2
    assert HubConfig().max_payload == MAX_PAYLOAD == 32 * 1024**2
    with pytest.raises(ConfigurationError, match="at least 1 byte"):
        HubConfig(max_payload=0)


def test_run_refuses_a_bad_max_payload_from_flag_or_environment(tmp_path: Path) -> None:
    """`--max-payload` and EDINBOX_MAX_PAYLOAD reach the configuration; a bad value is one clear line, no traceback."""
    args = [sys.executable, "-m", "edinbox.cli", "run", "--db", f"sqlite:///{tmp_path}/x.db", "--source", "dir:///x"]
    by_flag = subprocess.run([*args, "--max-payload", "12XB"], capture_output=True, text=True, check=False)
    env = {**os.environ, "EDINBOX_MAX_PAYLOAD": "lots"}
    by_env = subprocess.run(args, capture_output=True, text=True, check=False, env=env)
    for done, where, value in ((by_flag, "--max-payload", "12XB"), (by_env, "EDINBOX_MAX_PAYLOAD", "lots")):
        assert done.returncode == 1
        assert f"{where}: expected a size (65536, 100KB, 32MiB, 1GiB), got '{value}'" in done.stderr
        assert "Traceback" not in done.stderr


def test_one_bad_interchange_does_not_take_its_siblings_down() -> None:
    """In one payload, a bad date, a huge total and a 10,000-character key are each parked; the good ones go on,
    with their invoices read once and carried to the handler."""
    config = HubConfig()
    payload = good(1) + bad_date() + good(2) + huge_total() + long_control_number() + good(3)
    items = plan(delivery(payload), config)
    assert [item.route for item in items] == ["inbox", Route.REJECT, "inbox", Route.REJECT, Route.REJECT, "inbox"]
    assert [len(item.invoices) for item in items if item.route == "inbox"] == [1, 1, 1]
    assert "not a date" in items[1].reason
    assert "digits before the decimal point" in items[3].reason
    assert "over the limit of 512" in items[4].reason
    assert b"20261399" in items[1].payload
    assert b"G-2" not in items[1].payload  # each parked interchange keeps its own bytes, not its siblings'


def test_a_payload_over_max_payload_is_not_parsed() -> None:
    """A payload over max_payload is parked as one item with its size; its valid interchanges are not planned."""
    payload = good(1) * 200
    [item] = plan(delivery(payload), HubConfig(max_payload=len(payload) - 1), kept="the dead letters q.dead")
    assert item.route == Route.REJECT
    assert f"has {len(payload)} bytes, more than max_payload" in item.reason
    assert "the whole payload is in the dead letters q.dead" in item.reason
    assert len(item.payload) == HEAD


def test_a_payload_the_source_refused_is_parked_with_the_source_reason() -> None:
    """A delivery the source refused (`reason`, its full `size`) is parked with that reason and never parsed."""
    refused = delivery(good(1), reason="a symlink", size=10 * HEAD)
    [item] = plan(refused, HubConfig(), kept="the spool's rejected folder")
    assert item.route == Route.REJECT
    assert item.reason.startswith("a symlink")
    assert f"of its {10 * HEAD} bytes" in item.reason


class _Slow(Source):
    """A source that records `in_progress` calls; only what `progress` uses is implemented."""

    url = "test://slow"

    def __init__(self, ack_wait: float | None) -> None:
        self.ack_wait = ack_wait
        self.beats: list[str] = []

    async def in_progress(self, delivery: Delivery) -> None:
        """Record the beat."""
        self.beats.append(delivery.coordinates)

    async def open(self) -> None:
        """Nothing to open."""

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Nothing to receive."""
        return []

    async def ack(self, delivery: Delivery) -> None:
        """Nothing to ack."""

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Nothing to nack."""

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Nothing to reject."""

    async def aclose(self) -> None:
        """Nothing to close."""


async def test_a_slow_batch_tells_the_source_it_is_in_progress() -> None:
    """A batch held longer than a third of ack_wait beats `in_progress` for each delivery; a quick one does not."""
    source = _Slow(ack_wait=0.3)
    held = [delivery(b"a"), Delivery(b"b", message_id=None, coordinates="q#2", source="amqp:q")]
    async with progress(source, lambda: held):
        await asyncio.sleep(0.05)
    assert source.beats == []
    async with progress(source, lambda: held):
        await asyncio.sleep(0.45)
    assert source.beats[:2] == ["q#1", "q#2"]
    count = len(source.beats)
    await asyncio.sleep(0.25)
    assert len(source.beats) == count  # stopped with the batch


async def test_a_source_without_ack_wait_gets_no_beats() -> None:
    """A source whose deliveries never expire (ack_wait None) is never called."""
    source = _Slow(ack_wait=None)
    async with progress(source, lambda: [delivery(b"a")]):
        await asyncio.sleep(0.1)
    assert source.beats == []


class _CancelledIntoError(_Slow):
    """An in-memory source whose `in_progress` waits for its reply and turns a cancel into SourceError (a transient
    error), as a driver may; pure-asyncio logic of the beat, so no broker stands behind it."""

    async def in_progress(self, delivery: Delivery) -> None:
        """Record the beat, then wait; a cancel becomes SourceError."""
        self.beats.append(delivery.coordinates)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            raise SourceError("in_progress failed: the connection was cancelled") from None


async def test_beats_end_when_the_block_ends_even_if_the_source_turns_the_cancel_into_an_error() -> None:
    """The block ends while a beat's `in_progress` is mid-flight on a source that turns the cancel into a transient
    error: the beats end with it instead of going on (the block's exit waited for them forever)."""
    source = _CancelledIntoError(ack_wait=0.15)
    block = progress(source, lambda: [delivery(b"a")])
    await block.__aenter__()
    await asyncio.sleep(0.1)  # the first beat (after 0.05 s) is waiting in in_progress
    assert source.beats == ["q#1"]
    ending = asyncio.ensure_future(block.__aexit__(None, None, None))
    done, _ = await asyncio.wait({ending}, timeout=2)
    assert done == {ending}


async def test_a_beat_on_a_claim_taken_back_meanwhile_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A spool claim moved back to inbound/ while held (another hub's recovery) fails its beats: each beat says so in
    one line, naming the file and counting the failures, and the beats go on for the others."""
    from edinbox.sources.spool import SpoolSource, publish

    await publish(f"dir://{tmp_path}", [("gone", good(1)), ("kept", good(2))])
    async with SpoolSource(tmp_path, consumer="c", claim_timeout=0.3) as source:
        held = list(await source.receive(max_messages=2, timeout=1))
        [claim] = [p for p in (tmp_path / "processing").rglob("*") if "gone" in p.name]
        claim.rename(tmp_path / "inbound" / claim.name)
        with caplog.at_level(logging.WARNING, logger="edinbox.hub"):
            async with progress(source, lambda: held):
                await asyncio.sleep(0.15)
    [line, *_] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("progress-failed")]
    assert "failed=1" in line
    assert "held=2" in line
    assert "gone.edi" in line


def test_the_spool_gets_the_hub_max_payload_unless_its_url_sets_one() -> None:
    """Where a source is opened, the spool takes the hub's max_payload (it parks big files unread); a URL's own
    max_payload wins; a broker ignores it (the hub checks what it delivers)."""
    from edinbox.sources import open_source
    from edinbox.sources.spool import SpoolSource

    def spool(url: str, **options: Any) -> SpoolSource:
        source = open_source(url, consumer="c", **options)
        assert isinstance(source, SpoolSource)
        return source

    assert spool("dir:///srv/edi", max_payload=1024**2).max_payload == 1024**2
    assert spool("dir:///srv/edi?max_payload=5000", max_payload=1024**2).max_payload == 5000
    assert spool("dir:///srv/edi").max_payload == MAX_PAYLOAD
    broker = open_source("amqp://guest:guest@127.0.0.1/?queue=q", consumer="c", max_payload=10)  # no unknown option
    assert not hasattr(broker, "max_payload")


def test_line_values_over_sixteen_digits_are_refused_before_any_sql() -> None:
    """A line quantity, unit price or amount with more than 16 digits before the point is a problem; decimals are
    not (a unit price of 0.00012345 is fine)."""
    from datetime import date
    from decimal import Decimal

    from edinbox.edi import Invoice, InvoiceLine, InvoiceParty
    from edinbox.hub.sinks._invoice_checks import invoice_problem

    def invoice(quantity: str, price: str = "1.00") -> Invoice:
        line = InvoiceLine(Decimal(quantity), Decimal(price), Decimal(quantity) * Decimal(price))
        party = InvoiceParty("ACME")
        return Invoice("INV-1", date(2026, 12, 1), "invoice", party, party, "EUR", Decimal(1), Decimal(0), [line])

    assert invoice_problem([invoice("9999999999999999", "0.00012345")]) is None
    assert "line 1 quantity" in (invoice_problem([invoice("1" + "0" * 16)]) or "")
    assert "line 1 unit price" in (invoice_problem([invoice("1", "1e20")]) or "")


@pytest.mark.parametrize("hub_config", ["sqlite"], indirect=True)
async def test_a_small_batch_is_planned_on_the_loop_and_a_big_one_in_a_worker_thread(
    hub_config: HubConfig, spool: Path
) -> None:
    """A batch whose payloads add up to at most `_PLAN_HERE` bytes is planned on the event loop's thread (no trip to
    a worker thread and back); a bigger one in a worker thread, so the loop keeps serving the source meanwhile."""
    import threading

    from edinbox.hub import open_hub
    from edinbox.hub.deliveries._hub import _PLAN_HERE
    from edinbox.sources.spool import publish

    small = [(f"p{i}", good(600 + i)) for i in range(3)]
    padding = b" " * (_PLAN_HERE // 2)  # a payload may end in white space after its last segment
    big = [(f"q{i}", good(700 + i) + padding) for i in range(3)]
    planned: list[bool] = []
    async with open_hub(hub_config.with_overrides(batch_size=3)) as hub:
        inner = hub._plan

        def watched(d: Delivery) -> list[Item]:
            planned.append(threading.get_ident() == threading.main_thread().ident)
            return inner(d)

        hub._plan = watched  # type: ignore[method-assign, assignment]
        await publish(hub_config.source, small)
        assert await hub.step() == 3
        await publish(hub_config.source, big)
        assert await hub.step() == 3
        assert dict(hub.totals) == {"processed": 6}
    assert planned == [True] * 3 + [False] * 3
