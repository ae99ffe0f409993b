"""Hand-written interchanges, each reproducing one quirk seen in real partner files (no copied samples)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

from edinbox.edi import Invoice, InvoiceLine, InvoiceParty, Party


def _corpus() -> Path:
    """The shared corpus folder `shared/edi-samples` beside the repository or one of its parents (a worktree)."""
    parents = Path(__file__).resolve().parents
    found = (p / "shared" / "edi-samples" for p in parents if (p / "shared" / "edi-samples").is_dir())
    return next(found, parents[2].parent / "shared" / "edi-samples")


CORPUS = _corpus()
"""Real partner files, never copied into the repository; tests that read them skip where it is absent."""

# A clean X12 004010 810: fixed-width ISA, `*` elements, `>` components, `~` terminators, one invoice.
X12_810 = (
    b"ISA*00*          *00*          *ZZ*ACME           *ZZ*HUB            *261130*1205*U*00401*000000905*0*P*>~"
    b"GS*IN*ACME*HUB*20261130*1205*905*X*004010~"
    b"ST*810*0001~"
    b"BIG*20261130*INV-905*****DI~"
    b"CUR*SE*EUR~"
    b"N1*SE*ACME GMBH*92*4000001000005~"
    b"N1*BY*HUB AG*92*4000002000002~"
    b"IT1*1*2*EA*50.00**VP*W-1~"
    b"PID*F****WIDGET~"
    b"IT1*2*1*EA*0.5**VP*W-2~"
    b"TDS*11960~"
    b"TXI*VA*19.10~"
    b"CTT*2~"
    b"SE*12*0001~"
    b"GE*1*905~"
    b"IEA*1*000000905~"
)

# The same interchange re-written: pipes and carets, CRLF line ends as terminators, NBSP padding, TAB
# indentation, a trailing empty element, a BOM.
X12_810_REWRITTEN = (
    b"\xef\xbb\xbf\r\n"
    b"ISA|00|\xc2\xa0|00|\xc2\xa0|ZZ|ACME\xc2\xa0\xc2\xa0|ZZ|HUB \xc2\xa0|261130|1205|U|00401|000000905|0|P|^\r\n"
    b"GS|IN|ACME|HUB|20261130|1205|905|X|004010\r\n"
    b"ST|810|0001\r\n"
    b"\tBIG|20261130|INV-905|||||DI\r\n"
    b"\tCUR|SE|EUR\r\n"
    b"\tN1|SE|ACME GMBH|92|4000001000005\r\n"
    b"\tN1|BY|HUB AG|92|4000002000002\r\n"
    b"\tIT1|1|2|EA|50.00||VP|W-1\r\n"
    b"\tPID|F||||WIDGET\r\n"
    b"\tIT1|2|1|EA|0.5||VP|W-2||\r\n"
    b"\tTDS|11960\r\n"
    b"\tTXI|VA|19.10\r\n"
    b"\tCTT|2\r\n"
    b"SE|12|0001\r\n"
    b"GE|1|905\r\n"
    b"IEA|1|000000905\r\n"
)

# A clean EDIFACT D.96A INVOIC without UNA (level A defaults), release characters in data.
EDIFACT_INVOIC = (
    b"UNB+UNOC:3+4000001000005:14+4000002000002:14+261130:1205+INV0000000905'"
    b"UNH+1+INVOIC:D:96A:UN:EAN008'"
    b"BGM+380+INV-905+9'"
    b"DTM+137:20261130:102'"
    b"NAD+SU+4000001000005::9++ACME GMBH'"
    b"NAD+BY+4000002000002::9++HUB?+CO AG'"
    b"CUX+2:EUR:4'"
    b"LIN+1++W-1:EN'"
    b"QTY+47:2'"
    b"MOA+203:100.00'"
    b"PRI+AAA:50.00'"
    b"LIN+2++W-2:EN'"
    b"QTY+47:1'"
    b"MOA+203:0.50'"
    b"PRI+AAA:0.5'"
    b"UNS+S'"
    b"MOA+77:119.60'"
    b"MOA+176:19.10'"
    b"UNT+18+1'"
    b"UNZ+1+INV0000000905'"
)

# The same interchange with a UNA (`=*,! ~`, comma decimals), hard-wrapped every 15 characters with CRLF.
_UNA_TEXT = (
    b"UNA=*,! ~UNB*UNOC=3*4000001000005=14*4000002000002=14*261130=1205*INV0000000905~"
    b"UNH*1*INVOIC=D=96A=UN=EAN008~BGM*380*INV-905*9~DTM*137=20261130=102~"
    b"NAD*SU*4000001000005==9**ACME GMBH~NAD*BY*4000002000002==9**HUB+CO AG~CUX*2=EUR=4~"
    b"LIN*1**W-1=EN~QTY*47=2~MOA*203=100,00~PRI*AAA=50,00~"
    b"LIN*2**W-2=EN~QTY*47=1~MOA*203=0,50~PRI*AAA=0,5~"
    b"UNS*S~MOA*77=119,60~MOA*176=19,10~UNT*18*1~UNZ*1*INV0000000905~"
)
EDIFACT_INVOIC_WRAPPED = b"\r\n".join(_UNA_TEXT[k : k + 15] for k in range(0, len(_UNA_TEXT), 15))


def edifact_orders(reference: bytes, *, sender: bytes = b"SENDER", trailer: bool = True) -> bytes:
    """A small EDIFACT ORDERS interchange with control reference `reference` (UNZ optional)."""
    data = (
        b"UNA:+.? 'UNB+UNOA:3+" + sender + b":ZZZ+HUB:ZZZ+261130:1205+" + reference + b"'"
        b"UNH+M1+ORDERS:D:96A:UN'BGM+220+PO-1+9'UNT+3+M1'"
    )
    return data + (b"UNZ+1+" + reference + b"'" if trailer else b"")


# The INVOIC above with a longer UNB (password, application reference "EAN", priority 1), no UNA, hard-wrapped at
# 80 columns with CRLF: the first line holds no apostrophe and the second starts "EAN+1'", a tag-like start that
# is not a segment.
_LONG_UNB = EDIFACT_INVOIC.replace(b"+INV0000000905'UNH", b"+INV0000000905+PASSWORD+EAN+1'UNH", 1)
EDIFACT_INVOIC_WRAPPED_80 = b"\r\n".join(_LONG_UNB[k : k + 80] for k in range(0, len(_LONG_UNB), 80))

ACME, HUB = Party("ZZ", "ACME"), Party("ZZ", "HUB")
"""A partner and the hub, as the rendering and acknowledgment tests address each other."""

INVOICE = Invoice(
    number="INV-1",
    issue_date=date(2026, 11, 30),
    kind="invoice",
    seller=InvoiceParty("ACME", "Acme"),
    buyer=InvoiceParty("HUB", "Hub"),
    currency="EUR",
    total=Decimal("11.90"),
    tax_total=Decimal("1.90"),
    lines=[InvoiceLine(Decimal("1"), Decimal("10.00"), Decimal("10.00"))],
)
"""One invoice of one line, rendered by the writer tests."""
