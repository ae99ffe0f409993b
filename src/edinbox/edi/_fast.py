"""The validator's fast path: one compiled pattern per segment definition that a segment's text matches only when
none of its elements has an error, so a clean segment is checked by one `re.fullmatch` instead of element by element.

    pattern(tag, definition, element=, component=, marks=) -> re.Pattern | None

A pattern is conservative: a text it matches is one `_validate`'s element checks find nothing in; a text it does not
match is checked element by element, as before (the findings come from there alone). A segment with a composite, a
date or a time element has no pattern (None), nor has one whose separators could be read as part of a value.
Characters allowed in text (AN, ID without a code list) are printable ASCII other than the separators: any other
character, even a valid one, goes the exact way. X12 syntax notes are not in the pattern: they depend on which
elements are sent only, and `shape` gives that as a key.
"""

from __future__ import annotations

import re

from edinbox.edi._guide import Element, Rule

__all__ = ["pattern", "shape"]

_PRINTABLE = "".join(chr(c) for c in range(0x20, 0x7F))
"""Printable ASCII: a text value of only these passes `str.isprintable()`."""


def pattern(
    tag: str, definition: tuple[Element, ...], *, element: str, component: str, marks: tuple[str, ...]
) -> re.Pattern[str] | None:
    """The pattern a clean segment `tag` of `definition` matches whole (separators as given; `marks` the decimal
    marks an R value may hold one of), or None when the segment has no fast path."""
    separators = {element, component}
    if len(element) != 1 or len(component) != 1 or separators & {*"0123456789-", *marks}:
        return None
    text = "[" + "".join(re.escape(c) for c in _PRINTABLE if c not in separators) + "]"
    mark = "[" + "".join(re.escape(m) for m in dict.fromkeys(marks)) + "]"
    values: list[tuple[str, bool]] = []
    for one in definition:
        rule = one.rule
        if rule is None or rule.type in ("DT", "TM"):
            return None
        values.append((_value(rule, text, mark, separators), rule.required))
    tail = ""
    required_after = False
    for value, required in reversed(values):
        tail = re.escape(element) + (value if required else f"(?:{value})?") + tail
        required_after = required_after or required
        if not required_after:
            tail = f"(?:{tail})?"
    return re.compile(re.escape(tag) + tail)


def _value(rule: Rule, text: str, mark: str, separators: set[str]) -> str:
    """The pattern of one non-empty value of `rule` that its checks find right."""
    low, high = max(rule.min, 1), rule.max
    if rule.type[0] == "N":
        return f"-?[0-9]{{{low},{high}}}"
    if rule.type == "R":  # digits counted without the sign and the one decimal mark
        pointed = f"(?=(?:[0-9]|{mark}){{{low + 1},{high + 1}}}(?![0-9]|{mark}))(?:[0-9]+{mark}[0-9]*|{mark}[0-9]+)"
        return f"-?(?:[0-9]{{{low},{high}}}(?!{mark})|{pointed})"
    if rule.codes is not None:
        allowed = sorted(
            (code for code in rule.codes if low <= len(code) <= high and code.isprintable() and code.isascii()),
            key=lambda code: (-len(code), code),
        )
        allowed = [code for code in allowed if not separators & set(code)]
        return "(?:" + "|".join(map(re.escape, allowed)) + ")" if allowed else "(?!)"
    return f"{text}{{{low},{high}}}"


def shape(element: str, component: str) -> re.Pattern[str]:
    """What replaces every run of value characters with one `x`: the result says which elements (and components)
    are sent, the key under which a segment's syntax notes, once found to hold, hold again."""
    return re.compile("[^" + re.escape(element) + re.escape(component) + "]+")
