"""The message store through a real hub (SQLite and PostgreSQL): a processed interchange's segments on the console
and in `show`, found by a value inside it (console search box, `edinbox search`), and its `export` bundle checked by
the real `sha256sum -c` alone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
from click.testing import CliRunner

from console.conftest import Console
from edinbox.cli import main


def _key(console: Console) -> str:
    """The journal key of the processed interchange of the console's traffic."""
    return f"X12:ZZ:{console.traffic.processed.partner.id}>ZZ:EDINBOXHUB/{console.traffic.processed.control}"


def _cli(console: Console, *args: str) -> str:
    """Run an `edinbox` command on the console's database; its output (exit 0 asserted)."""
    db = ("--db", console.config.db, "--table", console.config.table)
    result = CliRunner().invoke(main, [*args, *db], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_console_shows_a_kept_interchange_and_finds_it_by_a_value_inside(console: Console) -> None:
    """The message page of a processed interchange shows its segments and what was kept; the search box's "in the
    documents" field finds it by its invoice number, and a value found nowhere lists nothing."""
    key = _key(console)
    page = httpx.get(f"{console.url}/message", params={"key": key}, timeout=30).text
    assert 'id="segments"' in page
    assert 'id="kept"' in page
    assert "INV-501" in page
    found = httpx.get(f"{console.url}/", params={"text": "INV-501"}, timeout=30).text
    assert console.traffic.processed.control in found
    assert console.traffic.conflicted.control not in found
    assert "No journal row matches" in httpx.get(f"{console.url}/", params={"text": "NOWHERE-42"}, timeout=30).text


def test_show_search_and_an_export_that_sha256sum_checks(console: Console, tmp_path: Path) -> None:
    """`show` previews the kept segments, `search` finds the key by its invoice number, and `export` writes a bundle
    that `sha256sum -c` accepts, whose canonical form's line is the journal's fingerprint; a changed byte fails it."""
    key = _key(console)
    shown = json.loads(_cli(console, "show", key, "--json"))
    assert shown["payload_kind"] == "edi"
    assert shown["kept"]["content_type"] == "application/EDI-X12"
    assert [hit["key"] for hit in json.loads(_cli(console, "search", "INV-501", "--json"))] == [key]

    bundle = tmp_path / "bundle"
    _cli(console, "export", key, "--out", str(bundle))
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=bundle, capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    sums = dict(reversed(line.split("  ", 1)) for line in (bundle / "SHA256SUMS").read_text().splitlines())
    assert sums["canonical.edi"] == shown["fingerprint"]
    assert sums["payload.edi"] == shown["kept"]["sha256"]
    assert json.loads((bundle / "invoices.json").read_text())[0]["number"] == "INV-501"
    assert any(path.name.startswith("01-") for path in (bundle / "acknowledgments").iterdir())

    payload = bundle / "payload.edi"
    payload.write_bytes(payload.read_bytes().replace(b"INV-501", b"INV-502"))
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=bundle, capture_output=True, text=True, check=False)
    assert check.returncode == 1
    assert "payload.edi: FAILED" in check.stdout
