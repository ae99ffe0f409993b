"""X12 envelopes: the fixed-width ISA (X12.5), its separators, and the ISA/IEA, GS/GE, ST/SE walk."""

from __future__ import annotations

import re
from operator import itemgetter

from edinbox.edi._envelope import Rule, Spec
from edinbox.edi._errors import EdiSyntaxError
from edinbox.edi._head import Head, utf8_char
from edinbox.edi._model import Segment

__all__ = ["SPEC", "x12_head"]

# 0-based positions of the data element separator inside the 106-character ISA (X12.5 ISA: fixed widths
# 2/10/2/10/2/15/2/15/6/4/1/5/9/1/1), ISA16 (component element separator) at 104, the segment terminator at 105.
_SEPARATOR_POSITIONS = (3, 6, 17, 20, 31, 34, 50, 53, 69, 76, 81, 83, 89, 99, 101, 103)
_ISA16 = 104
_TERMINATOR = 105
_AT_SEPARATORS = itemgetter(*_SEPARATOR_POSITIONS)
_SCAN_LIMIT = 600  # an ISA padded with 2-byte NBSPs or written unpadded still fits easily
# Sample seen in the wild: a line break at position 106 and the real terminator at the start of each next line.
_LEADING_TERMINATOR = re.compile(r"[ \t\r\n]*([^A-Za-z0-9\s])[ \t\r\n]*[A-Z][A-Z0-9]{1,2}(.)", re.DOTALL)


def _invalid(char: str) -> bool:
    return char.isalnum() or char == " "


def x12_head(text: str, start: int) -> Head:
    """Read the separators from the ISA at `start`: fixed positions first, then by counting separators."""
    n = len(text)
    if start + 4 > n:
        raise EdiSyntaxError("the ISA segment is truncated", offset=start, segment_index=0)
    element = text[start + 3]
    if _invalid(element) or element in "\r\n":
        raise EdiSyntaxError(
            f"the ISA element separator {element!r} must not be a letter, digit, space or line break",
            offset=start + 3,
            segment_index=0,
        )
    problems: list[str] = []
    window = text[start : start + _TERMINATOR]
    if len(window) == _TERMINATOR and "\r" not in window and "\n" not in window:
        fixed = _AT_SEPARATORS(window) == (element,) * 16  # the common case: one C-level comparison
        component_at, term_at = start + _ISA16, start + _TERMINATOR
    else:
        positions: list[int] = []  # absolute offsets of the first 105 characters, CR/LF skipped (hard wrap)
        at = start
        while len(positions) < _TERMINATOR and at < n:
            if text[at] not in "\r\n":
                positions.append(at)
            at += 1
        fixed = len(positions) == _TERMINATOR and all(text[positions[p]] == element for p in _SEPARATOR_POSITIONS)
        if fixed:
            component_at, term_at = positions[_ISA16], at
    if not fixed or term_at >= n:
        component_at, term_at = _by_counting(text, start, element)
        problems.append("the ISA is not fixed-width (106 characters): separators found by counting elements")
    component = text[component_at]
    term = utf8_char(text, term_at)
    if term in "\r\n":
        match = _LEADING_TERMINATOR.match(text, term_at + 1)
        if match and match.group(2) == element and match.group(1) not in (component, element):
            term = match.group(1)
            problems.append(f"a line break stands at ISA position 106; the segment terminator is the {term!r} after it")
    for name, char in (("component separator (ISA16)", component), ("segment terminator", term)):
        if _invalid(char):
            raise EdiSyntaxError(
                f"the ISA {name} {char!r} must not be a letter, digit or space",
                offset=term_at if name == "segment terminator" else component_at,
                segment_index=0,
            )
    if len({element, component, term}) != 3:
        raise EdiSyntaxError(
            f"the ISA separators must differ (element {element!r}, component {component!r}, segment {term!r})",
            offset=term_at,
            segment_index=0,
        )
    return Head("X12", start, start, element, component, term, problems=problems)


def _by_counting(text: str, start: int, element: str) -> tuple[int, int]:
    """Offsets of ISA16 and the terminator after the 16th element separator (unpadded or NBSP-padded ISA)."""
    at = start
    limit = min(len(text), start + _SCAN_LIMIT)
    for _ in range(16):
        at = text.find(element, at + 1, limit)
        if at < 0:
            raise EdiSyntaxError(
                "the ISA segment is truncated or malformed: it does not have 16 elements",
                offset=start,
                segment_index=0,
            )
    component_at = at + 1
    while component_at < limit and text[component_at] in "\r\n":
        component_at += 1
    term_at = component_at + 1
    if term_at >= len(text):
        raise EdiSyntaxError("the ISA segment is truncated after ISA16", offset=start, segment_index=0)
    return component_at, term_at


def repetition(isa: Segment, element: str, component: str, term: str) -> str | None:
    """ISA11 is the repetition separator from version 00402 on, unless a partner still sends a letter ("U")."""
    value, version = isa.get(11), isa.get(12)
    if len(value) == 1 and version >= "00402" and not _invalid(value) and value not in (element, component, term):
        return value
    return None


def _read_group(seg: Segment) -> tuple[str, str, str, str, str]:
    return (seg.get(1), seg.get(6), seg.get(2), seg.get(3), seg.get(8))


def _read_message(seg: Segment) -> tuple[str, str, str]:
    return (seg.get(1), seg.get(2), seg.get(3))


SPEC = Spec(
    trailer="IEA",
    group_header="GS",
    group_trailer="GE",
    message_header="ST",
    message_trailer="SE",
    free=frozenset({"ISB", "ISE", "TA1"}),
    standalone=frozenset({"TA1"}),  # X12.5 TA1 interchange acknowledgment: no ST, yet a message type of its own
    prefixes=frozenset({"IS", "IE", "GS", "GE", "ST", "SE", "TA"}),
    trailer_counts_groups_only=True,
    read_group=_read_group,
    read_message=_read_message,
    # the codes an acknowledgment gives a disagreement: 718 (AK502 / IK502), 716 (AK905), I18 (TA105)
    rules=(
        Rule("set", "SE01", "SE02", "ST02", "segments", count_code="4", reference_code="3"),
        Rule("group", "GE01", "GE02", "GS06", "transaction sets", count_code="5", reference_code="4"),
        Rule("interchange", "IEA01", "IEA02", "ISA13", "groups", count_code="021", reference_code="001"),
    ),
    message_noun="transaction set",
)
