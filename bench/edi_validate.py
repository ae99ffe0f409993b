"""Validation benchmark: an X12 810 of about 1, 5 and 10 MB, validated against its guide, beside parsing it.

For each size, best of `--rounds`, process CPU time:
- parse: `parse(data)` and the envelope walk with its checks (`problems`), segments left as text;
- full parse: the same and every segment materialised into elements and components (`Interchange.segments`);
- validate: `edinbox.edi.validate` on a parsed interchange (it materialises the message's segments itself, then
  places each in the guide's structure and checks its elements);
- invoices: reading the invoice (`Interchange.invoices()`), what the hub does with it anyway.
Linearity shows as an equal rate (MB/s) at every size; the ratio is validate / full parse.

Run: .venv/bin/python -m bench.edi_validate [--sizes 1,5,10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import date
from decimal import Decimal

from edinbox.edi import Invoice, InvoiceLine, InvoiceParty, Party, parse, render_invoice, validate

MB = 1_000_000


def invoice_810(size: int) -> bytes:
    """One 810 of about `size` bytes: IT1 lines with a PID description each."""
    line = InvoiceLine(Decimal(3), Decimal("12.50"), Decimal("37.50"), item="4000003000017", description="WIDGET")
    sample = _render(100, line)
    count = max(1, int(100 * size / len(sample)))
    return _render(count, line)


def _render(count: int, line: InvoiceLine) -> bytes:
    invoice = Invoice(
        number="INV-1",
        issue_date=date(2026, 11, 30),
        kind="invoice",
        seller=InvoiceParty("4000001000005", "ACME GMBH"),
        buyer=InvoiceParty("4000002000002", "HUB AG"),
        currency="EUR",
        total=Decimal("37.50") * count,
        tax_total=Decimal(0),
        lines=(line,) * count,
    )
    return render_invoice(
        invoice, standard="X12", sender=Party("ZZ", "ACME"), receiver=Party("ZZ", "HUB"), control_number="905"
    )


def _cpu(fn: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def measure(data: bytes, rounds: int) -> dict[str, float]:
    """Seconds of CPU (best of `rounds`) of each step on `data`."""

    def envelope() -> None:
        for ic in parse(data):
            ic.problems  # noqa: B018 - the envelope walk and its checks

    def full() -> None:
        for ic in parse(data):
            ic.problems  # noqa: B018
            ic.segments  # noqa: B018 - every segment into elements and components

    def check() -> None:
        validate(parse(data)[0])

    def invoices() -> None:
        parse(data)[0].invoices()

    times = {"parse": _cpu(envelope, rounds), "full parse": _cpu(full, rounds)}
    times["validate"] = _cpu(check, rounds) - times["parse"]
    times["invoices"] = _cpu(invoices, rounds) - times["parse"]
    return times


def main() -> int:
    """Print the rates and ratios per size."""
    parser = argparse.ArgumentParser(prog="python -m bench.edi_validate")
    parser.add_argument("--sizes", default="1,5,10", help="MB of each 810, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    for megabytes in (float(s) for s in args.sizes.split(",")):
        data = invoice_810(int(megabytes * MB))
        (interchange,) = parse(data)
        found = validate(interchange)
        assert found.checked == (0,) and not found, found  # noqa: PT018 - a benchmark, not a test
        times = measure(data, args.rounds)
        size = len(data) / MB
        segments = len(interchange.messages[0].segments)
        print(f"{size:5.1f} MB 810 ({segments} segments), best of {args.rounds}:")
        for name, seconds in times.items():
            print(f"  {name:<11} {seconds * 1000:8.1f} ms  {size / seconds:6.1f} MB/s")
        print(f"  validate / full parse {times['validate'] / times['full parse']:4.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
