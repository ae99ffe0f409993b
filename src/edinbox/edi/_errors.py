"""The EDI parser's errors: faults of the data, not failures of edinbox, so they are not `InboxError`s.

ValueError
└── EdiSyntaxError     these bytes are not a readable interchange, or an invoice in it is unreadable; `offset`,
    │                  `segment_index`. The payload alone is at fault: the hub parks it as rejected, with the
    │                  message as its reason, and never retries it
    └── NotKeyableError   the interchange is incomplete (no trailer, ...): never keyed or processed

The parser raises nothing else for any input (`TypeError` only for an argument that is not bytes).
"""

from __future__ import annotations

__all__ = ["EdiSyntaxError", "NotKeyableError"]


class EdiSyntaxError(ValueError):
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
