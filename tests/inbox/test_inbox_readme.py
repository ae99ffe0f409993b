"""The README's and the docs pages' snippets run as written (the README's twice in a row, on SQLite, PostgreSQL and
MariaDB), and the README's install table lists every extra."""

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

from edinbox import Inbox
from edinbox.sources.spool import publish
from services import MYSQL_URL, drop_database, mariadb_admin, require_service

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
FASTSTREAM = DOCS / "faststream.md"
SQLALCHEMY = DOCS / "sqlalchemy.md"
SQLITE_URL = "sqlite://"


def _block(heading: str, *, page: Path = README, language: str = "python") -> str:
    """The first code block of `language` after `heading` in `page` (the README unless told)."""
    section = page.read_text(encoding="utf-8").split(heading, 1)[1]
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


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def store(request: pytest.FixtureRequest, unique_name: str, tmp_path: Path) -> Iterator[str]:
    """A persistent database URL: a SQLite file, PostgreSQL with a fresh schema first on the search path, or a fresh
    MariaDB database (dropped after)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/readme.db"
    elif request.param == "postgresql":
        yield from _schema(request.getfixturevalue("postgres_url"), unique_name)
    else:
        require_service("mariadb")
        mariadb_admin(f"CREATE DATABASE `{unique_name}`")
        try:
            yield f"{MYSQL_URL.rsplit('/', 1)[0]}/{unique_name}"
        finally:
            drop_database(unique_name)


def test_readme_examples_run_twice_on_every_store(store: str, tmp_path: Path) -> None:
    """The README's two examples (the inbox in ten lines, the consumer loop on a spool folder with its relay) run
    as written twice in a row against one persistent database, on SQLite, PostgreSQL and MariaDB: the second run
    fails nowhere, runs no handler again and leaves one invoice and one order per key."""
    inbox_code = _block("## The inbox in ten lines").replace('DB = "sqlite://"', f"DB = {store!r}")
    assert inbox_code != _block("## The inbox in ten lines")
    source, confirmations = f"dir://{tmp_path}/orders", f"dir://{tmp_path}/confirmations"
    consumer_code = _block("## A consumer loop")
    for before, after in [
        ('DB = "postgresql://app@db/shop"', f"DB = {store!r}"),
        ('SOURCE = "amqp://guest:guest@127.0.0.1/?queue=orders"', f"SOURCE = {source!r}"),
        ('CONFIRMATIONS = "amqp://guest:guest@127.0.0.1/?queue=confirmations"', f"CONFIRMATIONS = {confirmations!r}"),
        ("relay=True)", "relay=True, once=True, idle_timeout=0.3)"),  # return once the spool is drained
    ]:
        assert before in consumer_code, before
        consumer_code = consumer_code.replace(before, after)
    runs: list[dict[str, Any]] = []
    for _ in range(2):
        exec(compile(inbox_code, str(README), "exec"), {})  # noqa: S102 - our own README
        asyncio.run(publish(source, [("order-1", b"two chairs"), ("order-2", b"a table")]))
        namespace: dict[str, Any] = {}
        exec(compile(consumer_code, str(README), "exec"), namespace)  # noqa: S102 - our own README
        runs.append(dict(namespace["totals"]))
    assert runs[0]["processed"] == 2
    assert runs[1]["duplicate"] == 2
    assert "processed" not in runs[1]

    def count(tx: Any, table: str) -> int:
        cursor = tx.connection.cursor()
        cursor.execute(f"SELECT count(*) FROM {table}")
        return int(cursor.fetchone()[0])

    with Inbox(store, consumer="shop") as inbox:
        assert [inbox.read(lambda tx, t=t: count(tx, t)) for t in ("invoices", "orders")] == [1, 2]


def test_readme_inbox_example_runs_as_written() -> None:
    """The README's inbox in ten lines runs unchanged (its journal in SQLite in memory) and prints its outcomes."""
    exec(compile(_block("## The inbox in ten lines"), str(README), "exec"), {})  # noqa: S102 - our own README


def test_readme_faststream_snippet_creates_the_schema_on_both_databases(database: str) -> None:
    """The FastStream block builds its app, and its startup hook creates the journal (closed after) on either
    database: a subscriber never meets a missing table."""
    code = _block("# FastStream middleware", page=FASTSTREAM)
    url = "postgresql://app@db/hub"
    assert url in code
    namespace: dict[str, object] = {}
    exec(compile(code.replace(url, database), str(FASTSTREAM), "exec"), namespace)  # noqa: S102 - our own docs

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

    code = _block("# FastStream middleware", page=FASTSTREAM)
    url, name = "postgresql://app@db/hub", '"edi.in"'
    assert url in code
    assert name in code
    assert "asyncio.run(app.run())" in code
    namespace: dict[str, Any] = {"__name__": "readme_faststream"}
    code = code.replace(url, database).replace(name, repr(queue))
    exec(compile(code, str(FASTSTREAM), "exec"), namespace)  # noqa: S102 - our own docs
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
    """The Install section's table names every extra of pyproject.toml, and no other."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    section = README.read_text(encoding="utf-8").split("## Install", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))
    assert named == set(project["optional-dependencies"])
    assert project["requires-python"] == ">=3.11"
    assert "Python 3.11" in section


def test_readme_links_name_files_that_exist() -> None:
    """Every relative link of the README names a file of the tree (the docs pages' own links are checked by
    `mkdocs build --strict`), and the README stays a README: at most 200 lines."""
    text = README.read_text(encoding="utf-8")
    targets = [t for t in re.findall(r"\]\(([^)#\s]+)", text) if "://" not in t]
    assert "docs/inbox.md" in targets
    assert [t for t in targets if not (ROOT / t).is_file()] == []
    assert len(text.splitlines()) <= 200


def test_readme_faststream_driver_extras_exist() -> None:
    """Every FastStream extra the FastStream section tells to install is an extra of the installed FastStream, and
    the one for the example's broker brings its driver (aio-pika for RabbitMQ)."""
    from importlib.metadata import distribution

    section = FASTSTREAM.read_text(encoding="utf-8")
    named = set(re.findall(r"faststream\[(\w+)\]", section))
    faststream = distribution("faststream")
    assert {"rabbit", "nats", "redis", "confluent"} <= named
    assert named <= set(faststream.metadata.get_all("Provides-Extra") or [])
    assert any(r.startswith("aio-pika") and "extra == 'rabbit'" in r for r in faststream.requires or [])


def test_readme_mariadb_example_runs(unique_name: str) -> None:
    """The MariaDB page's example runs as written (in a fresh database instead of edinbox_readme)."""
    require_service("mariadb")
    code = _block("# MariaDB and MySQL\n", page=DOCS / "mariadb.md").replace("edinbox_readme", unique_name)
    try:
        exec(compile(code, "docs/mariadb.md", "exec"), {})  # noqa: S102 - the docs example is our own code
    finally:
        drop_database(unique_name)


def test_readme_sqlalchemy_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SQLAlchemy page's example runs as written (its SQLite file in a temporary folder)."""
    monkeypatch.chdir(tmp_path)
    exec(compile(_block("# SQLAlchemy\n", page=SQLALCHEMY), str(SQLALCHEMY), "exec"), {})  # noqa: S102 - our own docs


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
    (the inbox in ten lines, SQLAlchemy, FastStream on RabbitMQ): none collides with the hub's tables or
    with another example's, each example's table holds its rows, and the hub still passes its start check."""
    from edinbox.hub import HubConfig
    from edinbox.hub.database._journal import open_inbox, verify
    from hub_ops import init

    url, engine_url = shared
    config = HubConfig(db=url)
    asyncio.run(init(config))
    examples = [
        _block("## The inbox in ten lines").replace('DB = "sqlite://"', f"DB = {url!r}"),
        _block("# SQLAlchemy\n", page=SQLALCHEMY).replace('"sqlite:///readme.db"', repr(engine_url)),
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


NOT_MODULES = {
    # span and log attribute names (docs/retries.md, edinbox._trace), not modules or objects of the package
    "edinbox.attempt",
    "edinbox.consumer",
    "edinbox.delivery",
    "edinbox.key",
    "edinbox.message_type",
    "edinbox.outcome",
    "edinbox.partner",
    # a logger's name (the demo's accounting service) and a key of click's context (the command line's secrets)
    "edinbox.accounting",
    "edinbox.secrets",
}
"""Dotted names beginning `edinbox.` that the docs and comments use for something other than a module or object."""

DOTTED = re.compile(r"(?<![\w./-])edinbox(?:\.[A-Za-z_]\w*)+")
SOURCE_PATH = re.compile(
    r"(?<![\w./-])(?:(?:src/)?edinbox/[\w/<>.-]*[\w>]"
    r"|(?:tests|bench|scripts|hub|stores|sources|loop|cli|edi|console|integrations|testing)/[\w/<>.-]*\.(?:py|sql)\b)"
)
DIALECTS = ("postgresql", "mysql", "sqlite")


def _written_pages() -> Iterator[Path]:
    """The README, DEVELOPERS.md, mkdocs.yml, every docs page and every module of the package (its docstrings and
    comments name modules too)."""
    yield from (ROOT / "README.md", ROOT / "DEVELOPERS.md", ROOT / "mkdocs.yml")
    yield from sorted(DOCS.rglob("*.md"))
    yield from sorted((ROOT / "src" / "edinbox").rglob("*.py"))


def _names(name: str) -> bool:
    """Whether dotted `name` is a module of the package, or an object reached from one by its attributes."""
    import importlib

    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        stem = ROOT / "src" / Path(*parts[:end])
        if not (stem.with_suffix(".py").is_file() or (stem / "__init__.py").is_file()):
            continue
        if parts[end - 1] == "__main__":  # importing it would run the command
            return end == len(parts)
        found: object = importlib.import_module(".".join(parts[:end]))
        for attribute in parts[end:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def _exists(path: str) -> bool:
    """Whether a path named in prose is a file or folder of the tree: `src/edinbox/hub/ops/_ops.py`,
    `edinbox/hub/sql/<dialect>/` (`<dialect>` standing for each of the three), `tests/logfmt.py`, or a path inside
    the package (`stores/_mapping.py`)."""
    relative = path.removeprefix("src/")
    for place in (ROOT / "src", ROOT, ROOT / "src" / "edinbox"):
        if all((place / relative.replace("<dialect>", d)).exists() for d in DIALECTS):
            return True
    return False


def test_docs_and_comments_name_modules_and_paths_that_exist() -> None:
    """Every `edinbox.x.y` dotted name and `src/edinbox/...` path the README, the docs pages, mkdocs.yml and the
    package's docstrings and comments mention is a module, an object or a file of the tree: a module moved or
    renamed leaves no page pointing at its old place."""
    stale = []
    for page in _written_pages():
        text = page.read_text(encoding="utf-8")
        for match in DOTTED.finditer(text):
            name = match.group(0)
            if name not in NOT_MODULES and not _names(name):
                stale.append(f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}: {name}")
        for match in SOURCE_PATH.finditer(text):
            if not _exists(match.group(0)):
                stale.append(f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)}")
    assert stale == []


def test_the_stale_name_check_catches_an_old_path() -> None:
    """The check above refuses the names and paths modules had before they moved (the hub's operator module, the
    command line's single module) and accepts their new places."""
    assert not _names("edinbox.hub._ops")
    assert not _names("edinbox.hub.ops.give_up_after")
    assert not _exists("src/edinbox/cli.py")
    assert not _exists("src/edinbox/hub/_hub.py")
    assert not _exists("hub/_publish.py")
    assert _names("edinbox.hub.ops")
    assert _names("edinbox.AsyncTransaction")
    assert _exists("src/edinbox/hub/deliveries/_hub.py")
    assert _exists("edinbox/hub/sql/<dialect>/hub.sql")
    assert _exists("stores/_mapping.py")
    assert _exists("tests/logfmt.py")


def test_typed_handler_example_runs_as_written() -> None:
    """docs/inbox.md's handler typed with `edinbox.Transaction` runs as written: its invoice is processed and its
    confirmation stored in the outbox."""
    code = _block("## A handler's type", page=DOCS / "inbox.md")
    assert "tx: Transaction" in code
    exec(compile(code, "docs/inbox.md", "exec"), {})  # noqa: S102 - the docs example is our own code
