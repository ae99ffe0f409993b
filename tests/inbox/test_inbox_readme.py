"""The README's snippets run as written, on SQLite and on PostgreSQL, and its install extras exist."""

from __future__ import annotations

import asyncio
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SQLITE_URL = "sqlite://"


def _block(heading: str, *, language: str = "python") -> str:
    """The first code block of `language` after `heading` in the README."""
    section = README.read_text(encoding="utf-8").split(heading, 1)[1]
    match = re.search(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert match is not None, heading
    return match.group(1)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, unique_name: str) -> Iterator[str]:
    """A database URL: SQLite in memory, or PostgreSQL with a fresh schema first on the search path."""
    if request.param == "sqlite":
        yield SQLITE_URL
        return
    url = request.getfixturevalue("postgres_url")
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{unique_name}"'.encode())
    separator = "&" if "?" in url else "?"
    yield f"{url}{separator}options={quote(f'-csearch_path={unique_name}')}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{unique_name}" CASCADE'.encode())


def test_readme_inbox_example_runs_on_both_databases(database: str) -> None:
    """The block under "The inbox in ten lines" executes as written (asserts included) with its DB set to SQLite
    or to PostgreSQL: the handler's SQL is driver-neutral, and the inbox closes as a context manager."""
    code = _block("## The inbox in ten lines")
    assert 'DB = "sqlite://"' in code
    assert "with Inbox(" in code
    namespace: dict[str, object] = {}
    exec(compile(code.replace('DB = "sqlite://"', f"DB = {database!r}"), str(README), "exec"), namespace)  # noqa: S102 - our own README
    assert namespace["delivery"] is not None


def test_readme_faststream_snippet_creates_the_schema_on_both_databases(database: str) -> None:
    """The FastStream block builds its app, and its startup hook creates the journal (closed after) on either
    database: a subscriber never meets a missing table."""
    code = _block("## FastStream middleware")
    url = "postgresql://app@db/hub"
    assert url in code
    namespace: dict[str, object] = {}
    exec(compile(code.replace(url, database), str(README), "exec"), namespace)  # noqa: S102 - our own README

    async def start_and_stop() -> None:
        await namespace["prepare"]()  # type: ignore[operator]
        await namespace["inbox"].verify()  # type: ignore[attr-defined]
        await namespace["close"]()  # type: ignore[operator]

    asyncio.run(start_and_stop())


def test_readme_install_extras_exist() -> None:
    """Every extra the Install section names is an extra of pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    section = README.read_text(encoding="utf-8").split("## Install", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))
    assert named
    assert named <= set(project["optional-dependencies"])
    assert project["requires-python"] == ">=3.11"
    assert "Python 3.11" in section
