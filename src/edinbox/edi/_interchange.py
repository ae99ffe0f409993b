"""The Interchange value: envelope facts, validation problems, the inbox key and the invoices it carries."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from edinbox._message import Message
from edinbox.edi._errors import NotKeyableError
from edinbox.edi._examine import Examined, examine
from edinbox.edi._key import canonical, fingerprint, source
from edinbox.edi._model import Disagreement, EdiMessage, Group, Party, Segment, Separators
from edinbox.edi._tokens import Body

if TYPE_CHECKING:
    from edinbox.edi._invoice import Invoice

__all__ = ["CONTENT_TYPES", "Interchange"]

CONTENT_TYPES = {"EDIFACT": "application/EDIFACT", "X12": "application/EDI-X12"}
"""The MIME type of an interchange of each standard (RFC 1767), as its Message's `content-type` header."""


@dataclass(frozen=True, slots=True)
class Interchange:
    """One interchange (ISA..IEA or [UNA] UNB..UNZ) found in the input.

    `control_number` is ISA13 / UNB 0020 as sent; `sender` and `receiver` ISA05/06, ISA07/08 or UNB S002/S003
    (padding trimmed, release characters resolved); `test` ISA15 = T / UNB 0035 = 1; `prepared_at` ISA09/10 or
    UNB S004 (naive, None when unreadable); `span` the byte range (start, end) in the parsed data, from the header
    (ISA / UNA / UNB) to the trailer's terminator and the line end after it, and `raw` those bytes; `syntax` ISA12
    or UNB S001 ("UNOC:3"). The envelope walk behind `groups`, `messages`, `problems` and `keyable` runs once, on
    first access (parse itself reads the header, so key extraction stays cheap).
    """

    standard: str
    control_number: str
    sender: Party
    receiver: Party
    test: bool
    prepared_at: datetime | None
    span: tuple[int, int]
    syntax: str
    separators: Separators
    raw: bytes = field(repr=False)
    _body: Body = field(repr=False, compare=False)
    _notes: tuple[str, ...] = field(repr=False, compare=False, default=())
    _identified: bool = field(repr=False, compare=False, default=True)
    _walked: Examined | None = field(repr=False, compare=False, default=None, init=False)

    def _examined(self) -> Examined:
        walked = self._walked
        if walked is None:
            walked = examine(self._body, control=self.control_number, notes=self._notes, identified=self._identified)
            object.__setattr__(self, "_walked", walked)  # a cache of a frozen value, computed once on first need
        return walked

    @property
    def groups(self) -> tuple[Group, ...]:
        """The functional groups (GS..GE / UNG..UNE), each with its messages."""
        return self._examined().groups

    @property
    def messages(self) -> tuple[EdiMessage, ...]:
        """Every message (transaction set), in or out of groups, in order."""
        return self._examined().messages

    @property
    def problems(self) -> tuple[str, ...]:
        """Human-readable findings: count and control-number mismatches, missing trailers, header oddities."""
        return self._examined().problems

    @property
    def disagreements(self) -> tuple[Disagreement, ...]:
        """Every trailer that disagrees with what it closes (SE01/SE02, GE01/GE02, IEA01/IEA02; UNT, UNE, UNZ), in
        the order met: each is also among `problems`, and is what an acknowledgment rejects (`received`)."""
        return self._examined().disagreements

    @property
    def header(self) -> Segment:
        """The interchange header (ISA / UNB), built alone."""
        return self._body.split(0)

    @property
    def trailer(self) -> Segment | None:
        """The interchange trailer (IEA / UNZ), None when it is missing."""
        return self._examined().trailer

    @property
    def keyable(self) -> bool:
        """False when the interchange is incomplete (a missing trailer) or unidentifiable: never key it."""
        return self._examined().keyable

    @property
    def identified(self) -> bool:
        """True when the header names its sender, receiver and control number fit for a key: even an incomplete
        interchange then has someone to answer (a rejection); False for one that cannot be told apart."""
        return self._identified

    @property
    def message_types(self) -> tuple[str, ...]:
        """The distinct message types inside, in order of appearance ("INVOIC", "810", "997", "TA1", ...).

        An X12 TA1 (interchange acknowledgment) is a segment, not a transaction set, yet counts as a type here.
        """
        return self._examined().types

    @property
    def source(self) -> str:
        """The inbox source: standard, sender, receiver and test flag (format in `edinbox.edi._key`)."""
        return source(self.standard, self.sender, self.receiver, test=self.test)

    @property
    def key(self) -> tuple[str, str]:
        """The inbox key (source, message id = control number)."""
        return (self.source, self.control_number)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Every segment from the header (ISA / UNB) to the trailer; UNA is not a segment."""
        return self._body.segments()

    def fingerprint(self) -> str:
        """SHA-256 of the normalised segments: equal for re-renderings, different when a value changes."""
        return fingerprint(self._body, self.standard)

    def canonical(self) -> bytes:
        """The bytes whose SHA-256 is `fingerprint()` (its normalised segments after a marker): what an auditor
        hashes to check a journal's fingerprint without edinbox."""
        return canonical(self._body, self.standard)

    def message(self) -> Message:
        """The inbox Message of this interchange; raises NotKeyableError when it is incomplete."""
        if not self.keyable:
            why = "; ".join(self.problems) or "it is incomplete"
            raise NotKeyableError(
                f"the {self.standard} interchange {self.control_number!r} cannot be keyed: {why}",
                offset=self.span[0],
                segment_index=0,
            )
        headers = {
            "content-type": CONTENT_TYPES.get(self.standard, "application/octet-stream"),
            "edi-standard": self.standard,
            "edi-message-types": ",".join(self.message_types),
            "edi-test": "1" if self.test else "0",
        }
        return Message(self.control_number, self.source, self.raw, headers=headers, fingerprint=self.fingerprint())

    def invoices(self) -> list[Invoice]:
        """The invoices of its INVOIC / 810 messages ([] when none); EdiSyntaxError when one is unreadable."""
        return list(self.iter_invoices())

    def iter_invoices(self) -> Iterator[Invoice]:
        """The invoices of `invoices()` one at a time: each message's segments are built while it is read and then
        dropped, so a big interchange is read in the memory of one message and the invoices its caller keeps.
        NotKeyableError at once for an incomplete interchange; EdiSyntaxError when the next invoice is unreadable.
        """
        from edinbox.edi._invoice import read_invoices

        return read_invoices(self)
