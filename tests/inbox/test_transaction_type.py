"""The handler's transaction as a type: `edinbox.Tx` is an `AsyncTransaction` and a `Transaction`, and code typed
with them is checked (a wrong call to the unit is an error, where `Any` let everything through)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mypy import api

import edinbox

SNIPPET = """
from edinbox import AsyncTransaction, Transaction, Tx

async def work(tx: AsyncTransaction) -> int:
    rows = await tx.unit.fetch("journal_totals", {"consumer": "c"})
    count: int = await tx.publish("dir:///tmp/out", b"x", key="k")
    return len(rows) + count

def work_sync(tx: Transaction) -> int:
    return tx.unit.run("hub_drop_schema", {}) + tx.publish_many([])

def given(tx: Tx) -> tuple[AsyncTransaction, Transaction]:
    return tx, tx
"""


def _mypy(tmp_path: Path, code: str) -> tuple[str, int]:
    """mypy --strict's report on `code` and its exit status."""
    path = tmp_path / "snippet.py"
    path.write_text(textwrap.dedent(code))
    out, err, status = api.run(["--strict", "--no-incremental", "--follow-imports=silent", str(path)])
    return out + err, status


@pytest.mark.slow
def test_tx_is_both_transactions_and_calls_are_checked(tmp_path: Path) -> None:
    """A `Tx` passes where either protocol is expected, and the protocols give the unit's and publish's types: a
    statement name that is not text, or a publish awaited by sync code, is reported."""
    report, status = _mypy(tmp_path, SNIPPET)
    assert status == 0, report
    wrong = SNIPPET + "\nasync def bad(tx: AsyncTransaction) -> None:\n    await tx.unit.fetch(1, {})\n"
    wrong += "\ndef bad_sync(tx: Transaction) -> None:\n    await_me: int = tx.unit.fetch('x', {})\n"
    report, status = _mypy(tmp_path, wrong)
    assert status == 1
    assert 'Argument 1 to "fetch" of "AsyncUnit" has incompatible type "int"' in report
    assert 'Incompatible types in assignment (expression has type "list[tuple[Any, ...]]"' in report


def test_protocols_name_what_tx_has() -> None:
    """Every member the protocols promise is one a `Tx` has, and both are exported beside it."""
    tx = edinbox.Tx(None, "sqlite")
    for protocol in (edinbox.AsyncTransaction, edinbox.Transaction):
        members = [name for name in vars(protocol) if not name.startswith("_")]
        assert sorted(members) == ["connection", "dialect", "idempotency_key", "publish", "publish_many", "unit"]
        assert all(hasattr(tx, name) for name in members)


@pytest.mark.slow
def test_the_docs_typed_handler_checks_and_its_mistake_is_caught(tmp_path: Path) -> None:
    """docs/inbox.md's handler typed with `Transaction` passes mypy --strict, and the mistake the page says the
    protocol catches (a `str` payload to `tx.publish`) is reported."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "inbox.md").read_text(encoding="utf-8")
    code = page.split("## A handler's type", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    report, status = _mypy(tmp_path, code)
    assert status == 0, report
    report, status = _mypy(tmp_path, code.replace('b"confirmed"', '"confirmed"'))
    assert status == 1
    assert 'Argument 2 to "publish" of "Transaction" has incompatible type "str"; expected "bytes"' in report
