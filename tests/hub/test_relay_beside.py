"""The relay inside `edinbox run`: the hub wakes it after each batch it acknowledged, so acknowledgments go out while
the hub works instead of after the relay's idle wait (SQLite and MariaDB cannot notify a waiting relay)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from edinbox.hub import HubConfig, open_hub
from edinbox.hub._generate import PARTNERS, render
from edinbox.sources.spool import publish

from .test_acknowledgments import agreed, received
from .test_hub import doc


async def test_the_hub_wakes_its_relay_after_a_batch_it_acknowledged(tmp_path: Path) -> None:
    """With a relay idle wait of 40 s (poll_timeout 10 s x 4), the 997 of an interchange reaches the partner's folder
    within seconds, while the hub still runs: the relay was woken by the batch, not by its timer."""
    from edinbox.hub._ops import init

    spool, out = tmp_path / "spool", tmp_path / "out"
    config = agreed(HubConfig(db=f"sqlite:///{tmp_path / 'hub.db'}", source=f"dir://{spool}", poll_timeout=10), out)
    await init(config)
    async with open_hub(config) as hub:
        running = asyncio.ensure_future(hub.run())
        await asyncio.sleep(0.5)  # the relay's first pass found nothing: it waits now
        started = time.monotonic()
        await publish(config.source, [("a", render(doc(control="000000301", number="INV-9")))])
        folder = out / PARTNERS[0].id / "inbound"
        for _ in range(200):
            if folder.is_dir() and any(folder.iterdir()):
                break
            await asyncio.sleep(0.05)
        waited = time.monotonic() - started
        hub.stop.set()
        await running
    assert waited < 10
    assert [r.message_types[0] for r in await received(out / PARTNERS[0].id)] == ["997"]
