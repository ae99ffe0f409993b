"""The message store's commands, `edinbox search` and `edinbox export` (added to `edinbox.cli.main`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from edinbox._async_inbox import AsyncInbox
from edinbox._payloads import MAX_QUERY
from edinbox.cli._commands import command, db_options, hub_settings
from edinbox.cli._commands import echo as _echo
from edinbox.cli._commands import json_option as _json
from edinbox.cli._commands import opened as _opened
from edinbox.cli._commands import option as _option

__all__ = ["export", "search"]


@command()
@db_options
@click.argument("text")
@_option("--limit", default=20, type=click.IntRange(1, 1000), help="at most this many interchanges, newest first")
@_json
def search(*, text: str, limit: int, as_json: bool, **settings: Any) -> None:
    """Find the kept interchanges holding TEXT: a PO number, an invoice number, a GLN, any value inside the
    documents (every word of it of 3 or more letters or digits, as a whole word; at most %d characters).

    Only payloads kept by the message store (`keep_payloads`) are searched; `show KEY` shows one, `export KEY`
    writes its bundle.
    """
    from edinbox.hub import ops

    cfg = hub_settings(settings)
    found = _opened(cfg, lambda inbox: ops.search(inbox, text, limit=limit))
    _echo(found, as_json=as_json, columns=["key", "size", "kept_at"])


search.help = (search.help or "").replace("%d", str(MAX_QUERY))


@command()
@db_options
@click.argument("key")
@_option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    show_default="a new folder export-MESSAGE_ID",
    help="a new (or empty) folder, or a file ending in .tar or .tar.gz",
)
@_json
def export(*, key: str, out: Path | None, as_json: bool, **settings: Any) -> None:
    """Write the bundle of one journal row (KEY = SOURCE/MESSAGE_ID): the payload as received, the journal row, the
    invoices created and the acknowledgments sent (with their bytes and relay status), and a SHA256SUMS file that
    `sha256sum -c SHA256SUMS` checks alone: the payload's line is the digest recorded when it settled, an
    interchange's canonical form's line is the journal's fingerprint.
    """
    from edinbox.hub import ops
    from edinbox.hub.ops import show

    cfg = hub_settings(settings)

    async def bundle(inbox: AsyncInbox) -> tuple[Path, list[str]]:
        shown = await show(inbox, key)
        if shown is None or shown.get("status") in ("rejected", "parked"):
            raise click.ClickException(f"no journal row {key!r} for consumer {cfg.consumer!r}")
        target = out if out is not None else Path(f"export-{shown['message_id']}".replace("/", "_"))
        return target, await ops.export(inbox, key, target, shown=shown)

    target, files = _opened(cfg, bundle)
    folder = f"cd {target}"
    if target.name.endswith((".tar", ".tar.gz", ".tgz")):
        folder = f"mkdir bundle && tar xf {target} -C bundle && cd bundle"
    _echo(
        {"bundle": str(target), "files": len(files), "check": f"{folder} && sha256sum -c SHA256SUMS"}, as_json=as_json
    )
