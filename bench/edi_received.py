"""The envelope walk (trailer checks) and `received` (what an acknowledgment needs) of one big interchange.

An X12 810 and an EDIFACT INVOIC interchange of `--sets` one-line invoices each: milliseconds of process CPU time,
best of `--rounds`, for the envelope walk (`Interchange.keyable`, every trailer checked) and then `received()` on
the walked interchange. Run it against two source trees side by side (the bench module from this checkout, the
package from either tree), alternating:

Run: PYTHONPATH=src:. .venv/bin/python -m bench.edi_received [--sets 5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
from datetime import date
from decimal import Decimal

from edinbox import edi
from edinbox.edi import Invoice, InvoiceLine, InvoiceParty, Party, render_interchange


def interchange(standard: str, sets: int) -> bytes:
    """An interchange of `sets` one-line invoices."""
    line = InvoiceLine(Decimal(1), Decimal("10.00"), Decimal("10.00"), item="X")
    invoice = Invoice(
        "I-1",
        date(2026, 12, 1),
        "invoice",
        InvoiceParty("S", "S"),
        InvoiceParty("B", "B"),
        "EUR",
        Decimal("11.90"),
        Decimal("1.90"),
        (line,),
    )
    parties = {"sender": Party("ZZ", "A"), "receiver": Party("ZZ", "B")}
    return render_interchange([invoice] * sets, standard=standard, control_number="905", **parties)


def measure(data: bytes) -> tuple[float, float]:
    """CPU milliseconds of the envelope walk and of `received` on one freshly parsed interchange."""
    (found,) = edi.parse(data)
    start = time.process_time()
    assert found.keyable
    walked = time.process_time()
    edi.received(found)
    return (walked - start) * 1000, (time.process_time() - walked) * 1000


def main() -> None:
    """Print the best walk and `received` times per standard."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for standard in ("X12", "EDIFACT"):
        data = interchange(standard, args.sets)
        runs = [measure(data) for _ in range(args.rounds)]
        walk, received = (min(r[i] for r in runs) for i in (0, 1))
        print(f"{standard:8} {len(data):>9} bytes  walk {walk:7.1f} ms  received {received:7.1f} ms")


if __name__ == "__main__":
    main()
