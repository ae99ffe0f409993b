"""EDI parser benchmark, measured side by side in one run.

1. Full parse of the 2.2 MB EDIFACT sample (`../shared/edi-samples/edifact_large_2MB_pydifact.edi`): ours
   (envelope walk and checks, and every segment materialised into elements and components) against pydifact's
   `Interchange.from_str` on the same bytes. Runs alternate, the best of each is compared.
2. Key extraction from a 1 KB interchange (EDIFACT INVOIC and X12 810): `parse(data)[0].key` (framing, separators,
   tokenizing, header; the envelope walk and tag check run on first need), and the inbox `Message`
   (`parse(data)[0].message()`: adds the envelope walk, trailer checks and the fingerprint), microseconds per call.
3. The two shapes that were once quadratic, each at two sizes (4x apart) so that linearity shows as an equal
   rate: an X12 interchange with a line-feed terminator and blank lines before its group trailer, and EDIFACT
   interchanges glued one after another without UNA. Rates in MB/s of process CPU time, best of 3, for `parse`
   plus every `message()` (the key, what the hub needs first) and for a full read (also every segment and every
   invoice); the glued EDIFACT is also tokenized by pydifact (`RawSegmentCollection.from_str`, segments only),
   side by side. Target: parse and key at 2 MB/s or more (0.5 s per MB) at both sizes.

Run: .venv/bin/python -m bench.edi_parse [--sizes 262144,1048576] [--rounds 3] [--shapes-only] [--shape glued]
"""

from __future__ import annotations

import argparse
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
SHAPE_SIZES = (256 * 1024, 1024 * 1024)
MB_PER_S_TARGET = 2.0


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


def _cpu(fn: Callable[[], object], rounds: int) -> float:
    """Best process CPU time of `rounds` calls."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


_INVOIC = (
    b"UNB+UNOC:3+4000001000005:14+4000002000002:14+261130:1205+INV0000000905'UNH+1+INVOIC:D:96A:UN:EAN008'"
    b"BGM+380+INV-905+9'DTM+137:20261130:102'NAD+SU+4000001000005::9++ACME GMBH'NAD+BY+4000002000002::9++HUB AG'"
    b"CUX+2:EUR:4'LIN+1++W-1:EN'QTY+47:2'MOA+203:100.00'PRI+AAA:50.00'LIN+2++W-2:EN'QTY+47:1'MOA+203:0.50'"
    b"PRI+AAA:0.5'UNS+S'MOA+77:119.60'MOA+176:19.10'UNT+18+1'UNZ+1+INV0000000905'"
)


def blank_lines(size: int) -> bytes:
    """An X12 810 with LF terminators and about `size` bytes of blank lines before its GE."""
    data = one_kb("X12").replace(b"~\n", b"\n")
    head, tail = data.rsplit(b"GE*", 1)
    return head + b"\n" * (size - len(data)) + b"GE*" + tail


def glued(size: int) -> bytes:
    """About `size` bytes of EDIFACT INVOIC interchanges without UNA, glued one after another."""
    return _INVOIC * max(1, size // len(_INVOIC))


def shapes(sizes: tuple[int, ...], rounds: int = ROUNDS, only: str = "all") -> bool:
    """Rates of the once-quadratic shapes at each size; False when parse and key are under the target rate."""
    from pydifact.segmentcollection import RawSegmentCollection

    ok = True
    print(f"once-quadratic shapes, MB/s of CPU time (best of {rounds}; target parse+key >= {MB_PER_S_TARGET} MB/s):")
    for name, make in (("X12 blank lines before GE", blank_lines), ("EDIFACT glued, no UNA", glued)):
        if only not in ("all", make.__name__):
            continue
        for size in sizes:
            data = make(size)
            mb = len(data) / 1e6

            def keyed(data: bytes = data) -> None:
                for ic in parse(data):
                    ic.message()

            def full(data: bytes = data) -> None:
                for ic in parse(data):
                    ic.message()
                    ic.segments  # noqa: B018 - every segment into elements and components
                    ic.invoices()

            key_rate, full_rate = mb / _cpu(keyed, rounds), mb / _cpu(full, rounds)
            line = f"  {name:<26} {len(data):>9} bytes: parse+key {key_rate:7.3f} MB/s, full read {full_rate:7.3f} MB/s"
            if make is glued:
                text = data.decode("latin-1")
                theirs = mb / _cpu(lambda text=text: RawSegmentCollection.from_str(text), rounds)  # type: ignore[misc]
                line += f", pydifact segments {theirs:5.2f} MB/s (ratio {full_rate / theirs:4.1f}x)"
            print(line)
            ok &= key_rate >= MB_PER_S_TARGET
    return ok


def main() -> int:
    """Print the figures and ratios; exit 1 when a target is missed."""
    from pydifact.segmentcollection import Interchange as PydifactInterchange

    parser = argparse.ArgumentParser(prog="python -m bench.edi_parse")
    parser.add_argument("--sizes", default=",".join(map(str, SHAPE_SIZES)), help="bytes of each shape, comma-separated")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="best of this many runs for the shapes")
    parser.add_argument("--shapes-only", action="store_true", help="only the once-quadratic shapes")
    parser.add_argument("--shape", choices=["all", "blank_lines", "glued"], default="all", help="one shape only")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    warnings.simplefilter("ignore")  # pydifact warns about its missing segment directories
    if args.shapes_only:
        return 0 if shapes(sizes, args.rounds, args.shape) else 1
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
    ok &= shapes(sizes, args.rounds, args.shape)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
