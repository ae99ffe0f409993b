"""The README's snippets run as written, on SQLite and on PostgreSQL, and its install extras exist."""

from __future__ import annotations

import asyncio
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from services import drop_database, require_service

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
    yield from _schema(request.getfixturevalue("postgres_url"), unique_name)


def _schema(url: str, name: str) -> Iterator[str]:
    """`url` with a fresh schema `name` first on its search path (dropped after)."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{name}"'.encode())
    separator = "&" if "?" in url else "?"
    yield f"{url}{separator}options={quote(f'-csearch_path={name}')}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{name}" CASCADE'.encode())


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


def test_readme_faststream_example_runs_on_rabbitmq(database: str, unique_name: str) -> None:
    """The FastStream block, run as its `__main__` does (`app.run()`) against the real RabbitMQ, creates its tables
    at startup and makes one invoice per AMQP message_id: a publish repeating a key runs the handler no second time."""
    assert _faststream_on_rabbitmq(database, unique_name) == [b"UNH+1", b"UNH+2", b"UNH+3"]


def _faststream_on_rabbitmq(database: str, queue: str) -> list[bytes]:
    """Run the FastStream block (`app.run()`, its journal in `database`) on a fresh RabbitMQ queue, publish four
    messages of three keys, stop it, and return the bodies its table holds (the queue is deleted after)."""
    require_service("rabbitmq")
    import aio_pika

    code = _block("## FastStream middleware")
    url, name = "postgresql://app@db/hub", '"edi.in"'
    assert url in code
    assert name in code
    assert "asyncio.run(app.run())" in code
    namespace: dict[str, Any] = {"__name__": "readme_faststream"}
    code = code.replace(url, database).replace(name, repr(queue))
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - our own README
    app, broker, inbox = namespace["app"], namespace["broker"], namespace["inbox"]

    async def bodies(tx: Any) -> list[bytes]:
        cursor = await tx.connection.execute("SELECT body FROM invoice_bodies")
        return sorted(bytes(row[0]) for row in await cursor.fetchall())

    async def run() -> list[bytes]:
        started = asyncio.Event()
        app.after_startup(started.set)
        running = asyncio.create_task(app.run())
        try:
            await asyncio.wait_for(started.wait(), timeout=30)
            for key, body in [("inv-1", b"UNH+1"), ("inv-1", b"UNH+1"), ("inv-2", b"UNH+2"), ("inv-3", b"UNH+3")]:
                await broker.publish(body, queue=queue, message_id=key)
            for _ in range(300):  # one consumer, in order: once inv-3's row is there, the repeat was settled
                if len(made := await inbox.transaction(bodies)) >= 3:
                    return made
                await asyncio.sleep(0.1)
            return await inbox.transaction(bodies)
        finally:
            app.exit()
            await asyncio.wait_for(running, timeout=30)

    try:
        return asyncio.run(run())
    finally:

        async def delete_queue() -> None:
            connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
            async with connection:
                channel = await connection.channel()
                await channel.queue_delete(queue)

        asyncio.run(delete_queue())


def test_readme_install_extras_exist() -> None:
    """Every extra the Install section names is an extra of pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    section = README.read_text(encoding="utf-8").split("## Install", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))
    assert named
    assert named <= set(project["optional-dependencies"])
    assert project["requires-python"] == ">=3.11"
    assert "Python 3.11" in section


def test_readme_faststream_driver_extras_exist() -> None:
    """Every FastStream extra the FastStream section tells to install is an extra of the installed FastStream, and
    the one for the example's broker brings its driver (aio-pika for RabbitMQ)."""
    from importlib.metadata import distribution

    section = README.read_text(encoding="utf-8").split("## FastStream middleware", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"faststream\[(\w+)\]", section))
    faststream = distribution("faststream")
    assert {"rabbit", "nats", "redis", "confluent"} <= named
    assert named <= set(faststream.metadata.get_all("Provides-Extra") or [])
    assert any(r.startswith("aio-pika") and "extra == 'rabbit'" in r for r in faststream.requires or [])


def test_readme_mariadb_example_runs(unique_name: str) -> None:
    """The MariaDB section's example runs as written (in a fresh database instead of edinbox_readme)."""
    require_service("mariadb")
    code = _block("## MariaDB and MySQL\n").replace("edinbox_readme", unique_name)
    try:
        exec(compile(code, str(README), "exec"), {})  # noqa: S102 - the README example is our own code
    finally:
        drop_database(unique_name)


def test_readme_sqlalchemy_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SQLAlchemy section's example runs as written (its SQLite file in a temporary folder)."""
    monkeypatch.chdir(tmp_path)
    exec(compile(_block("## SQLAlchemy\n"), str(README), "exec"), {})  # noqa: S102 - the README example is our own code


@pytest.fixture(params=["sqlite", "postgresql"])
def shared(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(edinbox URL, SQLAlchemy URL) of one database: a SQLite file, or PostgreSQL with a fresh schema first on the
    search path."""
    if request.param == "sqlite":
        path = tmp_path / "shared.db"
        yield f"sqlite:///{path}", f"sqlite:///{path}"
        return
    for url in _schema(request.getfixturevalue("postgres_url"), unique_name):
        yield url, url.replace("postgresql://", "postgresql+psycopg://", 1)


def test_readme_examples_run_in_one_database_beside_a_hub(shared: tuple[str, str], unique_name: str) -> None:
    """In one database that holds an initialised hub, the README's library examples run one after another as written
    (the inbox in ten lines, retries, SQLAlchemy, FastStream on RabbitMQ): none collides with the hub's tables or
    with another example's, each example's table holds its rows, and the hub still passes its start check."""
    from edinbox.hub import HubConfig
    from edinbox.hub._ops import init
    from edinbox.hub._parts import open_inbox, verify

    url, engine_url = shared
    config = HubConfig(db=url)
    asyncio.run(init(config))
    examples = [
        _block("## The inbox in ten lines").replace('DB = "sqlite://"', f"DB = {url!r}"),
        _block("### Retries that wait").replace('"sqlite://"', repr(url)),
        _block("## SQLAlchemy\n").replace('"sqlite:///readme.db"', repr(engine_url)),
    ]
    for code in examples:
        exec(compile(code, str(README), "exec"), {})  # noqa: S102 - our own README
    assert _faststream_on_rabbitmq(url, unique_name) == [b"UNH+1", b"UNH+2", b"UNH+3"]

    async def counts() -> list[Any]:
        async with open_inbox(config) as inbox:
            await verify(inbox)  # the hub's start check: journal, versions, tables, keys
            tables = ("invoices", "booked_invoices", "invoice_bodies", "edinbox_hub_invoices")
            return [await inbox.read(lambda tx, t=t: _fetch(tx, f"SELECT count(*) FROM {t}")) for t in tables]

    assert asyncio.run(counts()) == [[(1,)], [(1,)], [(3,)], [(0,)]]


async def _fetch(tx: Any, query: str) -> list[Any]:
    """The rows of `query` on the journal's async connection (aiosqlite or psycopg)."""
    cursor = await tx.connection.execute(query)
    return [tuple(row) for row in await cursor.fetchall()]
