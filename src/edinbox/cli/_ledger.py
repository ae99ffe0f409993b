"""`edinbox ledger`: the control numbers partners sent, and what is wrong with them (see `edinbox.hub.partners`)."""

from __future__ import annotations

import json
from typing import Any

import click

from edinbox.cli._commands import command, db_options, hub_settings
from edinbox.cli._commands import echo as _echo
from edinbox.cli._commands import json_option as _json
from edinbox.cli._commands import opened as _opened
from edinbox.cli._commands import option as _option
from edinbox.cli._commands import say as _say
from edinbox.cli._commands import secrets as _secrets
from edinbox.cli._commands import setting as _setting
from edinbox.hub.partners import LEVELS, findings, read

__all__ = ["ledger"]


@command()
@db_options
@_option("--partner", default=None, help="only this partner (its sender, as `qualifier:id`: ZZ:ACME)")
@_option(
    "--level",
    "levels",
    multiple=True,
    type=click.Choice([level for levels in LEVELS.values() for level in levels]),
    help="only this level (repeat for more); a partner that numbers ST02 from 1 in each interchange repeats it",
)
@_setting("--duplicate-window")
@_json
def ledger(*, partner: str | None, levels: tuple[str, ...], as_json: bool, **settings: Any) -> None:
    """List each partner's open gaps, duplicates and out-of-order control numbers, per level (ISA13, GS06, ST02,
    UNB0020, UNG0048, UNH0062).

    A gap closes when its number arrives; one that a parked interchange carried names it (rejected/N, see `show`).
    --json prints every partner and level, with its counts and last arrival, findings or not.
    """
    cfg = hub_settings(settings)
    found = _opened(cfg, lambda inbox: read(inbox, window=cfg.duplicate_window, partner=partner or None))
    found = [one for one in found if not levels or one.level in levels]
    if as_json:
        _say(json.dumps(_secrets().data([one.as_dict() for one in found]), default=str))
        return
    rows = findings(found)
    if not rows:
        seen = ", ".join(sorted({one.partner for one in found})) or "none"
        _say(f"no gaps, duplicates or out-of-order numbers (partners seen: {seen})")
        return
    _echo(rows, as_json=False, columns=["partner", "level", "kind", "number", "detail"])
