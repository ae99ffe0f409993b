"""SQLite's full-text index over the kept payloads (`sql/sqlite/payloads.sql`), run in a unit's open transaction.

The index is contentless: it keeps no copy of the words. A kept row enters it after its settling transaction, a batch
at a time in rowid order (`index_waiting`), and a mark records the highest rowid indexed; a row leaves it with its
words made again from its body (`unindex`, `fts_text`), before it is deleted (`purge`, `replace`), and
the mark is lowered after, since SQLite gives a freed highest rowid to the next row.
"""
# sync-doc: SQLite's full-text index over the kept payloads, run in a blocking unit's open transaction.

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from edinbox._payloads import fts_rows, fts_upto

if TYPE_CHECKING:  # the stores' migration 14 indexes through `index_waiting`
    from edinbox.stores._async_base import AsyncUnit

__all__ = ["index_waiting", "purge", "replace", "unindex"]


async def index_waiting(unit: AsyncUnit, limit: int) -> int:
    """Put up to `limit` kept rows above the mark into the index (fewer when their text passes `FTS_BATCH_BYTES`),
    then move the mark past them; return how many."""
    upto = fts_upto(await unit.fetch("payloads_pending_sizes", {"limit": limit}))
    rows = fts_rows(await unit.fetch("payloads_pending", {"upto": upto})) if upto else []
    if rows:
        await unit.run_many("payloads_index_words", rows)
        await unit.run("payloads_index_mark", rows[-1])
    return len(rows)


async def unindex(unit: AsyncUnit, rows: Sequence[tuple[Any, ...]]) -> None:
    """Delete the kept rows `rows` (rowid, whether indexed), the indexed ones out of the index first (their bodies
    read one at a time: a purge batch of big payloads is never in memory at once), then lower the mark to the
    highest rowid left."""
    if not rows:
        return
    for rowid, indexed in rows:
        if indexed:
            body = (await unit.fetch("payloads_body", {"id": rowid}))[0][0]
            await unit.run("payloads_unindex", fts_rows([(rowid, body)])[0])
    await unit.run_many("payloads_delete_row", [{"id": row[0]} for row in rows])
    await unit.run("payloads_lower_mark", {})


async def replace(unit: AsyncUnit, rows: Sequence[dict[str, Any]]) -> None:
    """Keep `rows` (`keep_params`) over what was kept of the same messages: the row kept before leaves the table
    (and the index, when it is in it), so the new one is kept above the mark and indexed again."""
    for row in rows:
        await unindex(unit, await unit.fetch("payloads_kept_row", row))
        await unit.run("payloads_keep", row)


async def purge(unit: AsyncUnit, params: dict[str, Any]) -> int:
    """Delete one batch of `payloads_purgeable` (`params`: consumer, older_than, batch_size); return how many."""
    rows = await unit.fetch("payloads_purgeable", params)
    await unindex(unit, rows)
    return len(rows)
