"""edinbox.edi: X12 and EDIFACT interchanges, their inbox keys and their invoices (a parser with no I/O).

    parse(data: bytes) -> list[Interchange]
    Interchange.message() -> edinbox.Message        the inbox key (see edinbox.edi._key for its format)
    Interchange.invoices() -> list[Invoice]          EDIFACT INVOIC and X12 810
    render_invoice(...) -> bytes                     writes an interchange carrying invoices (tests, demo)

Bad input raises EdiSyntaxError (an edinbox.InboxError and a ValueError) with `offset` and `segment_index`.
"""

from edinbox.edi._errors import EdiSyntaxError, NotKeyableError
from edinbox.edi._interchange import Interchange
from edinbox.edi._invoice import Invoice, InvoiceLine, InvoiceParty
from edinbox.edi._model import EdiMessage, Group, Party, Segment, Separators
from edinbox.edi._parse import parse
from edinbox.edi._render import render_interchange, render_invoice

__all__ = [
    "EdiMessage",
    "EdiSyntaxError",
    "Group",
    "Interchange",
    "Invoice",
    "InvoiceLine",
    "InvoiceParty",
    "NotKeyableError",
    "Party",
    "Segment",
    "Separators",
    "parse",
    "render_interchange",
    "render_invoice",
]
