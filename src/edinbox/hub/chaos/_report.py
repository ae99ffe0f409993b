"""What a chaos run counts and reports: the database's tally (invoices, effects, settled interchanges, parked
payloads) and the verdict built from it (`ChaosReport`), printed by `edinbox chaos`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from edinbox import AsyncTransaction
from edinbox.hub.config import HubConfig
from edinbox.hub.database import counts, open_inbox

__all__ = ["ChaosReport", "InvoiceKey", "Tally", "tally"]

InvoiceKey = tuple[str, str, str, str]
"""(seller, number, kind, issue date as ISO text): the invoices table's unique key."""


@dataclass(frozen=True, slots=True)
class Tally:
    """What the database holds after (or during) a chaos run."""

    invoices: frozenset[InvoiceKey]
    effects: int
    """Interchanges counted `processed` or `resent`, each in the transaction that ran its handler."""
    settled: int
    """Distinct interchanges the journal holds as processed."""
    suppressed: int
    """Deliveries the journal found already processed (duplicates and redeliveries)."""
    parked: frozenset[str] = frozenset()
    """The fingerprints of the payloads in the rejected table."""


async def tally(config: HubConfig) -> Tally:
    """Read the invoice keys, the effect counters and the settled interchanges in one read transaction."""
    async with open_inbox(config) as inbox:

        async def read(tx: AsyncTransaction) -> Tally:
            keys = await tx.unit.fetch("hub_invoice_keys", {})
            processed = await tx.unit.fetch("hub_processed_keys", {"consumer": config.consumer})
            found = await counts(tx, consumer=config.consumer)
            rejected = await tx.unit.fetch("hub_rejected_fingerprints", {"consumer": config.consumer})
            invoices = frozenset((str(s), str(n), str(k), str(d)) for s, n, k, d in keys)
            effects = found["processed"] + found["resent"]
            fingerprints = frozenset(str(row[0]) for row in rejected)
            return Tally(invoices, effects, len(processed), found["duplicate"], fingerprints)

        result: Tally = await inbox.read(read)
        return result


@dataclass(slots=True)
class ChaosReport:
    """What was published, what chaos did to the hubs and the database, and what the database holds."""

    source: str
    db: str
    table: str
    log: str
    messages: int
    duplicates: int
    hubs: int
    batch_size: int = 10
    poison: int = 0
    huge: int = 0
    refused: dict[str, str] = field(default_factory=dict)
    """Huge deliveries the broker refused to take (never published), with its reason."""
    kills: int = 0
    crashes: int = 0
    db_restarts: int = 0
    seconds: float = 0.0
    expected: int = 0
    invoices: int = 0
    effects: int = 0
    settled: int = 0
    suppressed: int = 0
    lost: int = 0
    doubled: int = 0
    parked: int = 0
    """Bad deliveries (poison and huge ones the broker took) with a row in the rejected table."""
    parked_twice: int = 0
    """Rows in the rejected table beyond one per bad delivery."""
    stray: int = 0
    """Invoices in the table that no good interchange holds (a bad delivery that became one)."""
    timed_out: bool = False
    missing: list[str] = field(default_factory=list)

    @property
    def bad(self) -> int:
        """Bad deliveries that reached the source: each must be parked once."""
        return self.poison + self.huge - len(self.refused)

    @property
    def ok(self) -> bool:
        """Nothing lost, nothing doubled, every bad delivery parked once and none an invoice, all within the timeout."""
        parked_once = self.parked == self.bad and self.parked_twice == 0 and self.stray == 0
        return self.lost == 0 and self.doubled == 0 and parked_once and not self.timed_out

    def as_dict(self) -> dict[str, Any]:
        """The report as one JSON-able object."""
        return {**asdict(self), "ok": self.ok}

    def render(self) -> str:
        """The verdict line, then the summary."""
        verdict = f"lost={self.lost} doubled={self.doubled}"
        if self.poison or self.huge:
            verdict += f" parked={self.parked} of {self.bad} parked_twice={self.parked_twice} stray={self.stray}"
        lines = [
            verdict,
            f"published={self.messages + self.duplicates + self.bad} ({self.messages} interchanges, "
            f"{self.duplicates} duplicates, {self.poison} poison, {self.huge - len(self.refused)} huge) "
            f"hubs={self.hubs} batch_size={self.batch_size} kills={self.kills} crashes={self.crashes} "
            f"db_restarts={self.db_restarts} seconds={self.seconds:.1f}",
            f"invoices={self.invoices}/{self.expected} effects={self.effects} settled={self.settled}"
            f" suppressed={self.suppressed}"
            f" ({self.source} -> {self.db}, journal {self.table})",
        ]
        if self.refused:
            lines.append(
                f"huge deliveries refused by the source (not counted): {len(self.refused)}, e.g. "
                f"{next(iter(self.refused.values()))}"
            )
        if self.timed_out:
            lines.append("timed out before everything settled")
        if self.missing:
            lines.append(f"missing (first {len(self.missing)}): {', '.join(self.missing)}")
        lines.append(f"look closer: edinbox stats --db '{self.db}' --table {self.table}; hub log {self.log}")
        return "\n".join(lines)
