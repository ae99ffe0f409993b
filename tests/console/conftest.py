"""Fixtures for the console's tests: a hub database with known traffic, the console served on a free port, and
headless Chromium (Debian's package, driven by Playwright; `.ci/run` installs it when missing)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import pytest

from edinbox import Message
from edinbox.hub import Accounting, Created, HubConfig, SqlAccounting, open_hub
from edinbox.hub.demo._traffic import EDIFACT_STYLES, PARTNERS, Doc, Partner, render
from edinbox.sources.spool import publish
from hub.conftest import drop_schema
from hub_ops import init

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
T = TypeVar("T")

ARTIFACTS = Path(os.environ.get("EDINBOX_TEST_ARTIFACTS", Path(__file__).parents[1] / "artifacts"))
"""Where the browser tests save their screenshots (git-ignored)."""

ACME = PARTNERS[0]
MARKUP = Partner("EDIFACT", "ZZZ", "<script>x</script>", "Markup <b>Ltd</b>", "EUR", EDIFACT_STYLES[0])
"""A partner whose id is markup: the console must show it as text."""
POISON = "<script>window.pwned = 1</script> accounting refused"
"""The error a failing sink raises for the dead message: markup again, shown in lists and on its page."""


def lines() -> tuple[tuple[int, Decimal], ...]:
    """Two invoice lines."""
    return ((2, Decimal("6.50")), (3, Decimal("10.00")))


@dataclass(frozen=True, slots=True)
class Traffic:
    """What the console's database holds, by name."""

    processed: Doc
    conflicted: Doc
    dead: Doc
    stuck: Doc
    """Dead too, and left so (the requeue test revives `dead`)."""
    markup: Doc
    garbage: bytes = b"GARBAGE: not an interchange at all"
    """A payload no key can be read from: parked as rejected/N."""

    def dead_payload(self) -> bytes:
        """The dead message's interchange, to deliver it again after a requeue."""
        return render(self.dead)


class Refusing(Accounting):
    """The SQL sink, except that it raises `POISON` for invoice numbers starting with `prefix`."""

    def __init__(self, prefix: str) -> None:
        """Refuse invoices numbered `prefix...`."""
        self.inner = SqlAccounting(consumer="accounting")
        self.prefix = prefix

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """Create, or fail with markup in the message."""
        if any(i.number.startswith(self.prefix) for i in invoices):
            raise RuntimeError(POISON)
        return await self.inner.create(tx, message, invoices)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to its end in a thread of its own: Playwright's sync API keeps an event loop in this one."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def drain(config: HubConfig, accounting: Accounting | None = None) -> None:
    """Run the hub until the spool is idle."""
    async with open_hub(config, accounting=accounting) as hub:
        await hub.run(once=True)


def fill(config: HubConfig) -> Traffic:
    """Processed, conflicting, dead and markup-partner messages, through the real hub."""
    traffic = Traffic(
        processed=Doc(ACME, "000000501", "invoice", "INV-501", lines=lines()),
        conflicted=Doc(ACME, "000000502", "invoice", "INV-502", lines=lines()),
        dead=Doc(ACME, "000000503", "invoice", "DEAD-503", lines=lines()),
        stuck=Doc(ACME, "000000505", "invoice", "DEAD-505", lines=lines()),
        markup=Doc(MARKUP, "M504", "invoice", "INV-504", lines=lines()),
    )
    changed = replace(traffic.conflicted, lines=((9, Decimal("9.99")),))
    first = [(n, render(d)) for n, d in (("a", traffic.processed), ("b", traffic.conflicted), ("c", traffic.markup))]
    first.append(("g", traffic.garbage))
    run(publish(config.source, first))
    run(drain(config))
    later = [("d", render(changed)), ("e", traffic.dead_payload()), ("f", render(traffic.stuck))]
    run(publish(config.source, later))
    run(drain(config, Refusing("DEAD-")))
    return traffic


@dataclass(frozen=True, slots=True)
class Console:
    """A console being served, over a database holding `traffic`."""

    url: str
    config: HubConfig
    traffic: Traffic


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def console(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """The console on a free loopback port, over a fresh database the hub filled (SQLite file or PostgreSQL)."""
    with served(request.param, tmp_path_factory) as found:
        yield found


@contextlib.contextmanager
def served(kind: str, tmp_path_factory: pytest.TempPathFactory, **terms: str) -> Iterator[Console]:
    """The console on a free loopback port, over a fresh database of `kind` ("sqlite", "postgresql" or "mysql":
    a PostgreSQL schema or MariaDB database of its own, dropped afterwards) the hub filled, every partner under an
    agreement with an outbound folder and `terms`."""
    from edinbox.console import create_app
    from services import MYSQL_URL, POSTGRES_URL, drop_database, require_service

    folder = tmp_path_factory.mktemp("console")
    spool = folder / "spool"
    spool.mkdir()
    schema = ""
    if kind == "sqlite":
        config = HubConfig(db=f"sqlite:///{folder / 'hub.db'}", source=f"dir://{spool}", idle_timeout=1.2)
    else:
        require_service("postgres" if kind == "postgresql" else "mariadb")
        schema = "t" + os.urandom(6).hex()
        url = POSTGRES_URL if kind == "postgresql" else MYSQL_URL
        config = HubConfig(db=url, table=f"{schema}.inbox", source=f"dir://{spool}", idle_timeout=1.2)
    outbound = f"dir://{folder / 'out'}/{{id}}"  # every partner gets its acknowledgments (the message page lists them)
    config = config.with_overrides(max_attempts=1, partners={"*": {"outbound": outbound, **terms}})
    try:
        run(init(config))
        traffic = fill(config)
        with serving(create_app(config)) as url:
            yield Console(url, config, traffic)
    finally:
        if schema and kind == "postgresql":
            drop_schema(POSTGRES_URL, schema)
        elif schema:
            drop_database(schema)


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve the ASGI `app` with uvicorn on a free loopback port, in a thread, until the block ends; its URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium from the system's package, driven by Playwright (never a downloaded browser); one per
    module, so Playwright's event loop leaves this thread before other modules' tests call asyncio.run."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium package")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser page (its own cookies); a screenshot of where it ended is saved as a test artifact."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    yield tab
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    name = request.node.name.replace("[", "-").replace("]", "").replace("/", "_")
    tab.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    context.close()
