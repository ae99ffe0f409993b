"""Acknowledgments of a received interchange: X12 TA1, 997 and 999, EDIFACT CONTRL (no I/O).

    received(interchange) -> Received             what an acknowledgment needs, read once (small, kept after parsing)
    replies(received, kind, *, duplicate=False)   the Reply values of one acknowledgment ("TA1", "997", "999",
                                                  "CONTRL"; a 997 / 999 has one per functional group received)
    render_reply(replies, received, *, sender, control_number, when) -> bytes    one interchange back to the sender
    reply_key(received, *, sender, control_number) -> (source, message id)    its inbox key, without parsing it

X12 (research-edi §1.5): TA1 = TA101 ISA13, TA102 ISA09, TA103 ISA10, TA104 A (accepted) or R (rejected) with the
TA105 note code (I18: 001 ISA13/IEA02 differ, 021 IEA01 is not the number of groups, 025 duplicate interchange);
997 per functional group received = AK1 (GS01, GS06), AK2 (ST01, ST02) and AK5 per transaction set (A, or R with
the 718 code: 3 ST02/SE02 differ, 4 SE01 is not the segment count), AK9 (A all accepted, P some, R none; included,
received, accepted; 716 code 4 GS06/GE02 differ, 5 GE01 is not the number of sets); 999 (005010X231A1) the same
with IK5 for AK5 and AK103 = GS08. EDIFACT (§2.4): CONTRL with UCI (UNB 0020, S002, S003, 0083 = 7 acknowledged or
4 rejected with 0085: 26 duplicate, 28 UNB/UNZ references differ, 29 UNZ count wrong) and one UCM per rejected
message (0062, S009, 0083 = 4, 0085 28 or 29).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from edinbox.edi._interchange import Interchange
from edinbox.edi._key import source
from edinbox.edi._model import Party, Segment, Separators
from edinbox.edi._render import Reply, render_interchange

__all__ = [
    "ACKNOWLEDGMENT_TYPES",
    "Received",
    "ReceivedGroup",
    "ReceivedSet",
    "received",
    "render_reply",
    "replies",
    "reply_key",
]

ACKNOWLEDGMENT_TYPES = frozenset({"997", "999", "TA1", "CONTRL"})
"""Message types that are acknowledgments: an interchange of only these is never acknowledged."""

DUPLICATE_NOTE = "025"
"""TA105 (I18): Duplicate Interchange Control Number."""
DUPLICATE_CODE = "26"
"""CONTRL 0085: duplicate detected."""

_999_VERSION = "005010X231A1"
_X12_999 = Separators(element="*", component=">", segment="~", repetition="^")


@dataclass(frozen=True, slots=True)
class ReceivedSet:
    """One received transaction set (X12 ST..SE) or message (EDIFACT UNH..UNT) and its error, "" when none."""

    type: str
    control_number: str
    identifier: tuple[str, ...]
    """EDIFACT S009 (type, version, release, agency...); X12: (ST01,)."""
    error: str = ""


@dataclass(frozen=True, slots=True)
class ReceivedGroup:
    """One received X12 functional group (GS..GE); EDIFACT messages sit in one group of type ""."""

    type: str
    control_number: str
    version: str
    sets: tuple[ReceivedSet, ...]
    error: str = ""


@dataclass(frozen=True, slots=True)
class Received:
    """What acknowledging an interchange needs, read once from it (so the parsed interchange need not be kept)."""

    standard: str
    sender: Party
    receiver: Party
    control_number: str
    test: bool
    prepared: tuple[str, str]
    """ISA09/ISA10, or UNB S004 date and time, as sent."""
    requested: bool
    """ISA14 = 1, or UNB 0031 = 1: the sender asks for an acknowledgment of the interchange."""
    groups: tuple[ReceivedGroup, ...]
    error: str = ""
    """The envelope's error: a TA1 note code (X12) or a CONTRL 0085 code (EDIFACT), "" when none."""
    types: tuple[str, ...] = ()

    @property
    def only_acknowledgments(self) -> bool:
        """True when every message is an acknowledgment (or there is none): such an interchange is never answered."""
        return all(t in ACKNOWLEDGMENT_TYPES for t in self.types)


def received(interchange: Interchange) -> Received:
    """Read what its acknowledgments need from a keyable interchange."""
    segments = interchange.segments
    head, tail = segments[0], segments[-1]
    x12 = interchange.standard == "X12"
    groups: list[ReceivedGroup] = []
    group: tuple[Segment, list[ReceivedSet]] | None = None
    loose: list[ReceivedSet] = []
    start: Segment | None = None
    count = 0
    for segment in segments[1:-1]:
        tag = segment.tag
        if tag in ("GS", "UNG"):
            group = (segment, [])
        elif tag in ("ST", "UNH"):
            start, count = segment, 1
        elif start is not None:
            count += 1
            if tag in ("SE", "UNT"):
                found = _set(start, segment, count, x12=x12)
                (group[1] if group is not None else loose).append(found)
                start = None
        elif tag in ("GE", "UNE") and group is not None:
            groups.append(_group(group[0], segment, group[1], x12=x12))
            group = None
    if loose:
        groups.append(ReceivedGroup("", "", "", tuple(loose)))
    if x12:
        requested = head.get(14) == "1"
        prepared = (head.get(9), head.get(10))
        error = "001" if tail.get(2) != head.get(13) else "021" if tail.get(1) != str(len(groups)) else ""
    else:
        requested = head.get(9) == "1"
        prepared = (head.get(4, 1), head.get(4, 2))
        messages = sum(len(g.sets) for g in groups)
        units = len([g for g in groups if g.type]) or messages
        error = "28" if tail.get(2) != head.get(5) else "29" if tail.get(1) != str(units) else ""
    types = tuple(dict.fromkeys(t.upper() for t in interchange.message_types))
    return Received(
        standard=interchange.standard,
        sender=interchange.sender,
        receiver=interchange.receiver,
        control_number=interchange.control_number,
        test=interchange.test,
        prepared=prepared,
        requested=requested,
        groups=tuple(groups),
        error=error,
        types=types,
    )


def _set(start: Segment, end: Segment, count: int, *, x12: bool) -> ReceivedSet:
    """A transaction set or message and its trailer's error (X12 718 / EDIFACT 0085 codes)."""
    control = start.get(2) if x12 else start.get(1)
    identifier = (start.get(1),) if x12 else start.composite(2)
    trailer_control = end.get(2)
    if trailer_control != control:
        error = "3" if x12 else "28"
    elif end.get(1) != str(count):
        error = "4" if x12 else "29"
    else:
        error = ""
    return ReceivedSet(identifier[0] if identifier else "", control, identifier, error)


def _group(start: Segment, end: Segment, sets: list[ReceivedSet], *, x12: bool) -> ReceivedGroup:
    """A functional group and its trailer's error (X12 716 codes)."""
    control = start.get(6) if x12 else start.get(5)
    if end.get(2) != control:
        error = "4"
    elif end.get(1) != str(len(sets)):
        error = "5"
    else:
        error = ""
    return ReceivedGroup(start.get(1), control, start.get(8) if x12 else "", tuple(sets), error)


def _s(tag: str, *values: str | tuple[str, ...]) -> Segment:
    return Segment(tag, tuple(v if isinstance(v, tuple) else (v,) for v in values))


def replies(subject: Received, kind: str, *, duplicate: bool = False) -> list[Reply]:
    """The acknowledgment `kind` ("TA1", "997", "999", "CONTRL") of `subject`, as the messages of one interchange;
    `duplicate` makes it the notice that the interchange was a duplicate (TA1 R 025, CONTRL UCI 4 26)."""
    if kind == "TA1":
        if duplicate:
            status, note = "R", DUPLICATE_NOTE
        else:
            status, note = ("R", subject.error) if subject.error else ("A", "000")
        date, time = subject.prepared
        return [Reply("TA1", (_s("TA1", subject.control_number, date, time, status, note),))]
    if kind in ("997", "999"):
        return [_functional(group, kind) for group in subject.groups]
    if kind == "CONTRL":
        return [_contrl(subject, duplicate=duplicate)]
    raise ValueError(f"no acknowledgment of kind {kind!r}: expected TA1, 997, 999 or CONTRL")


def _functional(group: ReceivedGroup, kind: str) -> Reply:
    """The 997 / 999 transaction set of one functional group received (AK1, AK2 + AK5 / IK5 per set, AK9)."""
    segments = [_s("AK1", group.type, group.control_number, *([group.version] if kind == "999" else []))]
    accepted = 0
    for found in group.sets:
        segments.append(_s("AK2", found.type, found.control_number))
        answer = "IK5" if kind == "999" else "AK5"
        segments.append(_s(answer, "R", found.error) if found.error else _s(answer, "A"))
        accepted += not found.error
    total = len(group.sets)
    status = "R" if group.error or not accepted else "A" if accepted == total else "P"
    ak9 = [status, str(total), str(total), str(accepted)] + ([group.error] if group.error else [])
    segments.append(_s("AK9", *ak9))
    return Reply(kind, tuple(segments), version=_999_VERSION if kind == "999" else "004010")


def _contrl(subject: Received, *, duplicate: bool) -> Reply:
    """UCI for the interchange, then one UCM per rejected message."""

    def party(p: Party) -> tuple[str, ...]:
        return (p.id, p.qualifier) if p.qualifier else (p.id,)

    error = DUPLICATE_CODE if duplicate else subject.error
    uci = _s(
        "UCI",
        subject.control_number,
        party(subject.sender),
        party(subject.receiver),
        *(("4", error) if error else ("7",)),
    )
    segments = [uci]
    if not duplicate:
        for group in subject.groups:
            segments += [_s("UCM", m.control_number, m.identifier, "4", m.error) for m in group.sets if m.error]
    return Reply("CONTRL", tuple(segments))


def reply_key(subject: Received, *, sender: Party, control_number: str) -> tuple[str, str]:
    """The inbox key `(source, message id)` of the acknowledgment `render_reply` writes with these arguments: what
    `parse(...)[0].message()` gives back, without parsing it."""
    control = control_number.zfill(9) if subject.standard == "X12" else control_number
    return source(subject.standard, sender, subject.sender, test=subject.test), control


def render_reply(
    replies: Sequence[Reply], subject: Received, *, sender: Party, control_number: str, when: datetime
) -> bytes:
    """The interchange that carries `replies` from `sender` (us) back to the subject's sender, test when it was."""
    return render_interchange(
        replies,
        standard=subject.standard,
        sender=sender,
        receiver=subject.sender,
        control_number=control_number,
        test=subject.test,
        prepared_at=when,
        separators=_X12_999 if replies[0].type == "999" else None,
    )
