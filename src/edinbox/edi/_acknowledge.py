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
message in error (0062, S009, 0083 = 4, 0085: 12 a value in error, 13 no UNT, 28 or 29); the messages of a UNG
group in error, or holding one, follow its UCF (0048, 0083 = 4 with 13 no UNE, 28 or 29, or 7).

A trailer's count or control number that disagrees with its content is read from `Interchange.disagreements`,
the parser's one check of them (counts as numbers, control numbers as numbers when both are digits: "0001" is "1").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from edinbox.edi._errors import Finding
from edinbox.edi._interchange import Interchange
from edinbox.edi._key import source
from edinbox.edi._model import EdiMessage, Party, Segment, Separators
from edinbox.edi._render import Reply, render_interchange

__all__ = [
    "ACKNOWLEDGMENT_TYPES",
    "PARTY_ERRORS",
    "Received",
    "ReceivedGroup",
    "ReceivedSet",
    "party_error",
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
MISSING = "13"
"""CONTRL 0085: missing (a UNT, UNE or UNZ)."""
MISSING_SET = "2"
"""AK502 / IK502 (718): missing trailer segment (no SE)."""
MISSING_GROUP = "3"
"""AK905 (716): functional group trailer missing (no GE)."""
MISSING_INTERCHANGE = "023"
"""TA105 (I18): improper (premature) end-of-file (no IEA)."""

UNKNOWN_SENDER = "006"
"""TA105 (I18): invalid interchange sender ID (X12 has no "unknown sender": a sender without an agreement)."""
UNKNOWN_RECEIVER = "009"
"""TA105 (I18): unknown interchange receiver ID (an interchange addressed to a party that is not the receiver)."""
UNKNOWN_SENDER_CODE = "23"
"""CONTRL 0085: unknown interchange sender."""
UNKNOWN_RECEIVER_CODE = "7"
"""CONTRL 0085: interchange recipient not actual recipient."""
PARTY_ERRORS = frozenset(
    {
        ("X12", UNKNOWN_SENDER),
        ("X12", UNKNOWN_RECEIVER),
        ("EDIFACT", UNKNOWN_SENDER_CODE),
        ("EDIFACT", UNKNOWN_RECEIVER_CODE),
    }
)
"""(standard, envelope error) pairs that say the receiver refuses the parties, not the data (see `party_error`)."""

_999_VERSION = "005010X231A1"
_X12_999 = Separators(element="*", component=">", segment="~", repetition="^")
_OUR_SEPARATORS = frozenset("*>~^:+'?")
"""Every separator an acknowledgment of ours may use (X12 and EDIFACT defaults)."""


@dataclass(frozen=True, slots=True)
class ReceivedSet:
    """One received transaction set (X12 ST..SE) or message (EDIFACT UNH..UNT) and its error, "" when none."""

    type: str
    control_number: str
    identifier: tuple[str, ...]
    """EDIFACT S009 (type, version, release, agency...); X12: (ST01,)."""
    error: str = ""
    findings: tuple[Finding, ...] = ()
    """Its segment and element errors (X12 AK3/AK4, IK3/IK4), as the reader of its invoice found them."""
    unit: tuple[str, ...] = ()
    """The business unit its errors belong to, for the 999's CTX after each IK3: ("BIG02", invoice number)."""


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


def received(
    interchange: Interchange,
    *,
    rejected: bool = False,
    faulty: int | None = None,
    finding: Finding | None = None,
    findings: Mapping[int, Sequence[Finding]] | None = None,
) -> Received:
    """Read what its acknowledgments need from an interchange whose header identifies it (`identified`).

    `rejected`: the receiver parks the whole interchange (every set and group is rejected, see `replies`), as it
    does with an incomplete one; `faulty`: the index (among `interchange.messages`) of the message in which a segment
    is in error (an invoice that cannot be read or stored: X12 718 code 5, EDIFACT 0085 code 12), and `finding`
    where in it (`EdiSyntaxError.finding`: the 997's AK3/AK4, the 999's IK3/IK4). A missing trailer
    is an error of its own: of the interchange (TA1 023, CONTRL 13), a group (716 code 3) or a set (718 code 2). A
    trailer that disagrees with its content is the parser's `Interchange.disagreements`, with their codes: the one
    check the hub also parks on, so it never books what it answers as rejected. `findings`: the validator's, by
    message index (`edinbox.edi.validate`): listed in the acknowledgment (AK3/AK4, IK3/IK4/CTX, UCS/UCD); a set with
    findings is accepted with errors (AK5 E, CONTRL UCM 7) unless the interchange is `rejected` (then R, code 5 / 12).
    """
    x12 = interchange.standard == "X12"
    codes: dict[tuple[str, int], str] = {}
    for found in interchange.disagreements:
        codes.setdefault((found.level, found.index), found.code)  # a control number before a count, as met

    noted = findings or {}

    def answer(message: EdiMessage) -> ReceivedSet:
        own = tuple(noted.get(message.index, ()))
        at_fault = message.index == faulty or (rejected and bool(own))
        found = _set(message, x12=x12, error=codes.get(("set", message.index), ""), faulty=at_fault)
        if message.index == faulty and finding is not None:  # the reader's, unless the validator said it too
            said = {(f.segment, f.position, f.element, f.component) for f in own}
            if (finding.segment, finding.position, finding.element, finding.component) not in said:
                own = tuple(sorted((finding, *own), key=lambda f: f.position))
        return replace(found, findings=own, unit=_unit(message) if x12 else ()) if own else found

    groups = [
        ReceivedGroup(
            group.type,
            group.control_number,
            group.version if x12 else "",
            tuple(answer(m) for m in group.messages),
            codes.get(("group", at), "") if group.complete else MISSING_GROUP if x12 else MISSING,
        )
        for at, group in enumerate(interchange.groups)
    ]
    loose = tuple(answer(m) for m in interchange.messages if m.group_control_number is None)
    if loose:
        groups.append(ReceivedGroup("", "", "", loose))
    head = interchange.header
    if x12:
        requested = head.get(14) == "1"
        prepared = (head.get(9), head.get(10))
    else:
        requested = head.get(9) == "1"
        prepared = (head.get(4, 1), head.get(4, 2))
    if interchange.trailer is None:
        error = MISSING_INTERCHANGE if x12 else MISSING
    else:
        error = codes.get(("interchange", 0), "")
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


def party_error(standard: str, *, sender: bool) -> str:
    """The envelope error (`Received.error`) of an interchange refused for its parties: an unknown sender (TA1 R 006,
    CONTRL UCI 4 23) or a receiver that is not ours (TA1 R 009, CONTRL UCI 4 7)."""
    if standard == "X12":
        return UNKNOWN_SENDER if sender else UNKNOWN_RECEIVER
    return UNKNOWN_SENDER_CODE if sender else UNKNOWN_RECEIVER_CODE


def _set(message: EdiMessage, *, x12: bool, error: str, faulty: bool) -> ReceivedSet:
    """A transaction set or message and its error (X12 718 / EDIFACT 0085 codes): no trailer, its trailer's
    disagreement, or `faulty`."""
    if not message.complete:
        error = MISSING_SET if x12 else MISSING
    elif not error and faulty:
        error = SEGMENT_ERROR if x12 else VALUE_ERROR
    header = message.header
    identifier = (header.get(1),) if x12 else header.composite(2)
    return ReceivedSet(identifier[0] if identifier else "", message.control_number, identifier, error)


_UNITS = {"810": ("BIG", 2, "BIG02")}
"""Per X12 transaction set, the element that names its business unit (segment, position, name): the invoice number."""


def _unit(message: EdiMessage) -> tuple[str, ...]:
    """The business unit of a set, (name, value) for the 999's CTX, when its set names one fit to be copied."""
    where = _UNITS.get(message.type)
    if where is None:
        return ()
    tag, position, name = where
    start, stop = message.segment_range
    for k in range(start + 1, min(stop, start + 6)):  # BIG opens the 810, right after ST
        segment = message._body.split(k)  # the parser's own tokens: same package
        if segment.tag == tag:
            value = segment.get(position)
            return (name, value) if _copyable(value) and len(value) <= 35 else ()
    return ()


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
    accepted = noted = 0
    answer = "IK5" if kind == "999" else "AK5"
    for found in group.sets:
        segments.append(_s("AK2", found.type, found.control_number))
        segments += _detail(found.findings, kind, unit=found.unit)
        if found.error:
            segments.append(_s(answer, "R", found.error))
        elif rejected:  # parked with a sibling at fault: a 999 must say why (IK502), a 997 need not
            segments.append(_s(answer, "R", *([SEGMENT_ERROR] if kind == "999" else [])))
        elif found.findings:  # accepted with errors: the partner must not send it again
            segments.append(_s(answer, "E", SEGMENT_ERROR))
            accepted += 1
            noted += 1
        else:
            segments.append(_s(answer, "A"))
            accepted += 1
    total = len(group.sets)
    if group.error or not accepted:
        status = "R"
    elif accepted < total:
        status = "P"
    else:
        status = "E" if noted else "A"
    ak9 = [status, str(total), str(total), str(accepted)] + ([group.error] if group.error else [])
    segments.append(_s("AK9", *ak9))
    return Reply(kind, tuple(segments), version=_999_VERSION if kind == "999" else "004010")


def _detail(findings: Sequence[Finding], kind: str, *, unit: tuple[str, ...] = ()) -> list[Segment]:
    """AK3 / IK3 (segment id, position in the set, loop id when known, 720 / 620 code) once per segment in error and,
    for each element error in it, AK4 / IK4 (element position with its component, data element reference, 723 / 621
    code, the bad value); a 999 adds after each IK3 the CTX of the set's business unit ("BIG02>INV-1"), and after
    an IK4 the CTX of its situational trigger (the element that made it required or excluded)."""
    x999 = kind == "999"
    segment_tag, element_tag = ("IK3", "IK4") if x999 else ("AK3", "AK4")
    out = []
    last: tuple[str, int, str] | None = None
    for found in findings:
        if (found.segment, found.position, found.segment_code) != last:  # one AK3 / IK3 per segment, then its AK4s
            out.append(_s(segment_tag, found.segment, str(found.position), found.loop, found.segment_code))
            last = (found.segment, found.position, found.segment_code)
            if x999 and unit:
                out.append(_s("CTX", unit))
        if found.element:
            where = (str(found.element), str(found.component)) if found.component else (str(found.element),)
            bad = [found.value] if _copyable(found.value) else []  # AK404 / IK404: an..99, optional
            code = found.code if x999 else _4010_CODES.get(found.code, found.code)
            out.append(_s(element_tag, where, found.reference, code, *bad))
            if x999 and found.trigger:  # the element whose presence made this one required or excluded
                trigger = (found.segment, str(found.position), found.loop, str(found.trigger))
                out.append(_s("CTX", "SITUATIONAL TRIGGER", *trigger))
    return out


_4010_CODES = {"13": "3"}
"""X12 723 codes a 997 (004010) lacks: too many components is told as too many data elements."""


def _copyable(value: str) -> bool:
    """True when a bad value can be copied into an acknowledgment as it was sent: 1 to 99 printable ASCII
    characters, none of them a separator of ours (the partner's separators may differ)."""
    return 0 < len(value) <= 99 and value.isascii() and value.isprintable() and not (set(value) & _OUR_SEPARATORS)


def _contrl(subject: Received, *, duplicate: bool) -> Reply:
    """UCI for the interchange, then one UCM per rejected message."""

    def party(p: Party) -> tuple[str, ...]:
        return (p.id, p.qualifier) if p.qualifier else (p.id,)

    error = DUPLICATE_CODE if duplicate else subject.error
    action = "4" if error or (subject.rejected and not duplicate) else "7"  # 7: accepted, with errors if UCMs say
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
            ucm = [
                segment
                for m in group.sets
                if m.error or m.findings
                for segment in (_ucm(m, rejected=subject.rejected), *_contrl_detail(m.findings))
            ]
            if group.type and (group.error or ucm):  # a UNG group in error, or holding one: UCF, then its UCMs
                status = "4" if group.error or subject.rejected else "7"
                codes = (status, group.error) if group.error else (status,)
                segments.append(_s("UCF", group.control_number, (), (), *codes))
            segments += ucm
    return Reply("CONTRL", tuple(segments))


def _ucm(found: ReceivedSet, *, rejected: bool) -> Segment:
    """A message's UCM: 0083 = 4 rejected (with its 0085 code), or 7 accepted with the errors its UCS/UCD list."""
    if found.error or rejected:
        return _s("UCM", found.control_number, found.identifier, "4", found.error or VALUE_ERROR)
    return _s("UCM", found.control_number, found.identifier, "7")


_EDIFACT_CODES = {
    "1": "13",
    "2": "13",
    "3": "16",
    "4": "40",
    "5": "39",
    "6": "37",
    "7": "12",
    "8": "12",
    "9": "12",
    "10": "14",
    "13": "16",
}
"""X12 723 element error codes as CONTRL 0085 codes: missing, too many constituents, too short, too long, invalid
type of character, invalid value, value not supported in this position."""
_EDIFACT_SEGMENT_CODES = {"1": "15", "2": "15", "3": "13", "4": "36", "5": "35", "6": "15", "7": "15"}
"""X12 720 segment error codes as CONTRL 0085 codes: not supported in this position, missing, too many segment group
repetitions, too many segment repetitions (8, element errors, has no code of its own: its UCDs say them)."""


def _contrl_detail(findings: Sequence[Finding]) -> list[Segment]:
    """UCS (segment position in the message from UNH = 1, and 13 when a mandatory segment is missing) and, for an
    element error, UCD (0085 code; S011: element position, component position)."""
    out = []
    last: tuple[int, str] | None = None
    for found in findings:
        if (found.position, found.segment_code) != last:  # one UCS per segment, then its UCDs
            code = _EDIFACT_SEGMENT_CODES.get(found.segment_code)
            out.append(_s("UCS", str(found.position), *([code] if code else [])))
            last = (found.position, found.segment_code)
        if found.element:
            where = (str(found.element), str(found.component)) if found.component else (str(found.element),)
            out.append(_s("UCD", _EDIFACT_CODES.get(found.code, "12"), where))
    return out


def reply_key(subject: Received, *, sender: Party, control_number: str) -> tuple[str, str]:
    """The inbox key `(source, message id)` of the acknowledgment `render_reply` writes with these arguments: what
    `parse(...)[0].message()` gives back, without parsing it."""
    control = control_number.zfill(9) if subject.standard == "X12" else control_number
    return source(subject.standard, sender, subject.sender, test=subject.test), control


def render_reply(
    replies: Sequence[Reply], subject: Received, *, sender: Party, control_number: str, when: datetime
) -> bytes:
    """The interchange that carries `replies` from `sender` (us) back to the subject's sender, test when it was: a
    TA1 with the 997 / 999 of the same interchange travel together, the TA1 before the group, under one control
    number."""
    return render_interchange(
        replies,
        standard=subject.standard,
        sender=sender,
        receiver=subject.sender,
        control_number=control_number,
        test=subject.test,
        prepared_at=when,
        separators=_X12_999 if any(r.type == "999" for r in replies) else None,
    )
