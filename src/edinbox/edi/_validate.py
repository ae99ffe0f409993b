"""Validation of messages against their implementation guide (`edinbox.edi._guide`): every error, in one pass.

    validate(interchange, overlay=None) -> Validation     the findings of each message a guide describes
    check(message, guide, decimal=".") -> list[Finding]  one message's findings, in the order of its segments

Each segment is placed in the guide's structure by walking it once (a stack of the loops open, each level searched
forward from where it stands: the guide's size bounds the work per segment, so the cost is linear in the input), then
its elements are checked against their rules. A finding carries X12 codes (720 for the segment, 723 for the element;
`_acknowledge` turns them into CONTRL 0085 codes for EDIFACT):

    segment   1 unrecognized (not in the guide), 2 unexpected (in the guide, not here), 3 mandatory segment missing,
              4 a loop over its maximum repeat, 5 a segment over its maximum use, 8 it has element errors
    element   1 mandatory element missing, 2 conditionally required element missing (X12 syntax notes P, R, C),
              3 too many data elements, 4 too short, 5 too long, 6 invalid character, 7 invalid code value,
              8 invalid date, 9 invalid time, 10 exclusion condition violated (E), 13 too many components

A missing segment is reported at the position of the segment that showed it missing (the next one read, or the
trailer). At most `MAX_FINDINGS` findings are kept per message (the rest are counted in `Validation.dropped`).
Nothing here raises for any data: a value of any length is measured, never converted to a number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from edinbox.edi._errors import Finding
from edinbox.edi._fast import pattern, shape
from edinbox.edi._guide import Element, Guide, Node, Overlay, Rule, guide
from edinbox.edi._interchange import Interchange
from edinbox.edi._model import EdiMessage

__all__ = ["MAX_FINDINGS", "Validation", "check", "validate"]

MAX_FINDINGS = 1000
"""Findings kept per message: an acknowledgment listing more helps nobody."""

_CLEAN = 100_000
"""Clean segment texts remembered per message (a repeated segment is checked once)."""

_DATE_FORMATS = {"101": 6, "102": 8, "203": 12, "204": 14, "718": 17}
"""EDIFACT 2379 date formats checked, and their lengths (YYMMDD, CCYYMMDD, ...HHMM, ...HHMMSS, CCYYMMDD-CCYYMMDD)."""


@dataclass(frozen=True, slots=True)
class Validation:
    """The findings of an interchange's messages: `findings` by message index (only messages with findings),
    `checked` the indexes a guide described (the others are not checked), `dropped` findings past `MAX_FINDINGS`."""

    findings: Mapping[int, tuple[Finding, ...]] = field(default_factory=dict)
    checked: tuple[int, ...] = ()
    dropped: int = 0

    def __bool__(self) -> bool:
        """True when some message has a finding."""
        return bool(self.findings)


def validate(interchange: Interchange, overlay: Overlay | None = None) -> Validation:
    """Check every complete message a shipped guide describes (X12 810 004010 / 005010, 850 004010, EDIFACT
    INVOIC D96A / D01B), with a partner's `overlay` applied; a message without a guide is not checked."""
    x12 = interchange.standard == "X12"
    versions = {g.control_number: g.version for g in interchange.groups} if x12 else {}
    findings: dict[int, tuple[Finding, ...]] = {}
    checked: list[int] = []
    dropped = 0
    overlaid: dict[str, Guide] = {}  # each guide with the overlay, made once per interchange
    for message in interchange.messages:
        version = versions.get(message.group_control_number or "", "") if x12 else message.version
        rules = guide(interchange.standard, message.type.upper(), version)
        if rules is None or not message.complete:
            continue
        if overlay:
            rules = overlaid.get(rules.name) or overlaid.setdefault(rules.name, rules.with_overlay(overlay))
        checked.append(message.index)
        found, more = _check(message, rules, interchange.separators.decimal)
        dropped += more
        if found:
            findings[message.index] = tuple(found)
    return Validation(findings, tuple(checked), dropped)


def check(message: EdiMessage, rules: Guide, decimal: str = ".") -> list[Finding]:
    """The findings of one message against `rules`, in the order of its segments (at most `MAX_FINDINGS`)."""
    return _check(message, rules, decimal)[0]


_Index = tuple[dict[str, tuple[int, ...]], tuple[int, ...]]
"""Of a tuple of nodes: where each tag stands among them, and the indexes of the required ones."""


class _Level:
    """One open level of the structure: its nodes, the index of the last one met and how often each was met."""

    __slots__ = ("at", "counts", "index", "loop", "nodes", "required")

    def __init__(self, nodes: tuple[Node, ...], loop: str, at: int, index: _Index) -> None:
        self.nodes = nodes
        self.index, self.required = index
        """Where each tag stands among the nodes; the indexes of the required ones."""
        self.loop = loop
        self.at = at
        self.counts = [0] * len(nodes)
        if at >= 0:
            self.counts[at] = 1


def _check(message: EdiMessage, rules: Guide, decimal: str) -> tuple[list[Finding], int]:
    """Walk one message: each segment placed in the structure, then its elements checked.

    Segments are read from the parser's text when no value needs decoding (no release character, ASCII or Latin-1):
    an element is then a string, split at the component separator only where it holds one; otherwise from the
    materialised segments, an element a tuple of components.
    """
    walk = _Walk(rules, decimal)
    wanted = dict.fromkeys(rules.required, False)
    segments = rules.segments
    position = 0
    body = message._body  # the parser's own tokens: same package
    rows: Iterable[tuple[str, Sequence[Any] | None, str]]
    separator = body.element
    if body.table is None and body.codec is None:  # values split from the text only when they are checked
        start, stop = message.segment_range
        walk.text(separator, body.component)
        rows = ((text.partition(separator)[0], None, text) for text in body.segs[start:stop])
    else:
        rows = ((segment.tag, segment.elements, "") for segment in message.segments)
    clean: dict[str, None] = {}  # segment texts already checked without a finding: the same text is clean again
    for position, (tag, sent, text) in enumerate(rows, 1):
        values = sent
        loop = walk.place(tag, position)
        if wanted:
            values = text.split(separator)[1:] if values is None else values
            for key in wanted:
                if key[0] == tag and (not key[1] or _first(values, walk.component) == key[1]):
                    wanted[key] = True
        definition = segments.get(tag)
        if definition is None or text in clean or (text and walk.clean(tag, definition, text)):
            continue
        before = len(walk.found) + walk.dropped
        values = text.split(separator)[1:] if values is None else values
        walk.elements(values, definition, tag, position, loop)
        if text and len(walk.found) + walk.dropped == before:
            walk.held(tag, text)
            if len(clean) < _CLEAN:
                clean[text] = None
    walk.close(0, position)
    for (tag, qualifier), seen in wanted.items():
        if not seen:
            walk.add(Finding(tag, position, "3", reference=qualifier))
    return walk.found, walk.dropped


def _first(values: Sequence[Any], component: str | None) -> str:
    """The first component of the first element (a string or a tuple of components), "" when none."""
    if not values:
        return ""
    value = values[0]
    if component is None:
        return str(value[0]) if value else ""
    return str(value).split(component, 1)[0]


class _Walk:
    """One message's walk through its guide: the loops open, and the findings (at most MAX_FINDINGS kept)."""

    __slots__ = (
        "component",
        "dropped",
        "edifact",
        "fast",
        "found",
        "indexes",
        "marks",
        "met",
        "rules",
        "separator",
        "shape",
        "shapes",
        "stack",
    )

    def __init__(self, rules: Guide, decimal: str) -> None:
        self.rules = rules
        self.edifact = rules.standard == "EDIFACT"
        self.marks = (decimal, ".") if self.edifact else (".",)
        self.indexes: dict[int, _Index] = {}
        self.stack = [_Level(rules.structure, "", -1, self._index(rules.structure))]
        self.component: str | None = None
        """The component separator when elements are strings (None: they are tuples of components)."""
        self.found: list[Finding] = []
        self.dropped = 0
        self.met: set[tuple[str, frozenset[int]]] = set()
        """(tag, elements sent) whose syntax notes held: they hold again for the same elements sent."""
        self.separator = ""
        self.fast: dict[str, re.Pattern[str] | None] = {}
        """Per tag, the pattern of its clean segments (`_fast.pattern`), compiled when the tag is first met."""
        self.shape: re.Pattern[str] | None = None
        self.shapes: set[tuple[str, str]] = set()
        """(tag, `_fast.shape` of a clean segment's text): segments whose syntax notes held, by the elements sent."""

    def text(self, element: str, component: str) -> None:
        """Read segments as text with these separators: elements are strings, and the fast path is open."""
        self.separator, self.component = element, component
        self.shape = shape(element, component)

    def clean(self, tag: str, definition: tuple[Element, ...], text: str) -> bool:
        """Whether a segment's text is clean by its tag's pattern, its syntax notes known to hold for the elements
        it sends (False: check it element by element)."""
        try:
            fast = self.fast[tag]
        except KeyError:
            fast = pattern(tag, definition, element=self.separator, component=self.component or "", marks=self.marks)
            self.fast[tag] = fast
        if fast is None or fast.fullmatch(text) is None:
            return False
        if tag not in self.rules.conditions:
            return True
        return self.shape is not None and (tag, self.shape.sub("x", text)) in self.shapes

    def held(self, tag: str, text: str) -> None:
        """Note that a segment's text was found clean: its syntax notes hold for the elements it sends."""
        if self.shape is not None and tag in self.rules.conditions:
            self.shapes.add((tag, self.shape.sub("x", text)))

    def add(self, finding: Finding) -> None:
        """Keep a finding (or count it, past MAX_FINDINGS)."""
        if len(self.found) < MAX_FINDINGS:
            self.found.append(finding)
        else:
            self.dropped += 1

    def _index(self, nodes: tuple[Node, ...]) -> _Index:
        """Where each tag stands among `nodes` (their indexes), and which are required, computed once per walk."""
        index = self.indexes.get(id(nodes))
        if index is None:
            found: dict[str, list[int]] = {}
            for k, node in enumerate(nodes):
                found.setdefault(node.tag, []).append(k)
            required = tuple(k for k, node in enumerate(nodes) if node.required)
            index = self.indexes[id(nodes)] = ({tag: tuple(ks) for tag, ks in found.items()}, required)
        return index

    def place(self, tag: str, position: int) -> str:
        """Put a segment in the structure (reporting what it shows missing or repeated too often); its loop id."""
        stack = self.stack
        for depth in range(len(stack) - 1, -1, -1):
            level = stack[depth]
            indexes = level.index.get(tag)
            if indexes is None:
                continue
            at = level.at
            start = (at if at > 1 else 1) if depth else (at if at > 0 else 0)  # a loop's first segment opens the next
            found = -1
            for k in indexes:
                if k >= start:
                    found = k
                    break
            if found < 0:
                continue
            if depth + 1 < len(stack):
                self.close(depth + 1, position)
                del stack[depth + 1 :]
            for k in level.required:
                if at < k < found and not level.counts[k]:
                    node = level.nodes[k]
                    self.add(Finding(node.tag, position, "3", loop=node.loop or level.loop))
            node = level.nodes[found]
            counts = level.counts
            if found != at:
                counts[found] = 0
                level.at = found
            counts[found] += 1
            if counts[found] > node.repeat:
                self.add(Finding(tag, position, "4" if node.loop else "5", loop=node.loop or level.loop))
            if node.loop:
                stack.append(_Level(node.children, node.loop, 0, self._index(node.children)))
                return node.loop
            return level.loop
        loop = stack[-1].loop
        if tag not in self.rules.anywhere:
            self.add(Finding(tag, position, "2" if tag in self.rules.tags else "1", loop=loop))
        return loop

    def close(self, depth: int, position: int) -> None:
        """Report the mandatory nodes never met after where each level from `depth` up stands (they are left)."""
        for level in reversed(self.stack[depth:]):
            for k in level.required:
                if k > level.at and not level.counts[k]:
                    node = level.nodes[k]
                    self.add(Finding(node.tag, position, "3", loop=node.loop or level.loop))

    def elements(
        self, values: Sequence[Any], definition: tuple[Element, ...], tag: str, position: int, loop: str
    ) -> None:
        """Check a segment's elements (strings, or tuples of components) against their definitions, and the X12
        syntax notes of its tag."""
        size, known = len(values), len(definition)
        marks, edifact, add, separator = self.marks, self.edifact, self.add, self.component
        for index in range(size if size < known else known):
            element = definition[index]
            value = values[index]
            if separator is None:
                parts: tuple[str, ...] | None = value if len(value) > 1 else None
                value = value[0] if value else ""
            else:
                parts = tuple(value.split(separator)) if separator in value else None
            rule = element.rule
            if rule is not None:
                if parts is not None:
                    value = parts[0]
                code = _code(rule, value, marks, edifact) if value or rule.required else ""
                if code:
                    add(Finding(tag, position, "8", index + 1, 0, rule.ref, code, value, loop))
                elif parts is not None and any(parts[1:]):
                    add(Finding(tag, position, "8", index + 1, 2, rule.ref, "13", parts[1], loop))
                continue
            self._composite(parts if parts is not None else (value,), element, (tag, position, loop), index + 1)
        for index in range(size, known):  # elements not sent
            element = definition[index]
            if element.required:  # a whole composite missing is told at its element position, like a simple one
                add(Finding(tag, position, "8", index + 1, 0, element.ref, "1", "", loop))
        if size > known:
            extra = [k for k in range(known, size) if _sent(values[k], separator)]
            if extra:
                value = _first(values[extra[0] :], separator)
                add(Finding(tag, position, "8", extra[0] + 1, 0, "", "3", value, loop))
        notes = self.rules.conditions.get(tag)
        if notes:
            self.conditions(notes, values, definition, (tag, position, loop))

    def _composite(self, parts: tuple[str, ...], element: Element, where: tuple[str, int, str], number: int) -> None:
        """Check a composite's components; `where` is the segment's tag, position and loop."""
        tag, position, loop = where
        components = element.components
        if not any(parts):
            if element.required:
                self.add(Finding(tag, position, "8", number, 0, element.ref, "1", "", loop))
            return
        for k, component_rule in enumerate(components, 1):
            value = parts[k - 1] if k <= len(parts) else ""
            if not value and not component_rule.required:
                continue
            code = _code(component_rule, value, self.marks, self.edifact)
            if not code and component_rule.type == "DT" and self.edifact and value:
                code = _edifact_date(value, parts[2] if len(parts) > 2 else "")
            if code:
                self.add(Finding(tag, position, "8", number, k, component_rule.ref, code, value, loop))
        if len(parts) > len(components) and any(parts[len(components) :]):
            extra = len(components) + 1
            self.add(Finding(tag, position, "8", number, extra, element.ref, "13", parts[extra - 1], loop))

    def conditions(
        self,
        notes: tuple[tuple[str, tuple[int, ...]], ...],
        values: Sequence[Any],
        definition: tuple[Element, ...],
        where: tuple[str, int, str],
    ) -> None:
        """X12 syntax notes: P (all or none), R (at least one), C (the first needs the others), E (at most one);
        `where` is the segment's tag, position and loop."""
        tag = where[0]
        separator = self.component
        sent = {k for k, value in enumerate(values, 1) if _sent(value, separator)}
        pattern = (tag, frozenset(sent))
        if pattern in self.met:  # the notes hold for these elements sent, whatever their values
            return
        before = len(self.found) + self.dropped
        self._notes(notes, values, definition, where, sent)
        if len(self.found) + self.dropped == before:
            self.met.add(pattern)

    def _notes(
        self,
        notes: tuple[tuple[str, tuple[int, ...]], ...],
        values: Sequence[Any],
        definition: tuple[Element, ...],
        where: tuple[str, int, str],
        sent: set[int],
    ) -> None:
        tag, position, loop = where
        separator = self.component
        for kind, numbers in notes:
            there = [n for n in numbers if n in sent]
            if kind == "E":
                if len(there) > 1:
                    value = _first(values[there[1] - 1 :], separator)
                    ref = _ref(definition, there[1])
                    self.add(Finding(tag, position, "8", there[1], 0, ref, "10", value, loop, trigger=there[0]))
            elif len(there) == len(numbers):
                continue
            elif not there:
                if kind == "R":
                    self.add(Finding(tag, position, "8", numbers[0], 0, _ref(definition, numbers[0]), "2", "", loop))
            elif kind == "P" or (kind == "C" and there[0] == numbers[0]):
                for n in numbers:
                    if n not in there:
                        ref = _ref(definition, n)
                        self.add(Finding(tag, position, "8", n, 0, ref, "2", "", loop, trigger=there[0]))


def _sent(value: Any, separator: str | None) -> bool:
    """Whether an element (a string, or a tuple of components) holds a value."""
    if separator is None:
        return any(value)
    return bool(value) and (separator not in value or any(value.split(separator)))


def _ref(definition: tuple[Element, ...], number: int) -> str:
    return definition[number - 1].ref if number <= len(definition) else ""


def _code(rule: Rule, value: str, marks: tuple[str, ...], edifact: bool) -> str:
    """The X12 723 code of a simple value against its rule, "" when it is right."""
    if not value:
        return "1" if rule.required else ""
    kind = rule.type
    length = len(value)
    if kind[0] == "N" or kind == "R":
        digits = value[1:] if value[0] == "-" else value
        if kind == "R":
            for mark in marks:
                if mark in digits:
                    digits = digits.replace(mark, "", 1)
                    break
        if not (digits.isascii() and digits.isdigit()):
            return "6"
        length = len(digits)
    elif kind == "DT":
        if edifact:
            return "5" if length > rule.max else ""  # its format is its 2379's (checked by the composite)
        return "" if rule.min <= length <= rule.max and _x12_date(value) else "8"  # a date of the wrong width too
    elif kind == "TM":
        return "" if _time(value) else "9"
    elif not value.isprintable():
        return "6"
    if length < rule.min:
        return "4"
    if length > rule.max:
        return "5"
    if rule.codes is not None and value not in rule.codes:
        return "7"
    return ""


def _x12_date(value: str) -> bool:
    if len(value) == 6 and value.isascii() and value.isdigit():
        value = ("20" if value < "69" else "19") + value
    return len(value) == 8 and _calendar(value)


def _calendar(value: str) -> bool:
    """True when 8 characters are the digits of a real CCYYMMDD date."""
    if not (len(value) == 8 and value.isascii() and value.isdigit()):
        return False
    try:
        date(int(value[:4]), int(value[4:6]), int(value[6:]))
    except ValueError:
        return False
    return True


def _time(value: str) -> bool:
    """HHMM, HHMMSS or HHMMSS with decimal seconds (up to 8 digits), each part in range."""
    if not (4 <= len(value) <= 8 and len(value) != 5 and value.isascii() and value.isdigit()):
        return False
    return value[:2] < "24" and value[2:4] < "60" and (len(value) < 6 or value[4:6] < "60")


def _edifact_date(value: str, fmt: str) -> str:
    """The code of an EDIFACT 2380 value for its 2379 format (102 when absent): "8" when it is no such date."""
    fmt = fmt or "102"
    length = _DATE_FORMATS.get(fmt)
    if length is None:
        return ""
    if len(value) != length:
        return "8"
    if fmt == "101":
        return "" if _x12_date(value) else "8"
    if fmt == "718":
        return "" if value[8] == "-" and _calendar(value[:8]) and _calendar(value[9:]) else "8"
    if not _calendar(value[:8]):
        return "8"
    return "" if _time(value[8:]) or fmt == "102" else "8"
