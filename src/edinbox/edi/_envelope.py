"""The envelope walk shared by X12 and EDIFACT: groups, messages, trailers and their counts.

X12 (X12.5/X12.6): ISA [ISB ISE TA1] (GS (ST .. SE)* GE)* IEA.  EDIFACT (ISO 9735): UNB (UNG (UNH .. UNT)* UNE)*
or UNB (UNH .. UNT)* UNZ. In both, the three trailers carry (count, control number) as elements 1 and 2, and the
message trailer counts the segments from header to trailer inclusive (SE01, UNT 0074).

Each trailer is checked once, here, and a disagreement is both a problem (its sentence) and a `Disagreement` (its
acknowledgment code), so what the parser reports and what an acknowledgment says cannot differ. The rule: a count
is read as a number (digits, blanks around them ignored: "011" is 11; anything else never matches, nor does a count
of more than `COUNT_DIGITS` digits, longer than any trailer count of either standard: SE01 and UNT 0074 are n..10),
a control number matches as a string or, when both are digits, as a number ("0001" is "1", compared as digit
strings without their leading zeros, so a control number of any length is never turned into an int).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter

from edinbox.edi._model import Disagreement, EdiMessage, Group, Segment
from edinbox.edi._tokens import Body

__all__ = ["COUNT_DIGITS", "Rule", "Spec", "Walk", "same_number", "walk"]

COUNT_DIGITS = 10
"""The most digits a trailer count may have: SE01 and UNT 0074 are n..10, GE01, IEA01, UNE 0060, UNZ 0036 shorter."""


_HEAD2 = itemgetter(slice(0, 2))


@dataclass(frozen=True, slots=True)
class Rule:
    """One trailer's check: the designators it compares and the acknowledgment codes of each disagreement."""

    level: str
    """"set", "group" or "interchange"."""
    count: str
    """The trailer's count (SE01, UNT 0074...)."""
    reference: str
    """The trailer's control number (SE02, UNT 0062...)."""
    header: str
    """The header's control number it repeats (ST02, UNH 0062...)."""
    counted: str
    """What the count counts ("segments", "transaction sets", "messages"; "" when it depends on the content)."""
    count_code: str
    reference_code: str


@dataclass(frozen=True, slots=True)
class Spec:
    """The tags of one standard's envelope and how to read its group and message headers."""

    trailer: str
    group_header: str
    group_trailer: str
    message_header: str
    message_trailer: str
    free: frozenset[str]
    standalone: frozenset[str]
    prefixes: frozenset[str]
    trailer_counts_groups_only: bool
    read_group: Callable[[Segment], tuple[str, str, str, str, str]]
    read_message: Callable[[Segment], tuple[str, str, str]]
    rules: tuple[Rule, Rule, Rule]
    """The checks of the message, group and interchange trailers."""
    message_noun: str
    """"transaction set" or "message"."""


@dataclass(slots=True)
class Walk:
    """What the walk found: groups, messages, the trailer, and the problems met on the way."""

    groups: list[Group] = field(default_factory=list)
    messages: list[EdiMessage] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    trailer: Segment | None = None
    complete: bool = True
    standalone: list[tuple[int, str]] = field(default_factory=list)
    """Segments outside any message that are a message type of their own (X12 TA1), with their index."""


def same_number(a: str, b: str) -> bool:
    """Control numbers match as strings, or as numbers when both are digits (zero-padding tolerated)."""
    return a == b or (
        (a.isascii() and a.isdigit()) and (b.isascii() and b.isdigit()) and a.lstrip("0") == b.lstrip("0")
    )


def _count(value: str) -> int | None:
    """A trailer count as a number; None when it is not digits or has more than `COUNT_DIGITS` of them."""
    value = value.strip()
    if len(value) > COUNT_DIGITS or not (value.isascii() and value.isdigit()):
        return None
    return int(value)


def _shown(value: str) -> str:
    """A value from the data as a sentence shows it: bare when plain and short, else quoted and cut."""
    if value and len(value) <= 35 and value.isascii() and value.isalnum():
        return value
    return repr(value[:35]) + ("..." if len(value) > 35 else "")


def _agrees(trailer: tuple[str, str], *, control: str, actual: int) -> bool:
    """True when a trailer `(count, control number)` agrees with what it closes (the rule in the module docstring)."""
    return same_number(trailer[1], control) and _count(trailer[0]) == actual


def _check(
    rule: Rule, trailer: tuple[str, str], *, control: str, actual: int, index: int, where: str, counted: str = ""
) -> list[Disagreement]:
    """The disagreements of a trailer that does not agree (`_agrees`) with what it closes: control number first."""
    said, reference = trailer
    found = []
    if not same_number(reference, control):
        reason = f"{rule.reference} says {_shown(reference)}, {where} has {rule.header} {_shown(control)}"
        found.append(Disagreement(rule.level, index, rule.reference_code, reason))
    if _count(said) != actual:
        reason = f"{rule.count} says {_shown(said)} {counted or rule.counted}, {where} has {actual}"
        if len(said.strip()) > COUNT_DIGITS:
            reason = f"{rule.count} has {len(said.strip())} characters, more than the {COUNT_DIGITS} a count may have"
        found.append(Disagreement(rule.level, index, rule.count_code, reason))
    return found


class _Open:
    """A group or message header seen and not yet closed."""

    __slots__ = ("fields", "index", "messages")

    def __init__(self, index: int, fields: tuple[str, ...]) -> None:
        self.index = index
        self.fields = fields
        self.messages: list[EdiMessage] = []


def walk(body: Body, spec: Spec, *, control: str) -> Walk:
    """Walk the envelope segments of `body` (segment 0 is the interchange header, `control` its control number) and
    check every trailer."""
    w = _Walker(body, spec)
    problems = w.problems
    segs = body.segs
    element = body.element
    # C-level pipeline (no Python loop per segment): indices of segments whose first two characters match
    candidates = compress(range(len(segs)), map(spec.prefixes.__contains__, map(_HEAD2, segs)))
    envelope = {spec.group_header, spec.group_trailer, spec.message_header, spec.message_trailer, spec.trailer}
    previous = 0
    outside_reported = False
    for i in candidates:
        if not i:
            continue
        tag = segs[i].split(element, 1)[0]
        if tag not in envelope:
            if tag in spec.free and w.message is None:
                previous = i
                if tag in spec.standalone:
                    w.out.standalone.append((i, tag))
            continue
        if w.message is None and i - previous > 1 and not outside_reported:
            problems.append(f"segments {previous + 1}..{i - 1} are outside any message")
            outside_reported = True
        previous = i
        if tag == spec.message_header:
            if w.message is not None:
                problems.append(
                    f"message {w.describe(w.message.fields)} has no {spec.message_trailer} before the next "
                    f"{spec.message_header} at segment {i}"
                )
                w.close_message(i - 1, complete=False)
            w.message = _Open(i, spec.read_message(body.split(i)))
        elif tag == spec.message_trailer:
            w.message_trailer(i, body.pair(i))
        elif tag == spec.group_header:
            w.abandon_message(i - 1)
            w.abandon_group()
            w.group = _Open(i, spec.read_group(body.split(i)))
        elif tag == spec.group_trailer:
            w.abandon_message(i - 1)
            w.group_trailer(i, body.pair(i))
        else:  # the interchange trailer
            w.abandon_message(i - 1)
            w.abandon_group()
            w.out.trailer = body.split(i)
            if i != len(segs) - 1:
                problems.append(f"segments after the trailer {spec.trailer} at segment {i} are ignored")
            break
    else:
        if w.message is not None:
            w.close_message(len(segs) - 1, complete=False)
        if w.group is not None:
            w.close_group(complete=False)
    w.interchange_trailer(control)
    return w.out


class _Walker:
    """One walk of an interchange's envelope: the group and the message open, and what was found (`out`)."""

    def __init__(self, body: Body, spec: Spec) -> None:
        """A walk of `body`'s envelope as `spec` reads it."""
        self.body = body
        self.spec = spec
        self.out = Walk()
        self.problems = self.out.problems
        self.group: _Open | None = None
        self.message: _Open | None = None

    def disagree(self, found: list[Disagreement]) -> None:
        """Note what a trailer disagrees with, as disagreements and as problems."""
        self.out.disagreements.extend(found)
        self.problems.extend(d.reason for d in found)

    def close_message(self, end: int, *, complete: bool) -> None:
        """Close the open message, if any, at segment `end`."""
        message, group, out = self.message, self.group, self.out
        if message is None:
            return
        kind, number, version = message.fields
        item = EdiMessage(
            type=kind,
            control_number=number,
            version=version,
            index=len(out.messages),
            group_control_number=group.fields[1] if group is not None else None,
            complete=complete,
            _body=self.body,
            _start=message.index,
            _end=end,
        )
        out.messages.append(item)
        if group is not None:
            group.messages.append(item)
        if not complete:
            out.complete = False
        self.message = None

    def close_group(self, *, complete: bool) -> None:
        """Close the open group, if any."""
        group = self.group
        if group is None:
            return
        kind, number, sender, receiver, version = group.fields
        self.out.groups.append(Group(kind, number, sender, receiver, version, complete, tuple(group.messages)))
        if not complete:
            self.out.complete = False
        self.group = None

    def describe(self, fields: tuple[str, ...]) -> str:
        """A message as a problem names it: its control number, its type and its place."""
        return f"{fields[1]!r} ({fields[0]}, message {len(self.out.messages) + 1})"

    def abandon_message(self, end: int) -> None:
        """Close the open message, if any, as incomplete: its trailer never came."""
        if self.message is not None:
            self.problems.append(f"message {self.describe(self.message.fields)} has no {self.spec.message_trailer}")
            self.close_message(end, complete=False)

    def abandon_group(self) -> None:
        """Close the open group, if any, as incomplete: its trailer never came."""
        if self.group is not None:
            fields = self.group.fields
            self.problems.append(f"group {fields[1]!r} ({fields[0]}) has no {self.spec.group_trailer}")
            self.close_group(complete=False)

    def message_trailer(self, i: int, pair: tuple[str, str]) -> None:
        """The message trailer at segment `i` (its count and control number `pair`): checked, and the message closed."""
        spec, message = self.spec, self.message
        if message is None:
            self.problems.append(f"{spec.message_trailer} at segment {i} has no {spec.message_header}")
            return
        kind, number, _ = message.fields
        actual = i - message.index + 1
        if not _agrees(pair, control=number, actual=actual):  # the common case builds no sentence
            at = len(self.out.messages)
            where = f"{spec.message_noun} {_shown(number)} ({_shown(kind)} #{at + 1})"
            self.disagree(_check(spec.rules[0], pair, control=number, actual=actual, index=at, where=where))
        self.close_message(i, complete=True)

    def group_trailer(self, i: int, pair: tuple[str, str]) -> None:
        """The group trailer at segment `i` (its count and control number `pair`): checked, and the group closed."""
        spec, group = self.spec, self.group
        if group is None:
            self.problems.append(f"{spec.group_trailer} at segment {i} has no {spec.group_header}")
            return
        kind, number = group.fields[0], group.fields[1]
        actual, at = len(group.messages), len(self.out.groups)
        if not _agrees(pair, control=number, actual=actual):
            where = f"group {_shown(number)} ({_shown(kind)})"
            self.disagree(_check(spec.rules[1], pair, control=number, actual=actual, index=at, where=where))
        self.close_group(complete=True)

    def interchange_trailer(self, control: str) -> None:
        """Check the interchange trailer's count (of groups, or of messages without groups) and control number, when it
        was read."""
        out, spec = self.out, self.spec
        if out.trailer is None:
            return
        groups = bool(out.groups) or spec.trailer_counts_groups_only
        counted = len(out.groups) if groups else len(out.messages)
        unit = "groups" if groups else f"{spec.message_noun}s"
        trailer = (out.trailer.get(1), out.trailer.get(2))
        if not _agrees(trailer, control=control, actual=counted):
            where = f"interchange {_shown(control)}"
            rule = spec.rules[2]
            self.disagree(_check(rule, trailer, control=control, actual=counted, index=0, where=where, counted=unit))
