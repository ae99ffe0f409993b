"""What the first bytes of an interchange say: its standard, separators and where its segments start."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Head", "utf8_char"]


@dataclass(slots=True)
class Head:
    """Separators and start of one interchange, found before tokenizing it (offsets are absolute bytes)."""

    standard: str
    start: int
    body_start: int
    element: str
    component: str
    term: str
    release: str | None = None
    repetition: str | None = None
    decimal: str = "."
    problems: list[str] = field(default_factory=list)
    keyable: bool = True


def utf8_char(text: str, at: int) -> str:
    """The character at `at` of Latin-1 text, extended to a whole UTF-8 sequence when one starts there."""
    lead = ord(text[at])
    size = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF4 else 1
    if size > 1:
        candidate = text[at : at + size]
        try:
            if len(candidate.encode("latin-1").decode("utf-8")) == 1:
                return candidate
        except UnicodeDecodeError:
            pass
    return text[at]
