"""The bad deliveries `edinbox chaos` mixes into good traffic, how they are published, and how their parking is counted.

Poison is a delivery that cannot be journaled as an invoice, in turns: bytes that are not EDI, an interchange cut
before its end, and an interchange whose total has more digits than the invoices table holds. A huge delivery of
17 to 20 MiB (under the hub's max_payload) is, in turns, a non-EDI blob (parked as a whole delivery: the table keeps
its first `HEAD` bytes) and a good invoice followed by an interchange cut short inside a giant segment (the invoice
is created, the bad interchange parked whole, unless the database refuses a value that big: MariaDB's
max_allowed_packet, 16 MiB by default; then the table keeps its first `HEAD` bytes). Every one has content of its
own (the rejected table keeps a payload once per content), drawn from the run's seed: same seed, same bytes.

The hub parks each in its rejected table, once per content: the row's fingerprint is the SHA-256 of the bytes it
kept, the parked bytes whole or their first `HEAD` bytes. A bad delivery with no row was not parked; one with two
rows (one whole, one cut) was parked twice.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from decimal import Decimal

from edinbox._errors import LimitError
from edinbox.hub.deliveries import HEAD
from edinbox.hub.demo import PARTNERS, Doc, render
from edinbox.sources import publisher

__all__ = ["Bad", "Published", "huge", "mix", "parked", "poison", "publish_mixed"]

MIB = 1024 * 1024
_HUGE_SIZES = (17 * MIB, 20 * MIB)
"""Huge deliveries: bigger than MariaDB's default max_allowed_packet (16 MiB), under the hub's max_payload."""
_TOO_MANY_DIGITS = Decimal(10) ** 21
"""A line price whose invoice total has more digits before the point than the invoices table's NUMERIC(20, 4)."""


@dataclass(frozen=True, slots=True)
class Bad:
    """A delivery the hub must park: its producer id, its bytes, and what is wrong with it."""

    key: str
    payload: bytes
    kind: str
    parked: bytes = b""
    """The bytes the hub parks when they are not the whole payload (the bad interchange after a good one)."""
    invoice: tuple[str, str, str, str] | None = None
    """The key of the good invoice the delivery holds beside its bad part, which the hub must create."""

    @property
    def fingerprints(self) -> frozenset[str]:
        """The fingerprints its rejected row may have: of the parked bytes whole, or of their first `HEAD` bytes."""
        kept = self.parked or self.payload
        return frozenset(hashlib.sha256(p).hexdigest() for p in (kept, kept[:HEAD]))


def _not_edi(n: int, rng: random.Random) -> bytes:
    """A few KiB of binary bytes, the start of a PDF: no interchange in them."""
    return b"%PDF-1.7\n" + rng.randbytes(rng.randint(1024, 8192))


def _doc(n: int, rng: random.Random, *, price: Decimal, name: str = "POISON") -> Doc:
    """An invoice of a partner drawn by `rng`, numbered for bad delivery `n` (never a good one's number)."""
    partner = rng.choice(PARTNERS)
    control = f"{900_000_000 + n:09d}" if partner.standard == "X12" else f"{name}{n}"
    lines = ((rng.randint(1, 9), price),)
    return Doc(partner, control, "invoice", f"{name}-{rng.randrange(10**9)}-{n}", lines=lines)


def _interchange(n: int, rng: random.Random, *, price: Decimal) -> bytes:
    """An invoice interchange of a partner drawn by `rng`, its invoice numbered for poison `n`."""
    return render(_doc(n, rng, price=price))


def _truncated(n: int, rng: random.Random) -> bytes:
    """An invoice interchange cut somewhere between its header and its trailer."""
    whole = _interchange(n, rng, price=Decimal("12.50"))
    return whole[: rng.randint(len(whole) // 3, len(whole) - 12)]


def _too_large_a_total(n: int, rng: random.Random) -> bytes:
    """A whole invoice interchange whose total the invoices table cannot hold."""
    return _interchange(n, rng, price=_TOO_MANY_DIGITS + rng.randint(1, 99))


_POISON: dict[str, Callable[[int, random.Random], bytes]] = {
    "not-edi": _not_edi,
    "truncated": _truncated,
    "total-too-large": _too_large_a_total,
}


def poison(count: int, *, rng: random.Random) -> list[Bad]:
    """`count` poison deliveries, the kinds in turn."""
    kinds = list(_POISON)
    out = []
    for n in range(count):
        kind = kinds[n % len(kinds)]
        out.append(Bad(f"chaos-poison-{n:04d}-{kind}", _POISON[kind](n, rng), kind))
    return out


def _pair(n: int, rng: random.Random, *, size: int) -> Bad:
    """A good invoice, then an invoice interchange cut short inside a segment of `size` bytes."""
    good = _doc(2 * n, rng, price=Decimal("7.25"), name="HUGE")
    cut = render(_doc(2 * n + 1, rng, price=Decimal("7.25"), name="HUGE"), trailer=False)
    bad = cut + b"X" * (size - len(cut))  # no separator in it: one segment that never ends
    invoice = (good.partner.id, good.number, good.kind, good.issue_date.isoformat())
    return Bad(f"chaos-huge-{n:04d}-pair", render(good) + bad, "huge-pair", parked=bad, invoice=invoice)


def huge(count: int, *, rng: random.Random, max_payload: int) -> list[Bad]:
    """`count` deliveries of 17 to 20 MiB, each under `max_payload`: non-EDI blobs and good-and-bad pairs in turn."""
    low, high = _HUGE_SIZES[0], min(_HUGE_SIZES[1], max_payload - 1)
    out = []
    for n in range(count):
        size = rng.randint(min(low, high), high) - 4096  # room for the good invoice of a pair
        if n % 2:
            out.append(_pair(n, rng, size=size))
        else:
            out.append(Bad(f"chaos-huge-{n:04d}-blob", b"HUGE" + rng.randbytes(size - 4), "huge-blob"))
    return out


def mix(good: Sequence[tuple[str, bytes]], bad: Sequence[Bad], *, rng: random.Random) -> list[tuple[str, bytes]]:
    """The good messages with the bad ones inserted at positions drawn by `rng`."""
    out = list(good)
    for item in bad:
        out.insert(rng.randint(0, len(out)), (item.key, item.payload))
    return out


@dataclass(frozen=True, slots=True)
class Published:
    """What a mixed publish sent, and which deliveries the broker refused (with its reason)."""

    refused: dict[str, str]


async def publish_mixed(source: str, messages: Sequence[tuple[str, bytes]], *, alone: Collection[str]) -> Published:
    """Publish in order with the source's own publisher; a message whose key is in `alone` goes by itself, and a
    refusal of it by the broker as too big (LimitError) is noted, not raised: it never reached a hub."""
    send = publisher(source)
    refused: dict[str, str] = {}
    run: list[tuple[str, bytes]] = []
    for message in messages:
        if message[0] not in alone:
            run.append(message)
            continue
        if run:
            await send(source, run)
            run = []
        try:
            await send(source, [message])
        except LimitError as exc:
            refused[message[0]] = str(exc)
    if run:
        await send(source, run)
    return Published(refused)


def parked(bad: Sequence[Bad], fingerprints: Collection[str]) -> tuple[int, int]:
    """(how many of `bad` have a row in the rejected table, how many rows beyond one per bad delivery)."""
    found = twice = 0
    for item in bad:
        rows = len(item.fingerprints & set(fingerprints))
        found += rows > 0
        twice += max(0, rows - 1)
    return found, twice
