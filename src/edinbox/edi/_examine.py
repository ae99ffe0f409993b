"""The envelope checks of one interchange, run once on first need (parse itself reads only the header).

Reading `messages`, `groups`, `problems` or `keyable` (and so `message()` and `invoices()`) walks the envelope:
groups, messages, trailers, counts and control numbers. Key extraction from the header does not need it.
"""

from __future__ import annotations

from dataclasses import dataclass

from edinbox.edi import _edifact, _x12
from edinbox.edi._envelope import walk
from edinbox.edi._model import Disagreement, EdiMessage, Group, Segment
from edinbox.edi._tokens import Body

__all__ = ["Examined", "examine"]


@dataclass(frozen=True, slots=True)
class Examined:
    """What the envelope walk found: the structure, every finding, and whether the interchange is complete."""

    groups: tuple[Group, ...]
    messages: tuple[EdiMessage, ...]
    problems: tuple[str, ...]
    keyable: bool
    types: tuple[str, ...]
    """The distinct message types in order of appearance, a TA1 outside any message included."""
    disagreements: tuple[Disagreement, ...] = ()
    """Every trailer that disagrees with what it closes (count or control number), in the order met."""
    trailer: Segment | None = None
    """The interchange trailer (IEA / UNZ), None when it is missing."""


def examine(body: Body, *, control: str, notes: tuple[str, ...], identified: bool) -> Examined:
    """Walk the envelope of `body` (the interchange keeps the result: its messages refer to `body`, so a cache on
    `body` would be a reference cycle, and a big interchange's segments would wait for the cyclic GC)."""
    spec = _x12.SPEC if body.standard == "X12" else _edifact.SPEC
    result = walk(body, spec, control=control)
    problems = list(notes)
    bad_tag = body.bad_tag()
    if bad_tag is not None:
        problems.append(bad_tag)
    problems.extend(result.problems)
    keyable = identified and result.complete and bad_tag is None
    if result.trailer is None:
        keyable = False
        if body.tail:
            if body.tail.startswith(spec.trailer):
                problems.append(f"the trailer {spec.trailer} is not terminated by {body.term!r} (truncated data?)")
            else:
                problems.append(f"the data ends inside a segment: {body.tail[:30]!r}")
        problems.append(f"the interchange has no trailer {spec.trailer}: it is incomplete and is not keyed")
    found = sorted([(m.segment_range[0], m.type) for m in result.messages] + result.standalone)
    types = tuple(dict.fromkeys(kind for _, kind in found))
    return Examined(
        tuple(result.groups),
        tuple(result.messages),
        tuple(problems),
        keyable,
        types,
        disagreements=tuple(result.disagreements),
        trailer=result.trailer,
    )
