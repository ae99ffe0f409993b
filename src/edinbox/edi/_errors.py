"""The EDI parser's errors, rooted in the edinbox tree.

InboxError
└── EdiSyntaxError (also ValueError)   the bytes are not a readable interchange; `offset`, `segment_index`
    └── NotKeyableError                the interchange is incomplete (no trailer, ...): never keyed or processed
"""

from __future__ import annotations

from edinbox._errors import InboxError

__all__ = ["EdiSyntaxError", "NotKeyableError"]


class EdiSyntaxError(InboxError, ValueError):
    """The input cannot be read as EDI; says where, as a byte offset and a segment index.

    `offset` is the byte offset in the parsed data (0-based); `segment_index` is the 0-based index of the segment
    within its interchange (0 = ISA / UNB), or None when the fault is outside any segment.
    """

    def __init__(self, sentence: str, *, offset: int, segment_index: int | None = None) -> None:
        self.sentence = sentence
        self.offset = offset
        self.segment_index = segment_index
        where = f"at byte {offset}" if segment_index is None else f"at byte {offset}, segment {segment_index}"
        super().__init__(f"{sentence} ({where})")


class NotKeyableError(EdiSyntaxError):
    """The interchange is incomplete or unidentifiable, so it has no inbox key (wait for the partner's resend)."""
