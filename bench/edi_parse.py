"""EDI parser benchmark, measured side by side in one run.

1. Full parse of the 2.2 MB EDIFACT sample (`../shared/edi-samples/edifact_large_2MB_pydifact.edi`): ours
   (envelope walk and checks, and every segment materialised into elements and components) against pydifact's
   `Interchange.from_str` on the same bytes. Runs alternate, the best of each is compared.
2. Key extraction from a 1 KB interchange (EDIFACT INVOIC and X12 810): `parse(data)[0].key` (framing, separators,
   tokenizing, header; the envelope walk and tag check run on first need), and the inbox `Message`
   (`parse(data)[0].message()`: adds the envelope walk, trailer checks and the fingerprint), microseconds per call.

Run: .venv/bin/python -m bench.edi_parse
"""

from __future__ import annotations

import sys
import time
import timeit
import warnings
from collections.abc import Callable
from datetime import date
from decimal import Decimal
from pathlib import Path

from edinbox.edi import Invoice, InvoiceLine, InvoiceParty, Party, parse, render_invoice

CORPUS = next(
    (p / "shared" / "edi-samples" for p in Path(__file__).resolve().parents if (p / "shared" / "edi-samples").is_dir()),
    Path(__file__).resolve().parents[1].parent / "shared" / "edi-samples",
)
LARGE = CORPUS / "edifact_large_2MB_pydifact.edi"
ROUNDS = 3
KEY_BUDGET_US = 50.0


def _once(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _per_call_us(fn: Callable[[], object], number: int = 1000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=15)) / number * 1e6


def one_kb(standard: str) -> bytes:
    """A realistic interchange of about 1 KB carrying one invoice."""
    lines = [
        InvoiceLine(Decimal(n), Decimal("12.50"), Decimal(n) * Decimal("12.50"), item=f"40000030000{n:02d}")
        for n in range(1, 9 if standard == "EDIFACT" else 14)
    ]
    invoice = Invoice(
        number="INV-2026-000905",
        issue_date=date(2026, 11, 30),
        kind="invoice",
        seller=InvoiceParty("4000001000005", "ACME SUPPLIES GMBH"),
        buyer=InvoiceParty("4000002000002", "HUB TRADING AG"),
        currency="EUR",
        total=(sum((li.amount for li in lines), Decimal(0)) * Decimal("1.19")).quantize(Decimal("0.01")),
        tax_total=(sum((li.amount for li in lines), Decimal(0)) * Decimal("0.19")).quantize(Decimal("0.01")),
        lines=lines,
    )
    qualifier = "14" if standard == "EDIFACT" else "ZZ"
    return render_invoice(
        invoice,
        standard=standard,
        sender=Party(qualifier, "4000001000005"),
        receiver=Party(qualifier, "4000002000002"),
        control_number="000000905",
        line_break="\n",
    )


def main() -> int:
    """Print the figures and ratios; exit 1 when a target is missed."""
    from pydifact.segmentcollection import Interchange as PydifactInterchange

    warnings.simplefilter("ignore")  # pydifact warns about its missing segment directories
    ok = True
    for standard in ("EDIFACT", "X12"):  # first, on a fresh heap
        sample = one_kb(standard)
        key = _per_call_us(lambda sample=sample: parse(sample)[0].key)  # type: ignore[misc]
        message = _per_call_us(lambda sample=sample: parse(sample)[0].message())  # type: ignore[misc]
        line = f"1 KB {standard:<7} ({len(sample)} bytes): key {key:6.1f} us (target < {KEY_BUDGET_US:.0f})"
        line += f", message() {message:6.1f} us"
        if standard == "EDIFACT":
            text = sample.decode("latin-1")
            theirs_us = _per_call_us(lambda text=text: PydifactInterchange.from_str(text), number=200)  # type: ignore[misc]
            line += f", pydifact from_str {theirs_us:6.1f} us (ratio {theirs_us / key:4.1f}x)"
        print(line)
        ok &= key < KEY_BUDGET_US
    if LARGE.exists():
        data = LARGE.read_bytes()

        def ours_full() -> None:
            for ic in parse(data):
                ic.problems  # noqa: B018 - the envelope walk and its checks
                ic.segments  # noqa: B018 - every segment into elements and components, as pydifact does

        def ours_envelope() -> None:
            for ic in parse(data):
                ic.problems  # noqa: B018 - the envelope walk and its checks, segments left as text

        def theirs() -> None:
            PydifactInterchange.from_str(data.decode("latin-1"))

        full, envelope, baseline = [], [], []
        for _ in range(ROUNDS):
            full.append(_once(ours_full))
            envelope.append(_once(ours_envelope))
            baseline.append(_once(theirs))
        ratio = min(baseline) / min(full)
        segments = len(parse(data)[0].segments)
        print(f"2.2 MB EDIFACT ({len(data)} bytes, {segments} segments), best of {ROUNDS}:")
        print(f"  pydifact Interchange.from_str      {min(baseline) * 1000:8.1f} ms")
        print(f"  edinbox full parse                 {min(full) * 1000:8.1f} ms   ratio {ratio:5.1f}x (target >= 5x)")
        quick = min(baseline) / min(envelope)
        print(f"  edinbox envelope and checks only   {min(envelope) * 1000:8.1f} ms   ratio {quick:5.1f}x")
        ok &= ratio >= 5
    else:
        print(f"skipped the 2.2 MB comparison: {LARGE} is absent")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
