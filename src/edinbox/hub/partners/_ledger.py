"""The inbound control-number ledger: every control number a partner sent, per level, and what is wrong with them.

Levels: X12 ISA13, GS06, ST02; EDIFACT UNB0020, UNG0048, UNH0062. The batch that settles an interchange records its
numbers in its own transaction (`Batch.record`): one upsert per (partner, level, number), keyed by its unique key, so
hubs on one partner never read a row to write it; all of a batch's numbers in one statement on PostgreSQL, one batch
of statements elsewhere. What is wrong is read from the rows (`report`), never stored:

- a gap: numbers missing between two numbers accepted (it closes when the number arrives); a number only a parked
  interchange carried (its header readable) is still missing, and the gap names that parked payload (`rejected/N`);
- a duplicate: a number accepted again within the window (BizTalk's "duplicate ISA13 within N days") of its
  previous copy;
- out of order: a number that first came after a higher one (a gap's late number is one too).

A number is digits compared as a number of any length: leading zeros dropped, then ordered by length and text (no
`int()`). One that is not digits (an EDIFACT reference may be alphanumeric) is tracked for duplicates only. A number
or partner longer than `LONGEST` characters, or with a character that is not printable (a NUL), is not recorded.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from edinbox import AsyncTransaction, edi
from edinbox._async_inbox import AsyncInbox
from edinbox._core import human_duration
from edinbox._errors import TransientError
from edinbox.hub.config import LEVELS, HubConfig
from edinbox.hub.database import verify_found
from edinbox.stores import run_rows

if TYPE_CHECKING:
    from edinbox.metrics import Metrics

__all__ = [
    "LEVELS",
    "LONGEST",
    "Arrival",
    "Gauges",
    "Ledger",
    "controls",
    "findings",
    "normalise",
    "read",
    "record",
    "report",
]

LONGEST = 128
"""The longest control number (leading zeros dropped) and partner the ledger records (X12 allows 9 digits, EDIFACT
14 characters)."""


@dataclass(frozen=True, slots=True)
class Arrival:
    """A control number as the batch met it: the partner (`qualifier:id`), the level, the number as sent."""

    partner: str
    level: str
    number: str


def controls(interchange: edi.Interchange, kept: Collection[str] | None = None) -> tuple[tuple[str, str], ...]:
    """The (level, number) pairs an interchange carries: its own, each group's, each message's, in order; only those
    of the levels `kept` (the partner's agreement's `levels`) when given."""
    levels = LEVELS.get(interchange.standard)
    if levels is None:
        return ()
    wanted = [kept is None or level in kept for level in levels]
    found = [(levels[0], interchange.control_number)] if wanted[0] else []
    found += [(levels[1], group.control_number) for group in interchange.groups] if wanted[1] else []
    found += [(levels[2], message.control_number) for message in interchange.messages] if wanted[2] else []
    return tuple(found)


def normalise(number: str) -> tuple[str, int] | None:
    """The number as the ledger keys it and its width (0: not digits); None when it is empty, longer than `LONGEST`,
    or holds a character that is not printable (a NUL no database column takes: not recorded, never a batch's
    failure)."""
    text = number.strip()
    if text.isascii() and text.isdigit():
        text = text.lstrip("0") or "0"
        width = len(text)
    else:
        width = 0
    if not text or len(text) > LONGEST or not text.isprintable():
        return None
    return text, width


async def record(
    tx: AsyncTransaction, *, consumer: str, accepted: Sequence[Arrival], parked: Sequence[tuple[Arrival, str]]
) -> None:
    """Record a batch's accepted numbers (in the order they came) and the numbers of its parked interchanges (with
    the parked payload's fingerprint), in the caller's transaction, in one call (`edinbox.stores.run_rows`: one
    statement over arrays on PostgreSQL, one batch of statements elsewhere), each number once, in key order (every hub
    locks rows in one order)."""
    seq = time.time_ns()
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for n, (arrival, fingerprint) in enumerate([*((a, None) for a in accepted), *parked]):
        normal = normalise(arrival.number)
        if normal is None or not arrival.partner or len(arrival.partner) > LONGEST or not arrival.partner.isprintable():
            continue
        key = (arrival.partner, arrival.level, normal[0])
        row = rows.setdefault(
            key,
            {
                "partner": key[0],
                "level": key[1],
                "number": key[2],
                "width": normal[1],
                "seq": seq + n,
                "n": 0,
                "parked": None,
            },
        )
        if fingerprint is None:
            row["n"] += 1
        else:
            row["parked"] = fingerprint
    await run_rows(tx, "hub_ledger_record", [rows[key] for key in sorted(rows)], consumer=consumer, changed=seq)


@dataclass(slots=True)
class Ledger:
    """What the ledger says of one partner at one level."""

    partner: str
    level: str
    numbers: int = 0
    """Numbers accepted."""
    arrivals: int = 0
    """Copies accepted, duplicates included."""
    last_seen: datetime | None = None
    gaps: list[dict[str, Any]] = field(default_factory=list)
    """Missing ranges: `first`, `last`, `missing` (how many), `parked` (the parked payloads of numbers in it)."""
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    """Numbers accepted again within the window: `number`, `arrivals`, `previous_at`, `last_at`."""
    out_of_order: list[dict[str, Any]] = field(default_factory=list)
    """Numbers that first came after a higher one: `number`, `after` (the highest accepted before it)."""

    def as_dict(self) -> dict[str, Any]:
        """The ledger of this partner and level as plain values."""
        return {
            "partner": self.partner,
            "level": self.level,
            "numbers": self.numbers,
            "arrivals": self.arrivals,
            "last_seen": self.last_seen,
            "gaps": self.gaps,
            "duplicates": self.duplicates,
            "out_of_order": self.out_of_order,
        }


async def report(tx: AsyncTransaction, *, consumer: str, window: timedelta, partner: str | None = None) -> list[Ledger]:
    """The ledger of every partner and level of `consumer` (or of one `partner`), read in the caller's transaction:
    open gaps, duplicates within `window`, out-of-order arrivals."""
    rows = await tx.unit.fetch("hub_ledger_rows", {"consumer": consumer, "partner": partner, "since": 0})
    grouped: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for row in rows:
        grouped[(str(row[0]), str(row[1]))].append(row)
    return [_analyse(p, level, found, window) for (p, level), found in sorted(grouped.items())]


def _analyse(partner: str, level: str, rows: Iterable[Any], window: timedelta) -> Ledger:
    """One partner's level from its rows (ordered by first arrival)."""
    ledger = Ledger(partner, level)
    accepted: list[tuple[int, str]] = []
    parked: dict[tuple[int, str], int | None] = {}
    highest: tuple[int, str] | None = None
    for row in rows:
        number, width, arrivals, rejected = str(row[2]), int(row[3]), int(row[5]), row[9]
        key = (width, number)
        if not arrivals:
            if width:
                parked[key] = None if rejected is None else int(rejected)
            continue
        ledger.numbers += 1
        ledger.arrivals += arrivals
        last, previous = _when(row[8]), _when(row[7])
        if last is not None and (ledger.last_seen is None or last > ledger.last_seen):
            ledger.last_seen = last
        if arrivals > 1 and last is not None and previous is not None and last - previous <= window:
            ledger.duplicates.append({"number": number, "arrivals": arrivals, "previous_at": previous, "last_at": last})
        if not width:
            continue
        if highest is not None and key < highest:
            ledger.out_of_order.append({"number": number, "after": highest[1]})
        highest = key if highest is None or key > highest else highest
        accepted.append(key)
    accepted.sort()
    for low, high in itertools.pairwise(accepted):
        missing = int(high[1]) - int(low[1]) - 1  # at most LONGEST digits: far below int()'s limit
        if missing > 0:
            inside = [{"number": k[1], "rejected": v} for k, v in sorted(parked.items()) if low < k < high]
            gap = {"first": _next(low[1]), "last": _previous(high[1]), "missing": missing, "parked": inside}
            ledger.gaps.append(gap)
    return ledger


def _next(number: str) -> str:
    """The digits of `number` + 1."""
    digits = list(number)
    for i in range(len(digits) - 1, -1, -1):
        if digits[i] != "9":
            digits[i] = str(int(digits[i]) + 1)
            return "".join(digits)
        digits[i] = "0"
    return "1" + "".join(digits)


def _previous(number: str) -> str:
    """The digits of `number` - 1 (`number` above 0), leading zeros dropped."""
    digits = list(number)
    for i in range(len(digits) - 1, -1, -1):
        if digits[i] != "0":
            digits[i] = str(int(digits[i]) - 1)
            break
        digits[i] = "9"
    return "".join(digits).lstrip("0") or "0"


def _when(value: Any) -> datetime | None:
    """A ledger timestamp as an aware datetime: PostgreSQL's are aware, MariaDB's naive UTC, SQLite's ISO text."""
    if value is None:
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


async def read(inbox: AsyncInbox, *, window: timedelta, partner: str | None = None) -> list[Ledger]:
    """The ledger of the hub's journal `inbox` (of one `partner`), duplicates within `window` (the hub's
    `duplicate_window`); empty on a journal without the hub's tables."""
    if not await verify_found(inbox):
        return []
    return await inbox.read(lambda tx: report(tx, consumer=inbox.consumer, window=window, partner=partner))


def findings(ledgers: Iterable[Ledger]) -> list[dict[str, Any]]:
    """One row per finding (kind gap, duplicate or out-of-order), for a table: partner, level, kind, number, detail,
    and the ids of the parked payloads that carried a gap's numbers (`rejected`)."""
    rows: list[dict[str, Any]] = []
    for one in ledgers:
        head = {"partner": one.partner, "level": one.level}
        for gap in one.gaps:
            number = gap["first"] if gap["first"] == gap["last"] else f"{gap['first']}-{gap['last']}"
            rejected = [p["rejected"] for p in gap["parked"] if p["rejected"] is not None]
            parked = ", ".join(f"rejected/{n}" for n in rejected)
            detail = f"{gap['missing']} missing" + (f"; parked: {parked}" if parked else "")
            rows.append({**head, "kind": "gap", "number": number, "detail": detail, "rejected": rejected})
        for dup in one.duplicates:
            apart = human_duration(round((dup["last_at"] - dup["previous_at"]).total_seconds()))
            detail = f"{dup['arrivals']} copies, the last two {apart} apart"
            rows.append({**head, "kind": "duplicate", "number": dup["number"], "detail": detail, "rejected": []})
        for late in one.out_of_order:
            detail = f"after {late['after']}"
            rows.append({**head, "kind": "out-of-order", "number": late["number"], "detail": detail, "rejected": []})
    return rows


_SHARE = 20
"""The ledger's gauges wait at least this many times as long as their last reading took: reading a big ledger takes
at most 1/20 of the hub's time."""

_OVERLAP = 300.0
"""Seconds of rows each incremental reading reads again: a batch stamps its rows (`changed`, the hub's clock) before
it commits, and hubs' clocks differ; a row committed later than this after its stamp is seen at the next full one."""

_FULL = 3600.0
"""Seconds between the gauges' full readings of the ledger: they drop the numbers purged, and see any row an
incremental reading missed."""


class _Tally:
    """One partner's level as the gauges keep it: its accepted numbers in order, the gaps between them, and the
    numbers accepted again within the window (the same rules as `report`, updated one row at a time)."""

    __slots__ = ("accepted", "duplicates", "gaps")

    def __init__(self) -> None:
        self.accepted: list[int] = []
        self.gaps = 0
        self.duplicates: set[str] = set()

    def add(self, row: Sequence[Any], window: timedelta) -> None:
        """Take in one row of `hub_ledger_rows` (a number new, or one that changed since it was last taken in)."""
        number, width, arrivals = str(row[2]), int(row[3]), int(row[5])
        if not arrivals:  # only parked: still missing
            return
        last, previous = _when(row[8]), _when(row[7])
        if arrivals > 1 and last is not None and previous is not None and last - previous <= window:
            self.duplicates.add(number)
        else:
            self.duplicates.discard(number)
        if not width:
            return
        value = int(number)  # at most LONGEST digits: far below int()'s limit
        accepted = self.accepted
        k = bisect.bisect_left(accepted, value)
        if k < len(accepted) and accepted[k] == value:
            return
        lower = accepted[k - 1] if k else None
        upper = accepted[k] if k < len(accepted) else None
        if lower is not None and upper is not None and upper - lower > 1:
            self.gaps -= 1  # the number falls between them: that gap is split or closed
        self.gaps += (lower is not None and value - lower > 1) + (upper is not None and upper - value > 1)
        accepted.insert(k, value)


class Gauges:
    """The ledger's gauges of `metrics` (open gaps, duplicates per partner and level), read at most once per `every`
    seconds (or `_SHARE` times the last reading's time, when longer).

    The ledger is read whole once per `full_every` seconds (or `_SHARE` times that reading's time); in between, each
    reading fetches only the rows a hub wrote since the last one began, less `overlap` seconds (the `changed` column,
    indexed), and updates what the full reading found: the work of a reading follows the traffic, not the ledger's size.
    """

    def __init__(
        self,
        metrics: Metrics | None,
        inbox: AsyncInbox,
        config: HubConfig,
        *,
        every: float = 60.0,
        full_every: float = _FULL,
        overlap: float = _OVERLAP,
    ) -> None:
        """Read the ledger of `config`'s consumer in `inbox` into `metrics` (nothing when None), duplicates within
        its `duplicate_window`."""
        self.metrics = metrics
        self.inbox = inbox
        self.consumer = config.consumer
        self.window = config.duplicate_window
        self.every = every
        self.full_every = full_every
        self.overlap = overlap
        self.rows = 0
        """Rows the last reading fetched."""
        self._wait = every
        self._refreshed = float("-inf")
        self._full_wait = full_every
        self._full_at = float("-inf")
        self._since = 0
        self._tallies: dict[tuple[str, str], _Tally] = {}

    def found(self) -> list[tuple[str, str, int, int]]:
        """What the gauges say: (partner, level, open gaps, duplicates), in order."""
        return [(p, level, t.gaps, len(t.duplicates)) for (p, level), t in sorted(self._tallies.items())]

    async def refresh(self, *, force: bool = False) -> None:
        """Set the gauges when `every` seconds have passed (or `force`); a database that is down leaves them as they
        were (the journal's gauges say so, in one `gauges-stale` line)."""
        started = time.monotonic()
        if self.metrics is None or (not force and started - self._refreshed < self._wait):
            return
        full = started - self._full_at >= self._full_wait
        since = 0 if full else max(self._since - int(self.overlap * 1e9), 0)
        clock = time.time_ns()
        params = {"consumer": self.consumer, "partner": None, "since": since}
        try:
            rows = await self.inbox.read(lambda tx: tx.unit.fetch("hub_ledger_rows", params))
        except TransientError:
            return
        if full:
            self._tallies = {}
        for row in rows:
            self._tallies.setdefault((str(row[0]), str(row[1])), _Tally()).add(row, self.window)
        self.rows, self._since = len(rows), clock
        self._refreshed = time.monotonic()
        took = self._refreshed - started
        if full:
            self._full_at = self._refreshed
            self._full_wait = max(self.full_every, _SHARE * took)
        else:
            self._wait = max(self.every, _SHARE * took)
        self.metrics.ledger(consumer=self.consumer, found=self.found())
