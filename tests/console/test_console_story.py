"""The message page tells an interchange's story, in order, from what the real hub kept (SQLite, PostgreSQL and
MariaDB, so every dialect's story queries run): an interchange sent twice (one redelivery, answered with a duplicate
notice) that was validated, created an invoice and got an acknowledgment; one whose validation found an error; a dead
message's markup error shown as text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from console.conftest import Console, drain, run, served
from edinbox.hub.demo._traffic import render
from edinbox.sources.spool import publish

PARTS = ["received", "journaled", "validated", "invoices", "acknowledgments", "parked", "kept", "ledger"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql", "mysql"])
def console(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """The console over a fresh database of each dialect the hub filled, every partner's invoices validated
    ("report": booked, their errors listed)."""
    with served(request.param, tmp_path_factory, validate="report") as found:
        yield found


def story_of(console: Console, key: str) -> dict[str, str]:
    """The parts of the story on `key`'s message page, by name, in the order the page gives them."""
    page = httpx.get(f"{console.url}/message", params={"key": key}, timeout=30).text
    assert re.findall(r'<li id="story-(\w+)"', page) == PARTS
    story = page[page.index('id="story"') : page.index("</ol>")]
    return dict(zip(PARTS, re.split(r'<li id="story-\w+">', story)[1:], strict=True))


def test_the_message_page_tells_each_part_of_an_interchanges_life_in_order(console: Console) -> None:
    """After the processed interchange is sent again, its page's story lists received (two deliveries answered, one
    redelivered), journaled, validated without errors, its invoice, its acknowledgment, no parked copy, the kept
    payload and its ISA13 number in the ledger, in that order."""
    doc = console.traffic.processed
    run(publish(console.config.source, [("again", render(doc))]))
    run(drain(console.config))
    key = f"X12:ZZ:{doc.partner.id}>ZZ:EDINBOXHUB/{doc.control}"
    parts = story_of(console, key)
    assert "deliveries answered: 2 (1 redelivered)" in parts["received"]
    assert "validated: no errors" in parts["validated"]
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


def test_the_story_lists_what_validation_found(console: Console) -> None:
    """An invoice whose BIG07 holds a code its guide does not list is booked under "report", and its story says
    "validated: 1 error" with the error in words: the segment, element, data element, what is wrong, the value."""
    doc = replace(console.traffic.processed, control="000000601", number="INV-601")
    run(publish(console.config.source, [("bad", render(doc).replace(b"*****DI~", b"*****QQ~"))]))
    run(drain(console.config))
    parts = story_of(console, f"X12:ZZ:{doc.partner.id}>ZZ:EDINBOXHUB/{doc.control}")
    assert "status: processed" in parts["journaled"]
    assert "validated: 1 error" in parts["validated"]
    assert "810 0001: BIG07 (640) in segment 2: invalid code value &#39;QQ&#39;" in parts["validated"]
