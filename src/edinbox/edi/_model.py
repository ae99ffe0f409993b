"""The parser's values: parties, separators, segments, messages and groups (frozen, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from edinbox.edi._tokens import Body

__all__ = ["Disagreement", "EdiMessage", "Group", "Party", "Segment", "Separators"]


@dataclass(frozen=True, slots=True)
class Party:
    """An interchange sender or receiver: ISA05/ISA06 (ISA07/ISA08) or UNB S002 0007/0004 (S003 0007/0010)."""

    qualifier: str
    id: str


@dataclass(frozen=True, slots=True)
class Separators:
    """The service characters of one interchange (from the ISA positions or UNA, else the EDIFACT defaults).

    `release` and `repetition` are None when the interchange has none; `decimal` is UNA3 ("." for X12).
    """

    element: str
    component: str
    segment: str
    release: str | None = None
    repetition: str | None = None
    decimal: str = "."


@dataclass(frozen=True, slots=True)
class Segment:
    """One segment: its tag and its elements, each a tuple of components, values un-escaped and decoded.

    Positions follow the standards' reference designators: `get(13)` is ISA13, `get(2, 2)` is UNB S002 0007.
    """

    tag: str
    elements: tuple[tuple[str, ...], ...]

    def get(self, position: int, component: int = 1) -> str:
        """The value at a 1-based element position and 1-based component, or "" when absent."""
        if 0 < position <= len(self.elements):
            element = self.elements[position - 1]
            if 0 < component <= len(element):
                return element[component - 1]
        return ""

    def composite(self, position: int) -> tuple[str, ...]:
        """All components of the element at a 1-based position (empty tuple when absent)."""
        if 0 < position <= len(self.elements):
            return self.elements[position - 1]
        return ()


@dataclass(frozen=True, slots=True)
class EdiMessage:
    """An EDIFACT message (UNH..UNT) or an X12 transaction set (ST..SE).

    `type` is UNH S009 0065 ("INVOIC", "CONTRL") or ST01 ("810", "997"); `control_number` is UNH 0062 / ST02;
    `index` its 0-based position among the interchange's messages (control numbers can repeat); `complete` is
    False when its trailer is missing.
    """

    type: str
    control_number: str
    version: str
    index: int
    group_control_number: str | None
    complete: bool
    _body: Body = field(repr=False, compare=False)
    _start: int = field(repr=False)
    _end: int = field(repr=False)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The message's segments from its header (UNH / ST) to its trailer (UNT / SE) inclusive."""
        return self._body.segments(self._start, self._end + 1)

    @property
    def header(self) -> Segment:
        """Its header segment (ST / UNH), built alone."""
        return self._body.split(self._start)

    @property
    def segment_range(self) -> tuple[int, int]:
        """Indices (start, end exclusive) of the message's segments within the interchange."""
        return (self._start, self._end + 1)


@dataclass(frozen=True, slots=True)
class Group:
    """A functional group: X12 GS..GE or EDIFACT UNG..UNE.

    `type` is GS01 ("IN", "FA") or UNG 0038; `control_number` GS06 / UNG 0048; `sender` and `receiver` the
    application codes GS02/GS03 or UNG S006/S007; `complete` is False when its trailer is missing.
    """

    type: str
    control_number: str
    sender: str
    receiver: str
    version: str
    complete: bool
    messages: tuple[EdiMessage, ...]


@dataclass(frozen=True, slots=True)
class Disagreement:
    """A trailer that disagrees with what it closes: a count or a control number (see `Interchange.disagreements`).

    `level` is "set" (SE / UNT), "group" (GE / UNE) or "interchange" (IEA / UNZ); `index` the message's index
    (among `Interchange.messages`), the group's (among `Interchange.groups`), or 0; `code` what an acknowledgment
    says of it (X12 718 for a set: 3 control number, 4 count; 716 for a group: 4, 5; TA1 I18: 001, 021; EDIFACT
    0085 at every level: 28 reference, 29 count); `reason` one sentence naming the elements and both values.
    """

    level: str
    index: int
    code: str
    reason: str
