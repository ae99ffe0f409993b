"""Stored payloads as operators see them: EDI as one segment per line, text as text, anything else as hex.

A preview is bounded (never megabytes on a terminal); the raw bytes go to a file with `show --payload FILE`.
"""

from __future__ import annotations

from dataclasses import dataclass

from edinbox import edi

__all__ = ["MAX_HEX", "MAX_SEGMENTS", "MAX_TEXT", "Preview", "preview"]

MAX_SEGMENTS = 200
"""Segments an EDI preview shows."""
MAX_TEXT = 4000
"""Characters a text preview shows."""
MAX_HEX = 256
"""Bytes a hex preview shows, 16 per line."""


@dataclass(frozen=True, slots=True)
class Preview:
    """What an operator is shown of a payload: its kind ("edi", "text", "binary"), its size, and some lines."""

    kind: str
    size: int
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        """The lines as one string."""
        return "\n".join(self.lines)


def preview(payload: bytes) -> Preview:
    """A bounded view of `payload`: EDI segments one per line, printable text, or a hex dump of its start."""
    try:
        interchanges = edi.parse(payload)
    except edi.EdiSyntaxError:
        interchanges = []
    if interchanges:
        lines: list[str] = []
        for interchange in interchanges:
            lines.extend(_segments(interchange.raw, interchange.separators))
        shown = lines[:MAX_SEGMENTS]
        if len(lines) > MAX_SEGMENTS:
            shown.append(f"... {len(lines) - MAX_SEGMENTS} more segments (show --payload FILE writes them all)")
        return Preview("edi", len(payload), tuple(shown))
    text = _text(payload)
    if text is not None:
        cut = text[:MAX_TEXT]
        lines = cut.splitlines() or [""]
        if len(text) > MAX_TEXT:
            lines.append(f"... {len(text) - MAX_TEXT} more characters (show --payload FILE writes them all)")
        return Preview("text", len(payload), tuple(lines))
    lines = [_hex_line(offset, payload[offset : offset + 16]) for offset in range(0, min(len(payload), MAX_HEX), 16)]
    if len(payload) > MAX_HEX:
        lines.append(f"... {len(payload) - MAX_HEX} more bytes (show --payload FILE writes them all)")
    return Preview("binary", len(payload), tuple(lines))


def _text(payload: bytes) -> str | None:
    """The payload as UTF-8 text when it is that and printable (line breaks and tabs allowed), else None."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any(not (ch.isprintable() or ch in "\r\n\t") for ch in text):
        return None
    return text


def _segments(raw: bytes, separators: edi.Separators) -> list[str]:
    """The segments of one interchange's bytes as written (terminator kept), a released terminator left inside."""
    text = raw.decode("utf-8", errors="replace") if _text(raw) is not None else raw.decode("latin-1")
    terminator, release = separators.segment, separators.release
    out: list[str] = []
    start = index = 0
    while index < len(text):
        if release and text.startswith(release, index):
            index += len(release) + 1  # the released character, whatever it is
            continue
        if text.startswith(terminator, index):
            index += len(terminator)
            segment = text[start:index].strip("\r\n\t ")
            if segment.strip(terminator):
                out.append(segment)
            start = index
            continue
        index += 1
    if rest := text[start:].strip():
        out.append(rest)
    return out


def _hex_line(offset: int, chunk: bytes) -> str:
    """One hexdump line: offset, 16 bytes in hex, and those bytes where printable ASCII."""
    shown = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
    return f"{offset:08x}  {chunk.hex(' '):<47}  |{shown}|"
