"""Control numbers of acknowledgments, reserved for every partner of a batch in one statement: hubs reserving for
overlapping partners at once never deadlock, never get a number twice and leave no gap; a rolled-back block is
reserved again."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict

import pytest

from edinbox import AsyncInbox
from edinbox.hub import HubConfig
from edinbox.hub.database._journal import HUB
from edinbox.hub.partners._acks import reserve

PARTNERS = [f"X12:ZZ:US>ZZ:P{n}" for n in range(6)]


def journal(config: HubConfig) -> AsyncInbox:
    """The journal of `config` on a connection of its own (a hub's), with the hub's statements."""
    return AsyncInbox(config.db, consumer=config.consumer, table=config.table, applications=[HUB])


async def test_hubs_reserving_at_once_get_every_number_once(hub_config: HubConfig) -> None:
    """Four journals (four hubs' connections) run 12 transactions each at once, each reserving 1-3 numbers of 2-6 of
    six partners, listed in random order: every transaction commits (no deadlock), and each partner's numbers, all
    blocks together, are 1..N exactly once."""
    got: dict[str, list[int]] = defaultdict(list)
    rng = random.Random(7)

    async def hub(inbox: AsyncInbox) -> None:
        for _ in range(12):
            wanted = {p: rng.randint(1, 3) for p in rng.sample(PARTNERS, rng.randint(2, 6))}

            async def work(tx: object, wanted: dict[str, int] = wanted) -> dict[str, int]:
                return await reserve(tx, wanted)

            last = await inbox.transaction(work)
            assert set(last) == set(wanted)
            for partner, n in wanted.items():
                got[partner].extend(range(last[partner] - n + 1, last[partner] + 1))

    inboxes = [journal(hub_config) for _ in range(4)]
    try:
        await asyncio.gather(*(hub(inbox) for inbox in inboxes))
    finally:
        for inbox in inboxes:
            await inbox.aclose()
    assert set(got) == set(PARTNERS)
    for numbers in got.values():
        assert sorted(numbers) == list(range(1, len(numbers) + 1))


async def test_a_rolled_back_block_is_reserved_again(hub_config: HubConfig) -> None:
    """A transaction that reserved 3 numbers of two partners and rolled back leaves no gap: the next one gets the
    same numbers."""

    class RolledBack(Exception):
        pass

    inbox = journal(hub_config)
    try:
        first = await inbox.transaction(lambda tx: reserve(tx, {PARTNERS[0]: 2, PARTNERS[1]: 1}))

        async def abandoned(tx: object) -> None:
            await reserve(tx, {PARTNERS[0]: 3, PARTNERS[1]: 3})
            raise RolledBack

        with pytest.raises(RolledBack):
            await inbox.transaction(abandoned)
        again = await inbox.transaction(lambda tx: reserve(tx, {PARTNERS[1]: 3, PARTNERS[0]: 3}))
    finally:
        await inbox.aclose()
    assert first == {PARTNERS[0]: 2, PARTNERS[1]: 1}
    assert again == {PARTNERS[0]: 5, PARTNERS[1]: 4}
