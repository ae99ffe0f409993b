"""Acknowledgments of a received interchange: X12 TA1, 997 and 999, EDIFACT CONTRL (no I/O).

    received(interchange, *, rejected, faulty) -> Received    what an acknowledgment needs, read once (small, kept
                                                  after parsing); `rejected` when the receiver parks it whole
    replies(received, kind, *, duplicate=False)   the Reply values of one acknowledgment ("TA1", "997", "999",
                                                  "CONTRL"; a 997 / 999 has one per functional group received)
    render_reply(replies, received, *, sender, control_number, when) -> bytes    one interchange back to the sender
    reply_key(received, *, sender, control_number) -> (source, message id)    its inbox key, without parsing it

X12 (research-edi §1.5): TA1 = TA101 ISA13, TA102 ISA09, TA103 ISA10, TA104 A (accepted) or R (rejected) with the
TA105 note code (I18: 001 ISA13/IEA02 differ, 021 IEA01 is not the number of groups, 023 no IEA (premature end),
025 duplicate interchange); 997 per functional group received = AK1 (GS01, GS06), AK2 (ST01, ST02) and AK5 per
transaction set (A, or R with the 718 code: 2 no SE, 3 ST02/SE02 differ, 4 SE01 is not the segment count, 5 a
segment in error), AK9 (A all accepted, P some, R none; included, received, accepted; 716 code 3 no GE, 4 GS06/GE02
differ, 5 GE01 is not the number of sets); 999 (005010X231A1) the same with IK5 for AK5 and AK103 = GS08. A
rejected interchange (parked whole) has every set R, AK9 R with 0 accepted; its TA1 is R only for an envelope error
(the 997 / 999 carries the rest). EDIFACT (§2.4): CONTRL with UCI (UNB 0020, S002, S003, 0083 = 7 acknowledged or
4 rejected with 0085: 13 no UNZ, 26 duplicate, 28 UNB/UNZ references differ, 29 UNZ count wrong) and one UCM per
message in error (0062, S009, 0083 = 4, 0085: 12 a value in error, 13 no UNT, 28 or 29).
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
SEGMENT_ERROR = "5"
"""AK502 / IK502 (718): one or more segments in error (an invoice the receiver cannot read or store)."""
VALUE_ERROR = "12"
"""CONTRL 0085: invalid value (an invoice the receiver cannot read or store)."""

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
    rejected: bool = False
    """The receiver parked the whole interchange: every set and group is answered as rejected."""

    @property
    def only_acknowledgments(self) -> bool:
        """True when every message is an acknowledgment (or there is none): such an interchange is never answered."""
        return all(t in ACKNOWLEDGMENT_TYPES for t in self.types)


def received(interchange: Interchange, *, rejected: bool = False, faulty: int | None = None) -> Received:
    """Read what its acknowledgments need from an interchange whose header identifies it (`identified`).

    `rejected`: the receiver parks the whole interchange (every set and group is rejected, see `replies`), as it
    does with an incomplete one; `faulty`: the index (among `interchange.messages`) of the message in which a segment
    is in error (an invoice that cannot be read or stored: X12 718 code 5, EDIFACT 0085 code 12). A missing trailer
    is an error of its own: of the interchange (TA1 023, CONTRL 13), a group (716 code 3) or a set (718 code 2).
    """
    segments = interchange.segments
    head, tail = segments[0], segments[-1]
    x12 = interchange.standard == "X12"
    trailer = "IEA" if x12 else "UNZ"
    closed = len(segments) > 1 and tail.tag == trailer
    groups: list[ReceivedGroup] = []
    group: tuple[Segment, list[ReceivedSet]] | None = None
    loose: list[ReceivedSet] = []
    start: Segment | None = None
    count = 0
    index = 0

    def close_set(end: Segment | None) -> None:
        nonlocal start, index
        if start is None:
            return
        found = _set(start, end, count, x12=x12, faulty=index == faulty)
        (group[1] if group is not None else loose).append(found)
        start, index = None, index + 1

    def close_group(end: Segment | None) -> None:
        nonlocal group
        if group is not None:
            groups.append(_group(group[0], end, group[1], x12=x12))
            group = None

    for segment in segments[1:-1] if closed else segments[1:]:
        tag = segment.tag
        if tag in ("GS", "UNG"):
            close_set(None)
            close_group(None)
            group = (segment, [])
        elif tag in ("ST", "UNH"):
            close_set(None)
            start, count = segment, 1
        elif tag in ("GE", "UNE"):
            close_set(None)
            close_group(segment)
        elif start is not None:
            count += 1
            if tag in ("SE", "UNT"):
                close_set(segment)
    close_set(None)
    close_group(None)
    if loose:
        groups.append(ReceivedGroup("", "", "", tuple(loose)))
    if x12:
        requested = head.get(14) == "1"
        prepared = (head.get(9), head.get(10))
        if not closed:
            error = "023"
        else:
            error = "001" if tail.get(2) != head.get(13) else "021" if tail.get(1) != str(len(groups)) else ""
    else:
        requested = head.get(9) == "1"
        prepared = (head.get(4, 1), head.get(4, 2))
        messages = sum(len(g.sets) for g in groups)
        units = len([g for g in groups if g.type]) or messages
        if not closed:
            error = "13"
        else:
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
        rejected=rejected or not interchange.keyable,
    )


def _set(start: Segment, end: Segment | None, count: int, *, x12: bool, faulty: bool = False) -> ReceivedSet:
    """A transaction set or message and its error (X12 718 / EDIFACT 0085 codes): its trailer's, or `faulty`."""
    control = start.get(2) if x12 else start.get(1)
    identifier = (start.get(1),) if x12 else start.composite(2)
    if end is None:
        error = "2" if x12 else "13"
    elif end.get(2) != control:
        error = "3" if x12 else "28"
    elif end.get(1) != str(count):
        error = "4" if x12 else "29"
    elif faulty:
        error = SEGMENT_ERROR if x12 else VALUE_ERROR
    else:
        error = ""
    return ReceivedSet(identifier[0] if identifier else "", control, identifier, error)


def _group(start: Segment, end: Segment | None, sets: list[ReceivedSet], *, x12: bool) -> ReceivedGroup:
    """A functional group and its trailer's error (X12 716 codes)."""
    control = start.get(6) if x12 else start.get(5)
    if end is None:
        error = "3"
    elif end.get(2) != control:
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
        return [_functional(group, kind, rejected=subject.rejected) for group in subject.groups]
    if kind == "CONTRL":
        return [_contrl(subject, duplicate=duplicate)]
    raise ValueError(f"no acknowledgment of kind {kind!r}: expected TA1, 997, 999 or CONTRL")


def _functional(group: ReceivedGroup, kind: str, *, rejected: bool = False) -> Reply:
    """The 997 / 999 transaction set of one functional group received (AK1, AK2 + AK5 / IK5 per set, AK9)."""
    segments = [_s("AK1", group.type, group.control_number, *([group.version] if kind == "999" else []))]
    accepted = 0
    answer = "IK5" if kind == "999" else "AK5"
    for found in group.sets:
        segments.append(_s("AK2", found.type, found.control_number))
        if found.error:
            segments.append(_s(answer, "R", found.error))
        elif rejected:  # parked with a sibling at fault: a 999 must say why (IK502), a 997 need not
            segments.append(_s(answer, "R", *([SEGMENT_ERROR] if kind == "999" else [])))
        else:
            segments.append(_s(answer, "A"))
            accepted += 1
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
    action = "4" if error or (subject.rejected and not duplicate) else "7"
    uci = _s(
        "UCI",
        subject.control_number,
        party(subject.sender),
        party(subject.receiver),
        *((action, error) if error else (action,)),
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
