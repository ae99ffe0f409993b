"""Memory of the hub's plan per payload byte: a big interchange costs a bounded multiple of its size, linearly.

The plan is where a big payload is parsed, keyed and its invoices read; `bench/hub_memory.py` measures the whole
hub's resident set for 30 MB. Here the plan of a generated X12 810 and of one four times as large run under
tracemalloc (the payload itself, read before, is not counted), for the SQL sink (each invoice kept without its
lines). The larger may peak at most 5 times the smaller (linear is 4), and neither above `PER_BYTE` times its size:
the segments of every message kept at once (22x) or every line kept (9x) would break it. No wall-clock bound.
"""

from __future__ import annotations

import tracemalloc
from datetime import date
from decimal import Decimal

from edinbox.edi import Invoice, InvoiceLine, InvoiceParty, Party, render_interchange
from edinbox.hub import HubConfig, SqlAccounting
from edinbox.hub.deliveries._items import plan
from edinbox.sources import Delivery

SMALL = 1_000_000
GROWTH = 4
PER_BYTE = 8.0
"""The plan's peak per payload byte (about 5.2 when written: the decoded text, its segment strings, the kept
invoices); generous, yet under what keeping every message's segments or every line would cost."""
LINES = 20


def big_810(invoices: int) -> bytes:
    """One valid X12 interchange of `invoices` 810 transaction sets, 20 lines each (about 880 bytes apiece)."""
    seller, buyer = InvoiceParty("ACMESUPPLY", "Acme Supply Co"), InvoiceParty("5790000000005", "Nordic Retail")
    lines = [InvoiceLine(Decimal(3), Decimal("6.50"), Decimal("19.50"), item=f"40{k:011d}") for k in range(LINES)]
    total = Decimal("19.50") * LINES
    documents = [
        Invoice(f"BIG-{n}", date(2026, 12, 1), "invoice", seller, buyer, "USD", total, Decimal(0), lines)
        for n in range(invoices)
    ]
    return render_interchange(
        documents,
        standard="X12",
        sender=Party("ZZ", "ACMESUPPLY"),
        receiver=Party("ZZ", "EDINBOXHUB"),
        control_number="000000001",
        line_break="\n",
    )


def plan_peak(payload: bytes) -> int:
    """The tracemalloc peak of planning `payload` for the SQL sink, after checking what the plan kept."""
    delivery = Delivery(payload, message_id=None, coordinates="big", source="dir:test")
    tracemalloc.start()
    try:
        items = plan(delivery, HubConfig(), lines=SqlAccounting.needs_lines)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    [item] = items
    assert item.route == "inbox", item.reason
    assert item.invoices
    assert all(invoice.lines == () and invoice.line_count == LINES for invoice in item.invoices)
    return peak


def test_plan_memory_per_payload_byte_is_bounded_and_linear() -> None:
    """Planning a big 810 for the SQL sink peaks under 8x its size, and 4x the payload under 5x the peak."""
    per_invoice = len(big_810(10)) / 10
    small = big_810(int(SMALL / per_invoice))
    large = big_810(int(SMALL * GROWTH / per_invoice))
    small_peak, large_peak = plan_peak(small), plan_peak(large)
    for payload, peak in ((small, small_peak), (large, large_peak)):
        assert peak <= PER_BYTE * len(payload), f"{peak / len(payload):.1f}x the payload of {len(payload)} bytes"
    growth = (large_peak / len(large)) / (small_peak / len(small)) * GROWTH
    assert growth <= GROWTH * 1.25, f"4x the payload took {growth:.1f}x the memory"
