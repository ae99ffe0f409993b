"""The message page tells an interchange's story, in order, from what the real hub kept (SQLite and PostgreSQL): an
interchange sent twice (one redelivery, answered with a duplicate notice) that created an invoice and got an
acknowledgment; a dead message's markup error shown as text."""

from __future__ import annotations

import re

import httpx

from console.conftest import Console, drain, run
from edinbox.hub.demo._traffic import render
from edinbox.sources.spool import publish

PARTS = ["received", "journaled", "invoices", "acknowledgments", "parked", "kept", "ledger"]


def test_the_message_page_tells_each_part_of_an_interchanges_life_in_order(console: Console) -> None:
    """After the processed interchange is sent again, its page's story lists received (two deliveries answered, one
    redelivered), journaled, its invoice, its acknowledgment, no parked copy, the kept payload and its ISA13 number in
    the ledger, in that order."""
    doc = console.traffic.processed
    run(publish(console.config.source, [("again", render(doc))]))
    run(drain(console.config))
    key = f"X12:ZZ:{doc.partner.id}>ZZ:EDINBOXHUB/{doc.control}"
    page = httpx.get(f"{console.url}/message", params={"key": key}, timeout=30).text
    assert re.findall(r'<li id="story-(\w+)"', page) == PARTS
    story = page[page.index('id="story"') : page.index("</ol>")]
    parts = dict(zip(PARTS, re.split(r'<li id="story-\w+">', story)[1:], strict=True))
    assert "deliveries answered: 2 (1 redelivered)" in parts["received"]
    assert "duplicate notice" in parts["received"]
    assert "status: processed" in parts["journaled"]
    assert "INV-501" in parts["invoices"]
    assert re.search(r"<li>\w+ \d+: (sent|waiting|parked)", parts["acknowledgments"])
    assert "none" in parts["parked"]
    assert "SHA-256" in parts["kept"]
    assert 'href="#segments"' in parts["kept"]
    assert f"ISA13 {doc.control.lstrip('0')}: 2 accepted" in parts["ledger"]

    dead = console.traffic.stuck  # its last error is markup: the story shows it as text
    key = f"X12:ZZ:{dead.partner.id}>ZZ:EDINBOXHUB/{dead.control}"
    page = httpx.get(f"{console.url}/message", params={"key": key}, timeout=30).text
    journaled = page[page.index('id="story-journaled"') : page.index('id="story-invoices"')]
    assert "last error: " in journaled
    assert "&lt;script&gt;window.pwned" in journaled
    assert "<script>window.pwned" not in page
