"""edinbox.edi: X12 and EDIFACT interchanges, their inbox keys and their invoices (a parser with no I/O).

    parse(data: bytes) -> list[Interchange]
    Interchange.message() -> edinbox.Message        the inbox key (format in edinbox.edi._key)
    Interchange.invoices() -> list[Invoice]          EDIFACT INVOIC and X12 810 (finite Decimal money)
    Interchange.iter_invoices() -> Iterator[Invoice] the same one at a time, in the memory of one message
    Invoice.without_lines()                          the totals and `line_count` only, for a big interchange
    Interchange.message_types                        "INVOIC", "810", "997", "TA1" (an X12 TA1 counts), ...
    Interchange.disagreements -> tuple[Disagreement]  trailers that disagree with their content, with their codes
    render_invoice(...) / render_interchange(...)    write interchanges: invoices, acknowledgments (demo, tests)
    validate(interchange, overlay) -> Validation     its messages checked against the shipped implementation guides
                                                     (X12 810 004010/005010, EDIFACT INVOIC D96A/D01B): every error
                                                     with its position and X12 codes (docs/validation.md)
    received(interchange) -> Received                what acknowledging it needs (ISA14 / UNB 0031, groups, errors)
    replies(received, kind) / render_reply(...)      its TA1, 997, 999 or CONTRL (duplicate=True: the notice)

Accepted: several interchanges per input (X12 and EDIFACT mixed, each with its own separators); a UTF-8 BOM,
whitespace, NUL or SUB around interchanges and non-EDI bytes before the first one (reported); X12 ISA read by its
fixed positions (any release 00300..00801), or by counting separators when unpadded or NBSP-padded (reported);
ISA11 as repetition separator from 00402 unless a letter; a multi-byte UTF-8 terminator; CR/LF as terminator, or
as noise anywhere (hard-wrapped lines, inside values and the ISA) when the terminator is something else; a line
break at ISA position 106 with the terminator starting the next lines (reported); TAB or space indentation;
ISB/ISE/TA1; GS/GE, ST/SE; UNA with any service characters, level A defaults without UNA, level B (IS1/IS3/IS4);
release characters everywhere including UNB, with `??'` / `???'` parity; UNG/UNE, UNH/UNT; text decoded as
UTF-8 when valid, else per UNB's syntax identifier (UNOC Latin-1, UNOD..UNOK ISO 8859-x), else Latin-1. A
truncated interchange ends where the next begins: after a terminator, at the start of a line, or at a UNA+UNB or
a fixed-width ISA anywhere (a next interchange glued mid-line without UNA or fixed-width ISA is not found).
Reported as problems, still keyable: trailer count and control-number mismatches (SE01/SE02, GE01/GE02,
IEA01/IEA02, UNT, UNE, UNZ: also `disagreements`, counts read as numbers and control numbers matched as numbers when
both are digits, "0001" is "1"), an unreadable ISA09/UNB S004 date, a non-9-digit ISA13, segments outside messages.
An acknowledgment (`received`) rejects every disagreement, so the hub parks such an interchange whole whether or not
it answers the partner: a partner told "rejected" sends a corrected interchange under a new key.
Read but never keyed (`keyable` False, message() and invoices() raise NotKeyableError): a missing or unterminated
IEA/UNZ (truncated data), a message or group without its trailer, an empty control number or sender id, a
segment whose tag is not 2-3 upper-case letters or digits, a control number or source that cannot be an inbox
key (a NUL, over 512 bytes), and EDIFACT without UNA whose segments end at line breaks instead of apostrophes
(a UNB line without an apostrophe followed by a whole UNG or UNH line; a hard wrap is not taken for that).
Refused with EdiSyntaxError (byte offset, segment index, a sentence): empty input, no ISA/UNA/UNB, data after
the last interchange, a truncated header (ISA without 16 elements, UNA shorter than 9 bytes, unterminated UNB),
separators that are letters, digits, spaces or not distinct, UNB without UNA followed by anything but `+` or IS3,
and (from invoices()) a missing or malformed mandatory invoice field, a number over 35 characters or an
impossible date. EdiSyntaxError is a ValueError about the data, not an `edinbox.InboxError`: nothing else comes
out of the parser for any bytes. Parse time is linear in the input (blank lines, glued interchanges included).
Memory too: parse keeps the text and its segment strings (about 4x the input); a message's segments are built
while it is read and dropped after (only `Interchange.segments`, all of them, is kept once asked for).
"""

from edinbox.edi._acknowledge import (
    ACKNOWLEDGMENT_TYPES,
    PARTY_ERRORS,
    Received,
    ReceivedGroup,
    ReceivedSet,
    party_error,
    received,
    render_reply,
    replies,
    reply_key,
)
from edinbox.edi._errors import EdiSyntaxError, Finding, NotKeyableError
from edinbox.edi._guide import GUIDES, Guide, Overlay, guide, load
from edinbox.edi._interchange import Interchange
from edinbox.edi._invoice import Invoice, InvoiceLine, InvoiceParty
from edinbox.edi._key import partner
from edinbox.edi._model import Disagreement, EdiMessage, Group, Party, Segment, Separators
from edinbox.edi._parse import parse
from edinbox.edi._render import Acknowledgment, RenderOptions, Reply, render_interchange, render_invoice
from edinbox.edi._validate import MAX_FINDINGS, Validation, check, validate

__all__ = [
    "ACKNOWLEDGMENT_TYPES",
    "GUIDES",
    "MAX_FINDINGS",
    "PARTY_ERRORS",
    "Acknowledgment",
    "Disagreement",
    "EdiMessage",
    "EdiSyntaxError",
    "Finding",
    "Group",
    "Guide",
    "Interchange",
    "Invoice",
    "InvoiceLine",
    "InvoiceParty",
    "NotKeyableError",
    "Overlay",
    "Party",
    "Received",
    "ReceivedGroup",
    "ReceivedSet",
    "RenderOptions",
    "Reply",
    "Segment",
    "Separators",
    "Validation",
    "check",
    "guide",
    "load",
    "parse",
    "partner",
    "party_error",
    "received",
    "render_interchange",
    "render_invoice",
    "render_reply",
    "replies",
    "reply_key",
    "validate",
]
