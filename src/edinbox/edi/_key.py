"""The inbox key of an interchange: its source string, and the fingerprint of its normalised segments.

Source: ``"<standard>:<sender qualifier>:<sender id>><receiver qualifier>:<receiver id>"``, with ``";test"``
appended for test interchanges (ISA15 = T, UNB 0035 = 1), e.g. ``"X12:ZZ:ACME>ZZ:HUB"`` and
``"EDIFACT:14:5400110000009>14:5013546107732;test"``. Qualifiers and ids are un-escaped and right-trimmed of
padding (spaces, NBSP) and then percent-encoded (``%``, ``:``, ``>``, ``;``, spaces, controls and non-ASCII
as UTF-8 ``%XX``), so the string is unambiguous and reversible. The message id is the control number as sent
(ISA13 / UNB 0020, leading zeros kept).

Fingerprint: SHA-256 of the segments from header to trailer (not UNA) rewritten with canonical separators, after
un-escaping release characters, dropping CR/LF and indentation, dropping trailing empty elements and components,
right-trimming ISA elements (padding), and, in EDIFACT, writing a comma decimal mark as a point in any value that
is a plain decimal number. Separators, line breaks, padding, a BOM or the UNA decimal mark change nothing; any
changed value (an amount) changes it. Values are compared as bytes: re-encoding text in another charset counts
as a change.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from urllib.parse import quote

from edinbox.edi._model import Party
from edinbox.edi._tokens import Body

__all__ = ["canonical", "fingerprint", "partner", "source"]

_PLAIN = re.compile("[A-Za-z0-9._-]*")
_SAFE = "!#$&'()*+,-./<=?@[]^_`{|}~"
# Tried only where a run of separators starts, and never backtracked into: a long run that ends in a value (not
# an element separator) costs one pass, not one pass per character of it.
_TRAILING_COMPONENTS = re.compile("(?<![\x1f\x1e])[\x1f\x1e]++(?=\x1d)")
_COMMA = re.compile(",[0-9]+(?=[\x1c\x1d\x1e\x1f]|\\Z)")
_PADDING = " \xa0\xc2"  # space, and NBSP as Latin-1 (A0) or UTF-8 (C2 A0) bytes
_CHUNK = 4096
"""Segments normalised and hashed at a time."""


def _points(text: str) -> str:
    """Write the comma of every value that is a plain decimal number ("-12,5", ",5") as a point."""
    chars: list[str] | None = None
    for match in _COMMA.finditer(text):
        at = match.start()
        begin = at
        while begin > 0 and "0" <= text[begin - 1] <= "9":
            begin -= 1
        if begin > 0 and text[begin - 1] == "-":
            begin -= 1
        if begin == 0 or text[begin - 1] in "\x1d\x1e\x1f":
            if chars is None:
                chars = list(text)
            chars[at] = "."
    return text if chars is None else "".join(chars)


def source(standard: str, sender: Party, receiver: Party, *, test: bool) -> str:
    """The inbox source of an interchange: standard, sender and receiver (qualifier, id) and the test flag."""
    parts = [
        p if _PLAIN.fullmatch(p) else quote(p, safe=_SAFE)
        for p in (sender.qualifier, sender.id, receiver.qualifier, receiver.id)
    ]
    text = f"{standard}:{parts[0]}:{parts[1]}>{parts[2]}:{parts[3]}"
    return text + ";test" if test else text


def partner(source_text: str) -> str:
    """The sender (`qualifier:id`) of an interchange's inbox source, e.g. `ZZ:ACME` of `X12:ZZ:ACME>ZZ:HUB`;
    "" for a source that is not an interchange's (a broker's coordinates)."""
    head, arrow, _ = source_text.partition(">")
    _standard, colon, sender = head.partition(":")
    return sender if arrow and colon else ""


def fingerprint(body: Body, standard: str) -> str:
    """SHA-256 (hex) of the interchange's normalised segments (see the module docstring).

    The segments are normalised and hashed `_CHUNK` at a time, so a big interchange never has a second copy of
    its text in memory; every rule is local to a segment, and a chunk after the first starts with the segment
    separator it follows, so the digest is the one of the whole text normalised at once.
    """
    cached = body.memo.get("fingerprint")
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    _canonical(body, standard, digest.update)
    hexdigest = digest.hexdigest()
    body.memo["fingerprint"] = hexdigest
    return hexdigest


def canonical(body: Body, standard: str) -> bytes:
    """The bytes whose SHA-256 is the interchange's fingerprint: a marker, then its normalised segments (see the
    module docstring), so that `sha256sum` over them checks a fingerprint without edinbox."""
    chunks: list[bytes] = []
    _canonical(body, standard, chunks.append)
    return b"".join(chunks)


def _canonical(body: Body, standard: str, write: Callable[[bytes], object]) -> None:
    """Write the fingerprint's input to `write`, `_CHUNK` segments at a time."""
    table: dict[int, str] = {ord(body.element): "\x1d", ord(body.component): "\x1f"}
    if body.repetition is not None and len(body.repetition) == 1:
        table[ord(body.repetition)] = "\x1e"
    if body.table is not None:
        table.update(body.table)
    segs = body.segs
    write(b"edinbox-edi-1\x1c")
    first = 0
    if standard == "X12" and segs:
        isa = [p.rstrip(_PADDING) for p in segs[0].split(body.element)]
        if len(isa) == 17:
            del isa[16]  # ISA16 is the component separator itself
            if body.repetition is not None:
                isa[11] = "REP"  # ISA11 is the repetition separator from 00402 on
        write(_normalised("\x1d".join(isa), standard).encode("latin-1", "replace"))
        first = 1
    for at in range(first, len(segs), _CHUNK):
        text = "\x1c".join(segs[at : at + _CHUNK]).translate(table)
        if at:
            text = "\x1c" + text
        write(_normalised(text, standard).encode("latin-1", "replace"))


def _normalised(text: str, standard: str) -> str:
    """Segments joined by \\x1c with canonical separators, without trailing empty elements and components, and
    EDIFACT decimal commas written as points."""
    text = "\x1c".join([s.rstrip("\x1d\x1e\x1f") for s in text.split("\x1c")])
    # regular expressions only when a middle element needs it
    if "\x1f\x1d" in text or "\x1e\x1d" in text:
        text = _TRAILING_COMPONENTS.sub("", text)
    if standard == "EDIFACT" and "," in text:
        text = _points(text)
    return text
