"""Peak memory of the hub settling one big valid invoice interchange on SQLite, against the idle hub, side by side.

Each hub runs in its own process (`edinbox run --once` on a spool folder and a fresh SQLite file); its peak resident
set (VmHWM of /proc/self/status at exit: ru_maxrss would carry the parent's peak across fork and exec) is compared
with the peak of the same hub that found nothing to do. The budget (on this resident-set figure): at most 8 times
the payload on top of the idle hub. The interchange is an X12 810 (default) or an EDIFACT INVOIC (`--standard
EDIFACT`), 20 lines per invoice. `--trace` then runs, in this process under tracemalloc (the payload itself not
counted), the hub's plan of the delivery as the SQL sink gets it (parse, key, each invoice read, checked and kept
without its lines), and the public API's steps one after the other (parse, message(), invoices(): every invoice
with every line), with what each holds and the biggest allocation sites.

Run: .venv/bin/python -m bench.hub_memory [--mb 30] [--standard X12|EDIFACT] [--trace]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import tracemalloc
from datetime import date
from decimal import Decimal
from pathlib import Path

from edinbox.edi import Invoice, InvoiceLine, InvoiceParty, Party, parse, render_interchange
from edinbox.hub import HubConfig, SqlAccounting
from edinbox.hub.database import on_inbox
from edinbox.hub.deliveries._items import plan
from edinbox.hub.ops import init, stats
from edinbox.sources import Delivery
from edinbox.sources.spool import publish

BUDGET = 8.0
LINES = 20
_CHILD = """
import atexit, os, re, sys
def _peak():
    with open("/proc/self/status") as status, open(os.environ["PEAK_FILE"], "w") as out:
        out.write(re.search(r"VmHWM:\\s+(\\d+) kB", status.read())[1])
atexit.register(_peak)
from edinbox.cli import main
sys.argv[0] = "edinbox"
main()
"""


def interchange(size: int, standard: str = "X12") -> bytes:
    """One valid interchange of invoices (X12 810 or EDIFACT INVOIC, 20 lines each), about `size` bytes."""
    seller, buyer = InvoiceParty("ACMESUPPLY", "Acme Supply Co"), InvoiceParty("5790000000005", "Nordic Retail")
    cent = Decimal("0.01")

    def invoice(n: int) -> Invoice:
        lines = [InvoiceLine(Decimal(3), Decimal("6.50"), Decimal("19.50"), item=f"40{k:011d}") for k in range(LINES)]
        total = (Decimal("19.50") * LINES).quantize(cent)
        return Invoice(f"BIG-{n}", date(2026, 12, 1), "invoice", seller, buyer, "USD", total, Decimal(0), lines)

    def render(count: int) -> bytes:
        return render_interchange(
            [invoice(n) for n in range(count)],
            standard=standard,
            sender=Party("ZZ", "ACMESUPPLY"),
            receiver=Party("ZZ", "EDINBOXHUB"),
            control_number="000000001",
            line_break="\n",
        )

    per_invoice = len(render(10)) / 10
    return render(max(1, int(size / per_invoice)))


def _hub(root: Path, *, payload: bytes | None) -> tuple[int, str]:
    """Run `edinbox run --once` in a child process; return its peak resident set in bytes and its stderr tail."""
    spool, db = root / "spool", root / "hub.db"
    config = HubConfig(db=f"sqlite:///{db}", source=f"dir://{spool}")
    asyncio.run(on_inbox(config, lambda inbox: init(inbox, config=config)))
    if payload is not None:
        asyncio.run(publish(config.source, [("big", payload)]))
    args = ["run", "--once", "--quiet", "--db", config.db, "--source", config.source, "--idle-timeout", "0.2"]
    peak_file = root / "peak"
    env = {**os.environ, "PEAK_FILE": str(peak_file)}
    child = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, env=env, check=False)
    err = child.stderr
    if child.returncode != 0:
        raise SystemExit(f"the hub failed ({child.returncode}): {err[-2000:]}")
    if payload is not None:
        counts = asyncio.run(on_inbox(config, stats))
        if counts["processed"] != 1:
            raise SystemExit(f"the interchange was not processed: {counts}")
    return int(peak_file.read_text()) * 1024, err[-500:]


def _planned(payload: bytes) -> None:
    """The hub's plan of the delivery for the SQL sink, under tracemalloc: its peak and what it keeps."""
    n = len(payload)
    delivery = Delivery(payload, message_id=None, coordinates="big", source="dir:bench")
    tracemalloc.start()
    items = plan(delivery, HubConfig(), lines=SqlAccounting.needs_lines)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    kept = sum(len(item.invoices) for item in items)
    print("\nThe hub's plan of the delivery in this process (tracemalloc, x payload, the payload not counted):")
    print("| step | held after it | peak |")
    print("|---|---|---|")
    print(
        f"| plan: parse, key, {kept} invoices checked and kept without lines | {current / n:.1f}x | {peak / n:.1f}x |"
    )


def _phases(payload: bytes, top: int) -> None:
    """Where the memory goes: the public API's steps one after the other under tracemalloc, then the biggest sites."""
    n = len(payload)
    print("\nThe public API's steps in this process (tracemalloc, cumulative, x payload):")
    print("| step | held after it | peak so far |")
    print("|---|---|---|")
    tracemalloc.start()
    interchange = parse(payload)[0]
    held: list[object] = []
    for name, step in (
        ("parse", lambda: None),
        ("message (key, fingerprint)", interchange.message),
        ("invoices() (every line kept)", interchange.invoices),
    ):
        held.append(step())
        current, peak = tracemalloc.get_traced_memory()
        print(f"| {name} | {current / n:.1f}x | {peak / n:.1f}x |")
    print("\nBiggest allocation sites held at the end:")
    for stat in tracemalloc.take_snapshot().statistics("lineno")[:top]:
        print(f"{stat.size / n:5.1f}x  {stat.count:>9} blocks  {stat.traceback}")
    tracemalloc.stop()


def main() -> int:
    """Measure, print the table, and return 1 when the hub is over the budget."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=30.0, help="payload size in MB (default 30)")
    parser.add_argument("--standard", choices=["X12", "EDIFACT"], default="X12", help="810 or INVOIC (default X12)")
    parser.add_argument("--trace", action="store_true", help="also run under tracemalloc and list allocation sites")
    options = parser.parse_args()
    payload = interchange(int(options.mb * 1_000_000), options.standard)
    kind = "X12 810" if options.standard == "X12" else "EDIFACT INVOIC"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "idle").mkdir()
        (root / "busy").mkdir()
        idle, _ = _hub(root / "idle", payload=None)
        busy, _ = _hub(root / "busy", payload=payload)
        growth = (busy - idle) / len(payload)
        print(f"Hub peak memory (VmHWM), one valid {kind} interchange of {len(payload) / 1e6:.1f} MB on SQLite:")
        print("| hub | peak resident set | on top of idle | x payload |")
        print("|---|---|---|---|")
        print(f"| idle (nothing to do) | {idle / 1e6:.0f} MB | | |")
        print(
            f"| one {len(payload) / 1e6:.0f} MB interchange | {busy / 1e6:.0f} MB | {(busy - idle) / 1e6:.0f} MB | "
            f"{growth:.1f}x |"
        )
        verdict = "OK" if growth <= BUDGET else "OVER"
        print(f"budget: at most {BUDGET:.0f}x the payload on top of the idle hub: {verdict}")
    if options.trace:
        _planned(payload)
        _phases(payload, top=8)
    return 0 if growth <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
