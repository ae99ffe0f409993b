"""The tokenizer: one interchange's text into segments, with release characters and line breaks handled.

Text here is the input decoded as Latin-1, so one character is one byte and offsets are byte offsets. Values are
decoded to their real charset (UTF-8 when the interchange is valid UTF-8, else the declared one) only when a
segment is materialised. Released service characters (ISO 9735 §7.1: the release character makes the next
character literal) are swapped for private-use placeholders before splitting, so the fast path is `str.split`.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from operator import itemgetter, methodcaller

from edinbox.edi._model import Segment

__all__ = ["WHITESPACE", "Body", "tokenize"]

WHITESPACE = " \t\r\n\x0b\x0c\x00"
"""Insignificant before a segment tag: indentation, line breaks, NUL (real files indent with TABs)."""

_PLACEHOLDER = 0xE000
_HEAD4 = itemgetter(slice(0, 4))
_LINE_BREAKS = ("\r", "\n", "\r\n")
_PREFIX = 1024
"""Characters before an interchange's segments (UNA, a BOM, skipped bytes) that `_split` still splits and drops."""


@functools.lru_cache(maxsize=64)
def _indented(term: str) -> re.Pattern[str]:
    """Finds a segment that starts with whitespace after `term`."""
    return re.compile(re.escape(term) + "[" + re.escape(WHITESPACE) + "]")


@functools.lru_cache(maxsize=64)
def _bad_head(element: str) -> re.Pattern[str]:
    """Finds a line (the first 4 characters of a segment) that does not start with a tag and `element`."""
    return re.compile("^(?![A-Z0-9]{2,3}(?:" + re.escape(element) + "|$)).*$", re.MULTILINE)


def _wraps(term: str) -> bool:
    """Whether CR/LF are noise (the terminator is something else), so hard-wrapped lines are joined."""
    return term not in _LINE_BREAKS


def tokenize(
    source: str,
    start: int,
    stop: int,
    *,
    element: str,
    component: str,
    term: str,
    release: str | None,
    repetition: str | None,
) -> tuple[list[str], str, dict[int, str] | None]:
    """Split `source[start:stop]` into segment strings; return them, the unterminated tail, and the placeholder
    table used.

    No copy of the text is made when it needs no change (one segment per line counts as none: it is split at
    terminator + line break) and is the end of `source` (see `_split`); otherwise one copy of the part, changed.
    """
    text, cut = source, term
    wrap = _wraps(term)
    if wrap and (source.find("\n", start, stop) >= 0 or source.find("\r", start, stop) >= 0):
        line = _line_after_each(source, start, stop, term)
        if line is not None and (release is None or source.find(release, start, stop) < 0):
            cut = term + line  # the same pieces as without the line breaks, and no copy without them
        else:
            text = source[start:stop].replace("\r", "").replace("\n", "")
            start, stop = 0, len(text)
    table: dict[int, str] | None = None
    if release is not None and text.find(release, start, stop) >= 0:
        service = [c for c in (element, component, term, release, repetition) if c is not None and len(c) == 1]
        placeholders = {c: chr(_PLACEHOLDER + k) for k, c in enumerate(service)}
        table = {ord(p): c for c, p in placeholders.items()}

        def swap(match: re.Match[str]) -> str:
            char = match.group(1)
            return placeholders.get(char, char)

        text = re.sub(re.escape(release) + "(.)", swap, text[start:stop], flags=re.DOTALL)
        start, stop = 0, len(text)
    pieces = _split(text, start, stop, cut)
    tail = pieces.pop()
    if not wrap:
        pieces = [p.strip("\r\n").lstrip(WHITESPACE) for p in pieces]
    elif _indented(cut).search(text, start, stop) or text[start : start + 1] in WHITESPACE:
        pieces = [p.lstrip(WHITESPACE) for p in pieces]
    if "" in pieces:
        pieces = [p for p in pieces if p]
    return pieces, tail.strip(WHITESPACE), table


def _split(text: str, start: int, stop: int, cut: str) -> list[str]:
    """`text[start:stop].split(cut)`, without that copy when the part is the end of `text` and follows a `cut` at
    most `_PREFIX` characters in (the UNA, a BOM, bytes before the header): the pieces before it are dropped."""
    if stop == len(text) and (start == 0 or (len(cut) <= start <= _PREFIX and text.startswith(cut, start - len(cut)))):
        pieces = text.split(cut)
        if start:
            del pieces[: text.count(cut, 0, start)]
        return pieces
    return text[start:stop].split(cut)


def _line_after_each(text: str, start: int, stop: int, term: str) -> str | None:
    """The line break ("\\n" or "\\r\\n") that follows every terminator of `text[start:stop]` and stands nowhere
    else in it, or None.

    Then splitting at terminator + line break gives the pieces that splitting at the terminator would give once the
    line breaks are taken out (no line break is inside a segment), and no copy of the text without them is needed.
    """
    feeds = text.count("\n", start, stop)
    returns = text.count("\r", start, stop)
    line = "\r\n" if returns else "\n"
    if returns not in (0, feeds) or text.count(term, start, stop) != feeds:
        return None
    return line if text.count(term + line, start, stop) == feeds else None


class Body:
    """The tokens of one interchange: segment strings plus what is needed to materialise them lazily."""

    __slots__ = (
        "_cache",
        "_convert",
        "_starts",
        "base",
        "codec",
        "component",
        "element",
        "memo",
        "raw",
        "release",
        "repetition",
        "segs",
        "standard",
        "stop",
        "table",
        "tail",
        "term",
    )

    def __init__(
        self,
        *,
        source: str,
        raw: bytes,
        start: int,
        stop: int,
        element: str,
        component: str,
        term: str,
        release: str | None,
        repetition: str | None,
    ) -> None:
        self.raw = raw
        """The input this interchange is a part of, `base` to `stop`, as bytes: the decoded `source` is not kept
        (its offsets are only needed for errors), so it is let go once every interchange is tokenized."""
        self.base = start
        self.stop = stop
        self.element = element
        self.component = component
        self.term = term
        self.release = release
        self.repetition = repetition
        self.segs, self.tail, self.table = tokenize(
            source, start, stop, element=element, component=component, term=term, release=release, repetition=repetition
        )
        self.codec: str | None = None
        self._convert = self._converter()
        self._cache: list[Segment] | None = None
        self._starts: list[int] | None = None
        self.memo: dict[str, str] = {}
        self.standard = ""

    # -- values ---------------------------------------------------------------------------------------------
    def set_codec(self, codec: str | None) -> None:
        """Decode non-ASCII values with `codec` (None: Latin-1, i.e. the bytes as they are)."""
        self.codec = codec
        self._convert = self._converter()
        self._cache = None

    def _converter(self) -> Callable[[str], str] | None:
        """A function restoring released characters and decoding non-ASCII values, or None when not needed."""
        table, codec = self.table, self.codec
        if table is None and codec is None:
            return None

        def convert(value: str) -> str:
            if value.isascii():
                return value
            if table is not None:
                value = value.translate(table)
            if codec is not None:
                value = value.encode("latin-1").decode(codec, "replace")
            return value

        return convert

    def split(self, index: int) -> Segment:
        """Materialise segment `index` into a Segment (ISA elements are not split into components)."""
        parts = self.segs[index].split(self.element)
        tag = parts[0]
        convert = self._convert
        comp = self.component
        elements: tuple[tuple[str, ...], ...]
        if convert is None:
            if tag == "ISA":
                elements = tuple([(p,) for p in parts[1:]])
            else:
                elements = tuple([tuple(p.split(comp)) if comp in p else (p,) for p in parts[1:]])
        elif tag == "ISA":
            elements = tuple([(convert(p),) for p in parts[1:]])
        else:
            elements = tuple([tuple(map(convert, p.split(comp))) if comp in p else (convert(p),) for p in parts[1:]])
        return Segment(tag, elements)

    def pair(self, index: int) -> tuple[str, str]:
        """Elements 1 and 2 of segment `index` (first components), as the three trailers carry them."""
        parts = self.segs[index].split(self.element, 3)
        values = [p.split(self.component, 1)[0] for p in parts[1:3]]
        values += [""] * (2 - len(values))
        convert = self._convert
        if convert is not None:
            values = [convert(v) for v in values]
        return values[0], values[1]

    def segments(self, start: int = 0, stop: int | None = None) -> tuple[Segment, ...]:
        """Materialised segments [start, stop).

        All of them (the default range) are kept once built, for `Interchange.segments`; a narrower range (one
        message's) is built from that list when it exists and otherwise on its own and not kept, so reading the
        messages of a big interchange one after another holds one message's segments at a time.
        """
        cache = self._cache
        if cache is not None:
            return tuple(cache[start:stop])
        if start == 0 and stop is None:
            cache = self._cache = self._materialise(0, len(self.segs))
            return tuple(cache)
        first, last, _ = slice(start, stop).indices(len(self.segs))
        return tuple(self._materialise(first, last))

    def _materialise(self, start: int, stop: int) -> list[Segment]:
        """Segments [start, stop) as Segments; the common case (ASCII, no release) is one comprehension."""
        if self._convert is not None:
            return [self.split(i) for i in range(start, stop)]
        comp = self.component
        make = Segment
        out = [
            make(parts[0], tuple([tuple(p.split(comp)) if comp in p else (p,) for p in parts[1:]]))
            for parts in map(methodcaller("split", self.element), self.segs[start:stop])
        ]
        if out and start == 0 and out[0].tag == "ISA":  # ISA16 is the component separator: never split the ISA
            out[0] = self.split(0)
        return out

    def bad_tag(self) -> str | None:
        """A finding about a segment whose tag is not 2-3 upper-case letters or digits, or None."""
        element = self.element
        heads = set(map(_HEAD4, self.segs))
        joined = "\n".join(heads)
        if joined.count("\n") != len(heads) - 1:  # a segment's head itself holds a line feed
            joined = "\n".join(h.replace("\n", "\x00") for h in heads)
        bad = _bad_head(element).search(joined)
        if bad is None:
            return None
        found = bad.group()
        index = next((i for i, s in enumerate(self.segs) if s[:4].replace("\n", "\x00") == found), 0)
        return (
            f"segment {index} at byte {self.offset(index)} ({self.segs[index][:20]!r}) does not start with a tag "
            f"of 2-3 letters or digits followed by the element separator {element!r}: the interchange is not keyed"
        )

    # -- offsets (slow path, only for errors and problems) ---------------------------------------------------
    def offset(self, index: int) -> int:
        """Absolute byte offset of segment `index` (len(segs) = the unterminated tail)."""
        if self._starts is None:
            self._starts = self._compute_starts()
        starts = self._starts
        return self.base + (starts[index] if index < len(starts) else starts[-1])

    def _compute_starts(self) -> list[int]:
        """Replay the tokenizer with positions: raw start of each kept segment, then of the tail."""
        raw = self.raw[self.base : self.stop].decode("latin-1")
        term = self.term
        removed: list[int] = []
        text = raw
        if _wraps(term) and ("\n" in raw or "\r" in raw):
            removed = [m.start() for m in re.finditer("[\r\n]", raw)]
            text = raw.replace("\r", "").replace("\n", "")
        shifted = [p - k for k, p in enumerate(removed)]
        ends: list[int] = []
        if self.release is not None:
            pattern = re.escape(self.release) + ".|" + re.escape(term)
            ends = [m.start() for m in re.finditer(pattern, text, re.DOTALL) if m.group() == term]
        else:
            at = text.find(term)
            while at >= 0:
                ends.append(at)
                at = text.find(term, at + len(term))
        starts: list[int] = []
        begin = 0
        for end in ends:
            piece = text[begin:end]
            kept = piece.lstrip(WHITESPACE) if _wraps(term) else piece.strip("\r\n").lstrip(WHITESPACE)
            if kept:
                starts.append(begin + piece.find(kept[:1]))
            begin = end + len(term)
        starts.append(begin)
        return [s + bisect.bisect_right(shifted, s) for s in starts]
