"""`parse`: split bytes into interchanges (several per input, each with its own separators) and read them."""

from __future__ import annotations

import functools
import re
from datetime import datetime

from edinbox._core import MAX_KEY_BYTES, key_problem
from edinbox.edi import _edifact, _x12
from edinbox.edi._errors import EdiSyntaxError
from edinbox.edi._head import Head
from edinbox.edi._interchange import Interchange
from edinbox.edi._key import source
from edinbox.edi._model import Party, Separators
from edinbox.edi._tokens import Body

__all__ = ["parse"]

_HEADER = re.compile(r"ISA(?=[^A-Za-z0-9 \t\r\n])|UNA(?=[^A-Za-z0-9])|UNB(?=[^A-Za-z0-9 \t\r\n])")
_GAP = re.compile("(?:\xef\xbb\xbf|[ \t\r\n\x0b\x0c\x00\x1a])*")  # BOM, whitespace, NUL, SUB (DOS end of file)
_GAP_CHARS = " \t\r\n\x0b\x0c\x00\x1a"
_HEADERS = r"(?P<header>ISA(?=[^A-Za-z0-9 \t\r\n])|UNA(?=[^A-Za-z0-9])|UNB(?=[^A-Za-z0-9 \t\r\n]))"


def parse(data: bytes) -> list[Interchange]:
    """Every interchange in `data`, in order; EdiSyntaxError (with byte offset) when the bytes are not EDI."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"parse() takes bytes, not {type(data).__name__}")
    raw = data if type(data) is bytes else bytes(data)
    text = raw.decode("latin-1")
    n = len(text)
    pos = _gap(text, 0)
    if pos >= n:
        raise EdiSyntaxError("the data is empty: no interchange header (ISA, UNA or UNB)", offset=0)
    found: list[Interchange] = []
    cuts = _Cuts(text)
    while pos < n:
        match = _HEADER.search(text, pos)
        prefix: list[str] = []
        if match is None or (found and match.start() != pos):
            what = "the data" if not found else "the data after the last interchange"
            raise EdiSyntaxError(
                f"{what} is not an interchange: expected ISA, UNA or UNB, found {text[pos : pos + 12]!r}", offset=pos
            )
        if match.start() != pos:
            skipped = text[pos : match.start()]
            prefix.append(f"{len(skipped)} bytes before the interchange header were skipped: {skipped[:40]!r}")
        start = match.start()
        head = _x12.x12_head(text, start) if text.startswith("ISA", start) else _edifact.edifact_head(text, start)
        head.problems[:0] = prefix
        end, closed = _find_end(text, head, cuts)
        if not closed:  # ran to the end of the data: the span stops at its last non-blank byte
            span_end = end
            while span_end > start and text[span_end - 1] in _GAP_CHARS:
                span_end -= 1
        else:  # after a terminator: the span takes the line end that follows it, so spans tile the input
            span_end = end
            if text.startswith("\r\n", end):
                span_end += 2
            elif text[end : end + 1] in ("\r", "\n"):
                span_end += 1
        found.append(_build(raw, text, head, end, span_end))
        pos = _gap(text, end)
    return found


def _gap(text: str, pos: int) -> int:
    match = _GAP.match(text, pos)
    return match.end() if match else pos


def _released(text: str, at: int, release: str, wrap: bool) -> bool:
    """Whether the character at `at` is preceded by an odd run of release characters (CR/LF skipped if noise)."""
    count = 0
    at -= 1
    while at >= 0:
        char = text[at]
        if char == release:
            count += 1
        elif not (wrap and char in "\r\n"):
            break
        at -= 1
    return count % 2 == 1


def _blank(term: str) -> bool:
    """Whether the terminator is itself a blank (a line break, TAB, NUL...), so blank lines may hold it."""
    return term in _GAP_CHARS or term == "\r\n"


@functools.lru_cache(maxsize=64)
def _ends(standard: str, term: str, element: str) -> re.Pattern[str]:
    """Finds the interchange trailer or the next interchange's header, after a terminator and blanks.

    For a blank terminator (a line break) the pattern starts at the tag and `_find_end` looks for the terminator
    among the blanks before it: "terminator, blanks, tag" would be tried again at every blank line of a run and
    read the rest of the run each time (quadratic). Any other terminator leads the pattern (a fast literal scan).
    """
    noise = "[\r\n]*" if term not in ("\r", "\n", "\r\n") else ""
    trailer = "IEA" if standard == "X12" else "UNZ"
    tags = "(?P<trailer>" + noise.join(trailer) + ")" + noise + re.escape(element) + "|" + _HEADERS
    if _blank(term):
        return re.compile(tags)
    return re.compile(re.escape(term) + "[" + re.escape(_GAP_CHARS) + "]*(?:" + tags + ")")


# A fixed-width ISA (X12.5 widths 2/10/2/10/2/15/2/15/6/4/1/5/9/1/1) or a UNA followed by UNB starts a new
# interchange wherever it is: an ISA's element separator cannot occur inside a value, so sixteen of them at these
# distances are no accident. So does a header at the start of a line (the next file after a truncated one).
_FIXED_ISA = re.compile(
    "ISA(?P<sep>[^A-Za-z0-9 \t\r\n])"
    + "".join(f"[^\r\n]{{{gap}}}(?P=sep)" for gap in (2, 10, 2, 10, 2, 15, 2, 15, 6, 4, 1, 5, 9, 1, 1))
)
_TAGS = ("ISA", "UNA", "UNB")
_UNA_UNB = re.compile("UNA[^\r\n]{6}[ \t\r\n]*UNB")
# At the start of a line a header must look like one: ISA01 between two separators, or UNB S001 ("UNOC:3").
_LINE_HEADER = re.compile(
    "ISA(?P<sep>[^A-Za-z0-9 \t\r\n])[^\r\n]{2}(?P=sep)"
    "|UNA[^\r\n]{6}[ \t\r\n]*UNB"
    "|UNB[^A-Za-z0-9 \t\r\n][A-Z]{4}[^A-Za-z0-9 \t\r\n][0-9]"
)


class _Cuts:
    """Where a next interchange surely begins without a terminator before it, each stretch of text read once.

    One search serves every interchange that starts before the cut it found, and each tag's next occurrence is
    remembered: glued interchanges never make the parser read the rest of the data again for each of them.
    """

    __slots__ = ("_at", "_before", "_best", "_next", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._at = -1  # where the last search started; its answer holds for any later start before `_before`
        self._best = len(text)
        self._before = -1  # nothing searched yet
        self._next = dict.fromkeys(_TAGS, -1)  # each tag's first occurrence after some earlier start

    def after(self, at: int) -> int:
        """The first sure interchange start after `at` (len(text) when none)."""
        if not (self._at <= at < self._before):
            self._search(at)
        return self._best

    def _occurrence(self, tag: str, at: int) -> int:
        """The first occurrence of `tag` at or after `at` (len(text) when none)."""
        found = self._next[tag]
        if found < at:
            found = self._text.find(tag, at)
            self._next[tag] = found = len(self._text) if found < 0 else found
        return found

    def _search(self, at: int) -> None:
        text, end = self._text, len(self._text)
        best = before_best = end
        pending = {tag: self._occurrence(tag, at) for tag in _TAGS}
        while True:
            tag = min(pending, key=pending.__getitem__)
            found = pending[tag]
            if found >= end:
                break
            before = found
            while before > at and text[before - 1] in " \t":
                before -= 1
            line_start = before > at and text[before - 1] in "\r\n" and _LINE_HEADER.match(text, found)
            if (
                line_start
                or (tag == "ISA" and _FIXED_ISA.match(text, found))
                or (tag == "UNA" and _UNA_UNB.match(text, found))
            ):
                # a start on its own line is only sure for searches that begin before its indentation
                best, before_best = found, (before if line_start else found + 1)
                break
            pending[tag] = self._occurrence(tag, found + 1)
        self._at, self._best, self._before = at, best, before_best


def _blank_term_before(text: str, tag: int, floor: int, head: Head) -> int:
    """Where an unreleased blank terminator stands among the blanks before a tag at `tag`; -1 when none."""
    term, release = head.term, head.release
    run = tag
    while run > floor and text[run - 1] in _GAP_CHARS:
        run -= 1
    stop = text.find(term, run, tag)
    while stop >= 0 and release is not None and _released(text, stop, release, _wraps(term)):
        stop = text.find(term, stop + 1, tag)
    return stop


def _wraps(term: str) -> bool:
    """Whether CR/LF are noise (the terminator is something else), so hard-wrapped lines are joined."""
    return term not in ("\r", "\n", "\r\n")


def _find_end(text: str, head: Head, cuts: _Cuts) -> tuple[int, bool]:
    """End of the interchange (after its trailer's terminator, or before the next header, or the end of the data)
    and whether it ends after a terminator (False: the data ran out, or the next header cut it short)."""
    term, release = head.term, head.release
    wrap, blank = _wraps(term), _blank(term)
    pattern = _ends(head.standard, term, head.element)
    floor = at = head.body_start + 3
    cut = cuts.after(at)
    while True:
        match = pattern.search(text, at, cut)
        if match is None:
            return cut, False
        if blank:
            stop = _blank_term_before(text, match.start(), floor, head)
            if stop < 0:
                at = match.start() + 1
                continue
        else:
            stop = match.start()
            if release is not None and _released(text, stop, release, wrap):
                at = stop + 1
                continue
        if match.group("trailer") is None:  # the next interchange's header
            return stop + len(term), True
        at = match.end()
        while True:
            stop = text.find(term, at, cut)
            if stop < 0:
                return cut, False
            if release is not None and _released(text, stop, release, wrap):
                at = stop + 1
                continue
            return stop + len(term), True


def _when(date: str, time: str) -> datetime | None:
    """YYMMDD (69 pivot, as POSIX) or CCYYMMDD with HHMM[SS]; None when not a real date and time."""
    if not (
        (date.isascii() and date.isdigit())
        and (time.isascii() and time.isdigit())
        and len(date) in (6, 8)
        and len(time) in (4, 6)
    ):
        return None
    if len(date) == 6:
        year = int(date[:2])
        date = ("20" if year < 69 else "19") + date
    try:
        return datetime(
            int(date[:4]), int(date[4:6]), int(date[6:8]), int(time[:2]), int(time[2:4]), int(time[4:6] or 0)
        )
    except ValueError:
        return None


def _build(raw: bytes, text: str, head: Head, end: int, span_end: int) -> Interchange:
    """Tokenize and read one interchange found at head.start..end.

    Its text runs to `span_end` when that is further (the line end after the trailer: blank to the tokenizer), so
    the one interchange of an X12 payload is the decoded text itself, not a second copy of it.
    """
    x12 = head.standard == "X12"
    body = Body(
        source=text,
        raw=raw,
        start=head.body_start,
        stop=max(end, span_end),
        element=head.element,
        component=head.component,
        term=head.term,
        release=head.release,
        repetition=head.repetition,
    )
    first = _header(body, head, "ISA" if x12 else "UNB")
    payload = raw[head.start : span_end]
    syntax_id = first[1].split(head.component)[0] if len(first) > 1 else ""
    _decode_as(body, payload, syntax_id=syntax_id, x12=x12)
    problems = list(head.problems)
    header = body.split(0)
    body.standard = head.standard
    if x12:
        if len(header.elements) < 16:
            raise EdiSyntaxError(
                f"the ISA has {len(header.elements)} elements; 16 are required", offset=head.start, segment_index=0
            )
        body.repetition = _x12.repetition(header, head.element, head.component, head.term)
        sender = Party(header.get(5).strip(), header.get(6).rstrip(" \u00a0"))
        receiver = Party(header.get(7).strip(), header.get(8).rstrip(" \u00a0"))
        control = header.get(13).strip()
        test = header.get(15).strip() == "T"
        prepared = _when(header.get(9), header.get(10))
        syntax = header.get(12)
        if not (len(control) == 9 and (control.isascii() and control.isdigit())):
            problems.append(f"ISA13 {control!r} is not a 9-digit control number")
    else:
        sender = Party(header.get(2, 2).strip(), header.get(2, 1).rstrip(" \u00a0"))
        receiver = Party(header.get(3, 2).strip(), header.get(3, 1).rstrip(" \u00a0"))
        control = header.get(5).rstrip(" ")
        test = header.get(11).strip() == "1"
        prepared = _when(header.get(4, 1), header.get(4, 2))
        syntax = ":".join(header.composite(1)[:2])
    if prepared is None:
        problems.append(f"the {'ISA09/ISA10' if x12 else 'UNB S004'} date and time of preparation is not readable")
    if not control:
        problems.append("the interchange control number is empty")
    if not sender.id:
        problems.append("the sender id is empty")
    unfit = _unfit_key(control, source(head.standard, sender, receiver, test=test))
    if unfit:
        problems.append(unfit)
    separators = _separators(
        head.element, head.component, _decode(head.term), head.release, body.repetition, head.decimal
    )
    return Interchange(
        standard=head.standard,
        control_number=control,
        sender=sender,
        receiver=receiver,
        test=test,
        prepared_at=prepared,
        span=(head.start, span_end),
        syntax=syntax,
        separators=separators,
        raw=payload,
        _body=body,
        _notes=tuple(problems),
        _identified=head.keyable and bool(control) and bool(sender.id) and not unfit,
    )


def _header(body: Body, head: Head, tag: str) -> list[str]:
    """The elements of the interchange's header segment; EdiSyntaxError when it is unterminated or not `tag`."""
    if not body.segs:
        raise EdiSyntaxError(
            f"the interchange header {tag} is not terminated by {head.term!r} (truncated data?)",
            offset=head.body_start,
            segment_index=0,
        )
    first = body.segs[0].split(head.element)
    if first[0] != tag:
        raise EdiSyntaxError(f"the interchange must start with {tag}", offset=head.body_start, segment_index=0)
    return first


def _decode_as(body: Body, payload: bytes, *, syntax_id: str, x12: bool) -> None:
    """Set the body's codec for a payload that is not ASCII: UTF-8 when it decodes as such, else the charset its
    syntax identifier names (EDIFACT) or Latin-1."""
    if payload.isascii():
        return
    try:
        payload.decode("utf-8")
        body.set_codec("utf-8")
    except UnicodeDecodeError:
        codec = "latin-1" if x12 else _edifact.CHARSETS.get(syntax_id, "latin-1")
        body.set_codec(None if codec == "latin-1" else codec)


def _unfit_key(control: str, source_text: str) -> str:
    """Why the control number or the source cannot be an inbox key (a NUL, over 512 bytes), or "" when they can."""
    for what, value in (("control number", control), ("source", source_text)):
        if len(value) > MAX_KEY_BYTES // 4 or "\x00" in value or not value.isascii():  # the cheap test first
            problem = key_problem(value)
            if problem is not None:
                return f"the interchange {what} cannot be an inbox key: {problem}; the interchange is not keyed"
    return ""


# Separators are frozen values: one per distinct set, shared by the interchanges that use it.
_separators = functools.lru_cache(maxsize=64)(Separators)


def _decode(char: str) -> str:
    """A separator as text: a multi-byte UTF-8 terminator (U+2026) becomes its one character."""
    if len(char) > 1:
        try:
            return char.encode("latin-1").decode("utf-8")
        except UnicodeDecodeError:
            return char
    return char
