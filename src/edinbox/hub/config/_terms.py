"""An agreement's terms that are small languages, read once per text: its overlay on the implementation guides
(`require`, `allow`: `edinbox.edi.Overlay`) and the control-number ledger's levels it keeps (`ledger`: level names of
both standards, the words interchange, group and message, or none; `edinbox.hub.partners` keeps the numbers)."""

from __future__ import annotations

import functools

from edinbox.edi import Overlay

__all__ = ["LEVELS", "levels", "overlay", "party_names"]

LEVELS = {"X12": ("ISA13", "GS06", "ST02"), "EDIFACT": ("UNB0020", "UNG0048", "UNH0062")}
"""The control-number ledger's levels of each standard: interchange, group, message."""

_LEVEL_WORDS = {"interchange": 0, "group": 1, "message": 2}
"""The words that name a level of both standards in an agreement's `ledger`."""


@functools.lru_cache(maxsize=256)
def levels(text: str) -> frozenset[str]:
    """An agreement's `ledger` read: the level names it keeps (comma- or space-separated ISA13, GS06, ST02, UNB0020,
    UNG0048, UNH0062, or interchange, group, message for that level of both standards, or none; empty: interchange
    and group, as ST02 / UNH 0062 numbers restart in each interchange for most partners); ValueError naming a word
    that is none."""
    words = [word for word in text.replace(",", " ").split() if word]
    if not words:
        return frozenset(levels[k] for levels in LEVELS.values() for k in (0, 1))
    if words == ["none"]:
        return frozenset()
    found: set[str] = set()
    names = {level for levels in LEVELS.values() for level in levels}
    for word in words:
        if word.upper() in names:
            found.add(word.upper())
        elif word.lower() in _LEVEL_WORDS:
            found |= {levels[_LEVEL_WORDS[word.lower()]] for levels in LEVELS.values()}
        else:
            known = ", ".join([*sorted(names), *_LEVEL_WORDS])
            raise ValueError(f"ledger: {word[:40]!r} is not a level ({known}, or none)")
    return frozenset(found)


@functools.lru_cache(maxsize=256)
def overlay(require: str, allow: str) -> Overlay:
    """An agreement's overlay read (`Overlay.parse`); ValueError naming a bad entry."""
    return Overlay.parse(require, allow)


@functools.lru_cache(maxsize=16)
def party_names(parties: str) -> frozenset[str]:
    """The hub's own parties in a `parties` setting ("qualifier:id", comma-separated), read once per text: the
    registry asks for every interchange planned whether it is addressed to one of them."""
    return frozenset(p.strip() for p in parties.split(",") if p.strip())
