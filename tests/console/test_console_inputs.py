"""Hostile query parameters against a real console (SQLite and PostgreSQL journals): out-of-range numbers and dates,
NUL characters and oversized forms are a 400 (or 413) page saying why, never a 500 or a traceback."""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx
import pytest

from console.conftest import Console


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("page=0", "page"),
        ("page=-1", "page"),
        ("page=abc", "page"),
        ("page=99999999999999999999999999", "page"),
        ("page=%C2%B2", "page"),  # a superscript two: a digit to str.isdigit, not to int
        ("until=9999-12-31", "until"),
        ("since=0001-01-01", "since"),
        ("since=2024-13-01", "since"),
        ("until=yesterday", "until"),
        ("partner=a%00b", "NUL"),
        ("control=%00", "NUL"),
        ("invoice=x%00", "NUL"),
    ],
)
def test_bad_search_parameters_are_a_clear_400(console: Console, query: str, says: str) -> None:
    """Each bad search parameter answers 400 with a page naming it, both as a page and as htmx's fragment request."""
    for headers in ({}, {"HX-Request": "true"}):
        response = httpx.get(f"{console.url}/?{query}", headers=headers, timeout=30)
        assert response.status_code == 400, (query, response.text[:300])
        assert says in response.text
        assert "Traceback" not in response.text


def test_good_search_parameters_still_work(console: Console) -> None:
    """The last allowed page, and dates at the ends of the allowed years, answer 200."""
    for query in ("page=100000", "since=1900-01-01&until=9998-12-31", "page=2&status=dead"):
        assert httpx.get(f"{console.url}/?{query}", timeout=30).status_code == 200, query


@pytest.mark.parametrize("path", ["/message?key=", "/confirm?action=forget&key="])
def test_a_nul_in_a_key_is_a_400(console: Console, path: str) -> None:
    """A key holding a NUL (PostgreSQL cannot even compare it) answers 400, not 500."""
    key = quote("X12:ZZ:A>ZZ:B/00\x001")
    response = httpx.get(f"{console.url}{path}{key}", timeout=30)
    assert response.status_code == 400
    assert "NUL" in response.text


def test_a_nul_or_an_oversized_form_is_refused_and_changes_nothing(console: Console) -> None:
    """A forget whose key holds a NUL is 400, an oversized form 413; the message they name stays."""
    with httpx.Client(base_url=console.url, timeout=30) as client:
        found = re.search(r'name="csrf" value="([^"]+)"', client.get("/confirm?action=forget&key=x").text)
        assert found is not None
        key = f"X12:ZZ:{console.traffic.processed.partner.id}>ZZ:EDINBOXHUB/{console.traffic.processed.control}"
        form = {"csrf": found.group(1), "action": "forget", "operator": "x"}
        assert client.post("/action", data={**form, "key": key + "\x00"}).status_code == 400
        assert client.post("/action", data={**form, "key": key, "pad": "x" * 20_000}).status_code == 413
        assert client.get("/message", params={"key": key}).status_code == 200


@pytest.mark.parametrize("number", ["99999999999999999999999", "9223372036854775808", "-1", "%C2%B2"])
def test_a_rejected_number_out_of_range_is_a_400(console: Console, number: str) -> None:
    """`rejected/N` with N no database integer holds (SQLite used to overflow into a 500) answers 400 naming it."""
    response = httpx.get(f"{console.url}/message?key=rejected/{number}", timeout=30)
    assert response.status_code == 400
    assert "rejected/&lt;number&gt;" in response.text
