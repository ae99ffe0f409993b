"""Partners hear of what the hub parks and of what they re-sent: a rejection per parked interchange whose header
says whom to answer (once per key, in the transaction that parks it), nothing for garbage, a duplicate notice per
re-send (never for the broker's redelivery of one delivery), and acknowledgments in lease mode too."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from edinbox import StoreError, edi
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.demo._traffic import Doc, render
from edinbox.hub.partners._acks import Acknowledger, Pending
from edinbox.sources import Delivery, Source
from edinbox.sources.spool import publish
from hub_ops import show, stats

from .test_acknowledgments import EDIFACT, X12, agreed, received, settle, x12_source
from .test_hub import LedgerApi, doc


def segments(replies: Sequence[edi.Interchange], tag: str) -> list[tuple[str, ...]]:
    """The `tag` segments of `replies`, each as its elements' first components."""
    return [tuple(e[0] if e else "" for e in s.elements) for r in replies for s in r.segments if s.tag == tag]


def bad_date(d: Doc) -> bytes:
    """`d` rendered with an impossible BIG01 date: its invoice cannot be read."""
    data = render(d)
    at = data.index(b"BIG*") + 4
    return data[:at] + b"20261399" + data[at + 8 :]


async def test_parked_interchanges_get_their_rejection_once(hub_config: HubConfig, tmp_path: Path) -> None:
    """An unreadable invoice (TA1 A, 997 AK3/AK4 of its bad BIG01, AK5 R 5 / AK9 R), an invoice number the table
    cannot hold (997 AK5 R 5), an interchange without its IEA (TA1 R 023, 997 AK5 R / AK9 R) and an EDIFACT invoice
    without DTM+137 (CONTRL UCI 4, UCM 4 12) are each rejected once, even when re-sent; garbage gets nothing; every
    rejection is keyable, has its own control number (a TA1 and its 997 share one interchange), and `show` lists it
    under the parked key."""
    out = tmp_path / "out"
    config = agreed(hub_config, out)
    unreadable = bad_date(replace(doc(control="000000701", number="R-1"), ack_requested=True))
    too_long = render(doc(control="000000702", number="N" * 600))
    truncated = render(replace(doc(control="000000703", number="R-3"), ack_requested=True), trailer=False)
    no_dtm = render(replace(doc(partner=EDIFACT, control="IC704", number="R-4"), ack_requested=True))
    no_dtm = no_dtm.replace(b"DTM+137:", b"DTM+9:", 1)
    junk = b"%PDF-1.4 not an interchange"
    files = [("a", unreadable), ("b", too_long), ("c", truncated), ("d", no_dtm), ("e", junk)]
    await publish(config.source, files)
    totals = await settle(config)
    assert totals["rejected"] == 5
    await publish(config.source, files[:4])  # the partner re-sends the same bad interchanges
    totals = await settle(config)
    assert totals["rejected"] == 4
    replies = await received(out / X12.id)
    assert all(r.keyable and r.problems == () for r in replies)
    assert len({r.control_number for r in replies}) == len(replies) == 3  # a TA1 travels with its 997
    assert sorted(segments(replies, "TA1")) == [
        ("000000701", "261202", "0930", "A", "000"),
        ("000000703", "261202", "0930", "R", "023"),
    ]
    assert sorted(segments(replies, "AK1")) == [("IN", "701"), ("IN", "702"), ("IN", "703")]
    assert sorted(segments(replies, "AK5")) == [("R",), ("R", "5"), ("R", "5")]  # no IEA: its set R, no code of its own
    assert segments(replies, "AK3") == [("BIG", "2", "", "8")]  # the unreadable date says where it is
    assert segments(replies, "AK4") == [("1", "373", "8", "20261399")]
    assert segments(replies, "AK9") == [("R", "1", "1", "0")] * 3
    contrl = await received(out / EDIFACT.id)
    assert [r.message_types for r in contrl] == [("CONTRL",)]
    assert segments(contrl, "UCI") == [("IC704", EDIFACT.id, "EDINBOXHUB", "4")]
    assert segments(contrl, "UCM")[0][2:] == ("4", "12")
    counts = await stats(config)
    assert counts["acknowledgments"]["rejections"] == 4
    assert counts["rejected_payloads"] == 5
    shown = await show(config, f"{x12_source(doc())}/000000701")
    assert shown is not None
    assert (shown["status"], shown["message_id"]) == ("parked", "000000701")
    assert sorted((a["kind"], a["answer"]) for a in shown["acknowledgments"]) == [("TA1+997", "rejection")]


async def test_a_rejection_needs_an_outbound_destination(hub_config: HubConfig, tmp_path: Path) -> None:
    """Without an agreement that sends anywhere, a parked interchange is parked and nothing is answered."""
    await publish(hub_config.source, [("a", bad_date(doc(control="000000711")))])
    assert await settle(hub_config) == {"rejected": 1}
    assert (await stats(hub_config))["acknowledgments"]["rejections"] == 0


async def test_lease_mode_acknowledges_in_the_completing_transaction(hub_config: HubConfig, tmp_path: Path) -> None:
    """With a sink outside the database (lease mode), each new interchange gets its TA1 and 997 once, a re-send its
    notice, and a parked one its rejection, as in the normal mode."""
    out = tmp_path / "out"
    config = agreed(hub_config, out)
    asked = replace(doc(control="000000801", number="L-1"), ack_requested=True)
    payloads = [("a", render(asked)), ("b", render(doc(control="000000802", number="L-2")))]
    await publish(config.source, [*payloads, ("c", bad_date(doc(control="000000803")))])
    api = LedgerApi()
    async with open_hub(config, accounting=api) as hub:
        await hub.run(once=True)
    await publish(config.source, payloads[:1])
    async with open_hub(config, accounting=api) as hub:
        await hub.run(once=True)
    replies = await received(out / X12.id)
    assert sorted(r.message_types for r in replies) == [("997",), ("997",), ("TA1",), ("TA1", "997")]
    assert sorted(segments(replies, "TA1")) == [
        ("000000801", "261202", "0930", "A", "000"),
        ("000000801", "261202", "0930", "R", "025"),
    ]
    assert sorted(segments(replies, "AK9")) == [("A", "1", "1", "1"), ("A", "1", "1", "1"), ("R", "1", "1", "0")]
    acks = (await stats(config))["acknowledgments"]
    assert (acks["997"], acks["TA1"], acks["duplicate_notices"], acks["rejections"]) == (3, 1, 1, 1)


class LostAck(Source):
    """A source whose first ack (or reject) of each delivery whose payload holds `marker` is lost: the delivery goes
    back unsettled (as after a crash between the commit and the ack) and the broker delivers it again."""

    def __init__(self, inner: Source, marker: bytes) -> None:
        self.inner = inner
        self.marker = marker
        self.url = inner.url
        self.lost: list[str] = []

    async def open(self) -> None:
        """Nothing: the inner source is open."""

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """The inner source's deliveries."""
        return await self.inner.receive(max_messages=max_messages, timeout=timeout)

    async def ack(self, delivery: Delivery) -> None:
        """Lose the first ack of a marked delivery (nack it instead), ack the others."""
        if not await self._lost(delivery):
            await self.inner.ack(delivery)

    async def _lost(self, delivery: Delivery) -> bool:
        """Nack a marked delivery on its first settlement instead of settling it; True when it did."""
        if self.marker in delivery.payload and delivery.delivery_count == 1:
            self.lost.append(delivery.coordinates)
            await self.inner.nack(delivery)
            return True
        return False

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """The inner source's nack."""
        await self.inner.nack(delivery, delay=delay)

    async def reject(self, delivery: Delivery, *, reason: str) -> None:
        """Lose the first reject of a marked delivery (nack it instead), reject the others."""
        if not await self._lost(delivery):
            await self.inner.reject(delivery, reason=reason)

    async def aclose(self) -> None:
        """Nothing: the inner source is closed by the hub's exit."""


class FailingOnce(Acknowledger):
    """An acknowledger whose first write of a duplicate notice fails like a database outage (nothing commits)."""

    failed = 0

    async def write(self, tx: Any, pending: Sequence[Pending]) -> int:
        """Fail once when a notice is among `pending`."""
        if any(p.duplicate for p in pending) and not self.failed:
            self.failed += 1
            raise StoreError("the database went away before the commit")
        return await super().write(tx, pending)


Publish = Callable[[str, list[tuple[str, bytes]]], Awaitable[None]]


async def resend(
    config: HubConfig, payload: bytes, *, publish: Publish, lose_ack: bool = False, fail_once: bool = False
) -> int:
    """Publish `payload` again (a partner's re-send) and settle it; with `lose_ack` its first ack is lost (the
    broker redelivers it after the commit), with `fail_once` its first transaction fails (nothing commits, the
    broker redelivers it). Returns how many deliveries were settled as duplicates."""
    await publish(config.source, [("again", payload)])
    async with open_hub(config) as hub:
        if lose_ack:
            hub.source = LostAck(hub.source, b"")
        if fail_once:
            hub.acknowledger = FailingOnce(config)
        totals = await hub.run(once=True)
        if lose_ack:
            assert len(hub.source.lost) == 1  # type: ignore[attr-defined]
        if fail_once:
            assert hub.acknowledger.failed == 1  # type: ignore[union-attr]
    return sum(v for k, v in totals.items() if k in ("duplicate", "conflict"))


async def one_notice_per_resend(config: HubConfig, out: Path, *, publish: Publish, resend_with: Publish) -> None:
    """The scenario of `test_a_resend_gets_one_notice_however_often_the_broker_delivers_it` on `config`'s source:
    the original through `publish`, the re-sends through `resend_with`."""
    payload = render(doc(control="000000901", number="D-1"))
    await publish(config.source, [("original", payload)])
    async with open_hub(config) as hub:
        hub.source = LostAck(hub.source, b"")  # the original is delivered twice: processed, then a duplicate
        assert dict(await hub.run(once=True)) == {"processed": 1, "duplicate": 1, "relayed": 1}
    assert await resend(config, payload, publish=resend_with, lose_ack=True) == 2
    assert len(segments(await received(out / X12.id), "TA1")) == 1  # the original's 997, and one notice
    assert await resend(config, payload, publish=resend_with, fail_once=True) == 1
    assert await resend(config, payload, publish=resend_with) == 1
    notices = segments(await received(out / X12.id), "TA1")
    assert notices == [("000000901", "261202", "0930", "R", "025")] * 2
    assert (await stats(config))["acknowledgments"]["duplicate_notices"] == 3


async def test_a_resend_gets_one_notice_however_often_the_broker_delivers_it(
    hub_config: HubConfig, tmp_path: Path
) -> None:
    """On the spool: a re-send delivered twice (its ack lost after the commit) gets one notice; one whose first
    transaction failed gets its notice from the redelivery; a third re-send gets a third: one per re-send, and
    the original's own redelivery never gets one."""
    out = tmp_path / "out"
    config = agreed(hub_config.with_overrides(idle_timeout=1.5), out)
    await one_notice_per_resend(config, out, publish=publish, resend_with=publish)


async def test_purge_forgets_old_answers(hub_config: HubConfig, tmp_path: Path) -> None:
    """`purge` deletes the answers given longer ago than its age with the parked payloads: a re-send of a rejected
    interchange after that is rejected again (the broker cannot redeliver past the horizon)."""
    from hub_ops import purge

    out = tmp_path / "out"
    config = agreed(hub_config.with_overrides(horizon="0s"), out)
    payload = bad_date(doc(control="000000721"))
    await publish(config.source, [("a", payload)])
    await settle(config)
    purged = await purge(config, older_than=timedelta(0), batch_size=100)
    assert purged.rejected == 1
    await publish(config.source, [("a", payload)])
    await settle(config)
    assert (await stats(config))["acknowledgments"]["rejections"] == 1  # the one left: the second
    assert len(await received(out / X12.id)) == 2
