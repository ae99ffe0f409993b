"""EDIFACT envelopes (ISO 9735): UNA or the default service characters, and the UNB/UNZ, UNG/UNE, UNH/UNT walk."""

from __future__ import annotations

import re

from edinbox.edi._envelope import Rule, Spec
from edinbox.edi._errors import EdiSyntaxError
from edinbox.edi._head import Head
from edinbox.edi._model import Segment

__all__ = ["CHARSETS", "SPEC", "edifact_head"]

# ISO 9735 Annex B: level A defaults (UNOA, UNOB) ":+.? '" and level B (UNOB..) IS1/IS3/IS4, no release.
_LEVEL_A: tuple[str, str, str, str | None, str | None, str] = (":", "+", ".", "?", None, "'")
_LEVEL_B: tuple[str, str, str, str | None, str | None, str] = ("\x1f", "\x1d", ".", None, None, "\x1c")
# Service code list 0001 -> Python codec, used when the interchange is not valid UTF-8 (declarations lie).
CHARSETS = {
    "UNOC": "latin-1",
    "UNOD": "iso8859-2",
    "UNOE": "iso8859-5",
    "UNOF": "iso8859-7",
    "UNOG": "iso8859-3",
    "UNOH": "iso8859-4",
    "UNOI": "iso8859-6",
    "UNOJ": "iso8859-8",
    "UNOK": "iso8859-9",
    "UNOW": "utf-8",
    "UNOY": "utf-8",
}
# Segments ending at line breaks (no UNA, no apostrophes): the UNB line is followed by a whole UNG or UNH line, the
# only segments ISO 9735 allows after UNB. Any other tag there ("EAN+1...") is a UNB hard-wrapped mid-value.
_NEXT_LINE_SEGMENT = re.compile(r"\r?\n(?:UNG|UNH)\+[^'\r\n]*\r?\n")
_LINE_END_OR_TERM = re.compile("[\n']")


def edifact_head(text: str, start: int) -> Head:
    """Read the service characters from UNA at `start`, or take the defaults the UNB separator implies."""
    problems: list[str] = []
    keyable = True
    if text.startswith("UNA", start):
        if start + 9 > len(text):
            raise EdiSyntaxError("the UNA service string advice is truncated", offset=start, segment_index=None)
        service = text[start + 3 : start + 9]
        component, element, decimal, release, repeat, term = tuple(service)
        body_start = start + 9
        while body_start < len(text) and text[body_start] in " \t\r\n":
            body_start += 1
        if not text.startswith("UNB", body_start):
            raise EdiSyntaxError(
                "UNA must be followed by the interchange header UNB", offset=body_start, segment_index=None
            )
        rel: str | None = None if release == " " else release
        rep: str | None = None if repeat == " " else repeat
        chars = [c for c in (component, element, term, rel, rep) if c is not None]
        if len(set(chars)) != len(chars) or any(c.isalnum() for c in chars) or " " in (component, element, term):
            raise EdiSyntaxError(
                f"the UNA service characters {text[start + 3 : start + 9]!r} are not distinct, non-alphanumeric "
                "characters",
                offset=start,
                segment_index=None,
            )
        if decimal not in ".,":
            problems.append(f"UNA3 decimal mark {decimal!r} is neither '.' nor ','; '.' is assumed")
            decimal = "."
        return Head("EDIFACT", start, body_start, element, component, term, rel, rep, decimal, problems)
    after = text[start + 3 : start + 4]
    if after == "+":
        component, element, decimal, rel, rep, term = _LEVEL_A
    elif after == "\x1d":
        component, element, decimal, rel, rep, term = _LEVEL_B
    else:
        raise EdiSyntaxError(
            f"UNB is followed by {after!r}: without UNA only the level A ('+') or level B (IS3) element "
            "separators can be recognised",
            offset=start + 3,
            segment_index=0,
        )
    if term == "'":
        first = _LINE_END_OR_TERM.search(text, start)  # reads no further than the UNB line's end
        line_end = first.start() if first is not None and first.group() == "\n" else -1
        if line_end >= 0 and _NEXT_LINE_SEGMENT.match(text, line_end):
            term = "\n"
            keyable = False
            problems.append(
                'no UNA and no segment terminator "\'" on the UNB line: segments were read as ending at line '
                "breaks, which the standard does not allow, so the interchange is not keyed"
            )
    return Head("EDIFACT", start, start, element, component, term, rel, rep, decimal, problems, keyable)


def _read_group(seg: Segment) -> tuple[str, str, str, str, str]:
    return (seg.get(1), seg.get(5), seg.get(2), seg.get(3), ":".join(seg.composite(7)))


def _read_message(seg: Segment) -> tuple[str, str, str]:
    return (seg.get(2), seg.get(1), ":".join(seg.composite(2)[1:]))


SPEC = Spec(
    trailer="UNZ",
    group_header="UNG",
    group_trailer="UNE",
    message_header="UNH",
    message_trailer="UNT",
    free=frozenset(),
    standalone=frozenset(),
    prefixes=frozenset({"UN"}),
    trailer_counts_groups_only=False,
    read_group=_read_group,
    read_message=_read_message,
    # CONTRL 0085 at every level: 28 references do not match, 29 control count does not match
    rules=(
        Rule("set", "UNT 0074", "UNT 0062", "UNH 0062", "segments", count_code="29", reference_code="28"),
        Rule("group", "UNE 0060", "UNE 0048", "UNG 0048", "messages", count_code="29", reference_code="28"),
        Rule("interchange", "UNZ 0036", "UNZ 0020", "UNB 0020", "", count_code="29", reference_code="28"),
    ),
    message_noun="message",
)
