"""The console's message page works on the console's one long-lived inbox and reads a row and its kept payload once
(the operator functions no longer open an inbox of their own)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from console.conftest import ACME, drain, lines, run, serving
from edinbox.hub import HubConfig
from edinbox.hub.demo._traffic import Doc, render
from edinbox.sources.spool import publish
from hub_ops import init


def _counted(calls: Counter[str], name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """`method`, counting its calls under `name`."""

    async def call(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return await method(*args, **kwargs)

    return call


def test_the_message_page_reads_the_row_and_its_payload_once(tmp_path: Path) -> None:
    """One processed interchange on SQLite: its message page, served over the console's own inbox, shows its segments
    and asks that inbox once for the journal row and once for the kept payload."""
    from edinbox.console import create_app

    spool = tmp_path / "spool"
    spool.mkdir()
    config = HubConfig(db=f"sqlite:///{tmp_path / 'hub.db'}", source=f"dir://{spool}", idle_timeout=1.2)
    run(init(config))
    doc = Doc(ACME, "000000601", "invoice", "INV-601", lines=lines())
    run(publish(config.source, [("a", render(doc))]))
    run(drain(config))
    app = create_app(config)
    with serving(app) as url:
        inbox = app.state.inbox
        calls: Counter[str] = Counter()
        inbox.get = _counted(calls, "get", inbox.get)
        inbox.payload = _counted(calls, "payload", inbox.payload)
        key = f"X12:ZZ:{doc.partner.id}>ZZ:EDINBOXHUB/{doc.control}"
        response = httpx.get(f"{url}/message", params={"key": key}, timeout=30)
    assert response.status_code == 200
    assert "INV-601" in response.text
    assert calls == {"get": 1, "payload": 1}
