"""The envelope walk shared by X12 and EDIFACT: groups, messages, trailers and their counts.

X12 (X12.5/X12.6): ISA [ISB ISE TA1] (GS (ST .. SE)* GE)* IEA.  EDIFACT (ISO 9735): UNB (UNG (UNH .. UNT)* UNE)*
or UNB (UNH .. UNT)* UNZ. In both, the three trailers carry (count, control number) as elements 1 and 2, and the
message trailer counts the segments from header to trailer inclusive (SE01, UNT 0074).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter

from edinbox.edi._model import EdiMessage, Group, Segment
from edinbox.edi._tokens import Body

__all__ = ["Spec", "Walk", "same_number", "walk"]


_HEAD2 = itemgetter(slice(0, 2))


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


@dataclass(slots=True)
class Walk:
    """What the walk found: groups, messages, the trailer, and the problems met on the way."""

    groups: list[Group] = field(default_factory=list)
    messages: list[EdiMessage] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    trailer: Segment | None = None
    complete: bool = True
    standalone: list[tuple[int, str]] = field(default_factory=list)
    """Segments outside any message that are a message type of their own (X12 TA1), with their index."""


def same_number(a: str, b: str) -> bool:
    """Control numbers match as strings, or as numbers when both are digits (zero-padding tolerated)."""
    return a == b or ((a.isascii() and a.isdigit()) and (b.isascii() and b.isdigit()) and int(a) == int(b))


def _count(value: str) -> int | None:
    value = value.strip()
    return int(value) if (value.isascii() and value.isdigit()) else None


class _Open:
    """A group or message header seen and not yet closed."""

    __slots__ = ("fields", "index", "messages")

    def __init__(self, index: int, fields: tuple[str, ...]) -> None:
        self.index = index
        self.fields = fields
        self.messages: list[EdiMessage] = []


def walk(body: Body, spec: Spec) -> Walk:
    """Walk the envelope segments of `body` (segment 0 is the interchange header) and check every trailer."""
    out = Walk()
    problems = out.problems
    segs = body.segs
    element = body.element
    prefixes = spec.prefixes
    # C-level pipeline (no Python loop per segment): indices of segments whose first two characters match
    candidates = compress(range(len(segs)), map(prefixes.__contains__, map(_HEAD2, segs)))
    envelope = {spec.group_header, spec.group_trailer, spec.message_header, spec.message_trailer, spec.trailer}
    group: _Open | None = None
    message: _Open | None = None
    previous = 0
    outside_reported = False

    def close_message(end: int, *, complete: bool) -> None:
        nonlocal message
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
            _body=body,
            _start=message.index,
            _end=end,
        )
        out.messages.append(item)
        if group is not None:
            group.messages.append(item)
        if not complete:
            out.complete = False
        message = None

    def close_group(*, complete: bool) -> None:
        nonlocal group
        if group is None:
            return
        kind, number, sender, receiver, version = group.fields
        out.groups.append(Group(kind, number, sender, receiver, version, complete, tuple(group.messages)))
        if not complete:
            out.complete = False
        group = None

    def describe_group(fields: tuple[str, ...]) -> str:
        return f"{fields[1]!r} ({fields[0]})"

    def describe(fields: tuple[str, ...]) -> str:
        return f"{fields[1]!r} ({fields[0]}, message {len(out.messages) + 1})"

    def abandon_message(end: int) -> None:
        """Close the open message, if any, as incomplete: its trailer never came."""
        if message is not None:
            problems.append(f"message {describe(message.fields)} has no {spec.message_trailer}")
            close_message(end, complete=False)

    def abandon_group() -> None:
        """Close the open group, if any, as incomplete: its trailer never came."""
        if group is not None:
            problems.append(f"group {describe_group(group.fields)} has no {spec.group_trailer}")
            close_group(complete=False)

    for i in candidates:
        if not i:
            continue
        text = segs[i]
        tag = text.split(element, 1)[0]
        if tag not in envelope:
            if tag in spec.free and message is None:
                previous = i
                if tag in spec.standalone:
                    out.standalone.append((i, tag))
            continue
        if message is None and i - previous > 1 and not outside_reported:
            problems.append(f"segments {previous + 1}..{i - 1} are outside any message")
            outside_reported = True
        previous = i
        if tag in (spec.message_trailer, spec.group_trailer):
            first, second = body.pair(i)
        else:
            seg = body.split(i)
        if tag == spec.message_header:
            if message is not None:
                problems.append(
                    f"message {describe(message.fields)} has no {spec.message_trailer} before the next "
                    f"{spec.message_header} at segment {i}"
                )
                close_message(i - 1, complete=False)
            message = _Open(i, spec.read_message(seg))
        elif tag == spec.message_trailer:
            if message is None:
                problems.append(f"{spec.message_trailer} at segment {i} has no {spec.message_header}")
                continue
            said, actual = _count(first), i - message.index + 1
            if said != actual:
                problems.append(
                    f"{spec.message_trailer} of message {describe(message.fields)} says {first!r} segments "
                    f"but the message has {actual}"
                )
            if not same_number(second, message.fields[1]):
                problems.append(
                    f"{spec.message_trailer} control number {second!r} does not match "
                    f"{spec.message_header} {message.fields[1]!r}"
                )
            close_message(i, complete=True)
        elif tag == spec.group_header:
            abandon_message(i - 1)
            abandon_group()
            group = _Open(i, spec.read_group(seg))
        elif tag == spec.group_trailer:
            abandon_message(i - 1)
            if group is None:
                problems.append(f"{spec.group_trailer} at segment {i} has no {spec.group_header}")
                continue
            if _count(first) != len(group.messages):
                problems.append(
                    f"{spec.group_trailer} of group {describe_group(group.fields)} says {first!r} messages "
                    f"but the group has {len(group.messages)}"
                )
            if not same_number(second, group.fields[1]):
                problems.append(
                    f"{spec.group_trailer} control number {second!r} does not match "
                    f"{spec.group_header} {group.fields[1]!r}"
                )
            close_group(complete=True)
        else:  # the interchange trailer
            abandon_message(i - 1)
            abandon_group()
            out.trailer = seg
            if i != len(segs) - 1:
                problems.append(f"segments after the trailer {spec.trailer} at segment {i} are ignored")
            break
    else:
        last = len(segs) - 1
        if message is not None:
            close_message(last, complete=False)
        if group is not None:
            close_group(complete=False)
    if out.trailer is not None:
        counted = len(out.groups) if (out.groups or spec.trailer_counts_groups_only) else len(out.messages)
        unit = "groups" if (out.groups or spec.trailer_counts_groups_only) else "messages"
        if _count(out.trailer.get(1)) != counted:
            problems.append(f"{spec.trailer} says {out.trailer.get(1)!r} {unit} but the interchange has {counted}")
    return out
