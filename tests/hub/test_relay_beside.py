"""The relay inside `edinbox run`: the hub wakes it after each batch it acknowledged, so acknowledgments go out while
the hub works instead of after the relay's idle wait (SQLite and MariaDB cannot notify a waiting relay); after a pass
that was not full it lingers for the next rows, but never past a stop, and never with `once`."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from edinbox import AsyncInbox
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.demo._traffic import PARTNERS, render
from edinbox.loop import Relay
from edinbox.loop._outage import Outage
from edinbox.sources.spool import publish

from .test_acknowledgments import agreed, received
from .test_hub import doc


async def test_the_hub_wakes_its_relay_after_a_batch_it_acknowledged(tmp_path: Path) -> None:
    """With a relay idle wait of 40 s (poll_timeout 10 s x 4), the 997 of an interchange reaches the partner's folder
    within seconds, while the hub still runs: the relay was woken by the batch, not by its timer."""
    from hub_ops import init

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


async def lingering_relay(tmp_path: Path, rows: int) -> Relay:
    """A relay lingering an hour after a part pass, over a journal holding `rows` committed rows for a spool."""
    inbox = AsyncInbox(f"sqlite:///{tmp_path / 'hub.db'}", consumer="hub")
    await inbox.create_schema()
    await inbox.transaction(
        lambda tx: tx.publish_many([(f"dir://{tmp_path / 'out'}", b"x", f"k{n}") for n in range(rows)])
    )
    outage = Outage(logging.getLogger("edinbox.test"), give_up_after=None, name="relay")
    return Relay(inbox, outage=outage, stop=asyncio.Event(), limit=100, idle=3600, linger=3600)


async def test_a_relay_lingering_after_a_part_pass_stops_at_once(tmp_path: Path) -> None:
    """A relay that sent 5 rows (a part pass of its 100) and now lingers an hour for more returns as soon as it is
    stopped."""
    relay = await lingering_relay(tmp_path, 5)
    running = asyncio.ensure_future(relay.run())
    for _ in range(600):
        if relay.totals["sent"] == 5:
            break
        await asyncio.sleep(0.1)
    relay.stop.set()
    totals = await asyncio.wait_for(running, timeout=60)
    await relay.inbox.aclose()
    assert totals["sent"] == 5


async def test_a_relay_run_once_does_not_linger_after_a_part_pass(tmp_path: Path) -> None:
    """With `once` (`edinbox relay --once`, the hub's last drain) a part pass means the outbox is drained: the relay
    returns without its hour of lingering."""
    relay = await lingering_relay(tmp_path, 5)
    totals = await asyncio.wait_for(relay.run(once=True), timeout=60)
    await relay.inbox.aclose()
    assert totals["sent"] == 5
