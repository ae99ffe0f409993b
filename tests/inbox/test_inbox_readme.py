"""The README's inbox example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services import drop_database, require_service

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_inbox_example_runs() -> None:
    """The python block under "The inbox in ten lines" executes without error (its asserts included)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## The inbox in ten lines", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    code = match.group(1)
    assert "inbox.process" in code
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - the README example is our own code
    assert namespace["delivery"] is not None


def _block(title: str) -> str:
    """The first python block of the README section `title`."""
    section = README.read_text(encoding="utf-8").split(f"## {title}\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


def test_readme_mariadb_example_runs(unique_name: str) -> None:
    """The MariaDB section's example runs as written (in a fresh database instead of edinbox_readme)."""
    require_service("mariadb")
    code = _block("MariaDB and MySQL").replace("edinbox_readme", unique_name)
    try:
        exec(compile(code, str(README), "exec"), {})  # noqa: S102 - the README example is our own code
    finally:
        drop_database(unique_name)


def test_readme_sqlalchemy_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SQLAlchemy section's example runs as written (its SQLite file in a temporary folder)."""
    monkeypatch.chdir(tmp_path)
    exec(compile(_block("SQLAlchemy"), str(README), "exec"), {})  # noqa: S102 - the README example is our own code
