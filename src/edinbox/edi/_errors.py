"""The EDI parser's errors: faults of the data, not failures of edinbox, so they are not `InboxError`s.

ValueError
└── EdiSyntaxError     these bytes are not a readable interchange, or an invoice in it is unreadable; `offset`,
    │                  `segment_index`. The payload alone is at fault: the hub parks it as rejected, with the
    │                  message as its reason, and never retries it
    └── NotKeyableError   the interchange is incomplete (no trailer, ...): never keyed or processed

The parser raises nothing else for any input (`TypeError` only for an argument that is not bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EdiSyntaxError", "Finding", "NotKeyableError"]


@dataclass(frozen=True, slots=True)
class Finding:
    """Where a transaction set or message is wrong, as its acknowledgment says it (X12 AK3/AK4 or IK3/IK4).

    `segment` is the tag at fault and `position` its 1-based position in the set or message (ST / UNH = 1);
    `segment_code` the X12 720 / 620 code (3 mandatory segment missing, 8 segment has data element errors).
    For an element error: `element` its 1-based position in the segment, `component` its 1-based position in a
    composite (0 for a simple element), `reference` its data element number (373, 2380...), `code` the X12 723 /
    621 code (1 mandatory missing, 4 too short, 5 too long, 6 invalid character, 7 invalid code, 8 invalid date),
    `value` the bad value as sent.
    """

    segment: str
    position: int
    segment_code: str = "8"
    element: int = 0
    component: int = 0
    reference: str = ""
    code: str = ""
    value: str = ""
    loop: str = ""
    """The loop the segment opens or sits in, when it matters (X12 AK303 / IK303: "N1" for a missing party)."""
    trigger: int = 0
    """The position of the element of the same segment whose presence made this one required or excluded (X12
    syntax notes): the 999's situational-trigger CTX; 0 when none."""


class EdiSyntaxError(ValueError):
    """The input cannot be read as EDI; says where, as a byte offset and a segment index.

    `offset` is the byte offset in the parsed data (0-based); `segment_index` is the 0-based index of the segment
    within its interchange (0 = ISA / UNB), or None when the fault is outside any segment. `finding` says, for an
    invoice that cannot be read, which segment and element of its message are at fault (None when not known).
    """

    def __init__(
        self, sentence: str, *, offset: int, segment_index: int | None = None, finding: Finding | None = None
    ) -> None:
        self.sentence = sentence
        self.offset = offset
        self.segment_index = segment_index
        self.finding = finding
        where = f"at byte {offset}" if segment_index is None else f"at byte {offset}, segment {segment_index}"
        super().__init__(f"{sentence} ({where})")


class NotKeyableError(EdiSyntaxError):
    """The interchange is incomplete or unidentifiable, so it has no inbox key (wait for the partner's resend)."""
