"""What validating an interchange found, kept beside its journal row (`edinbox_hub_findings`): `edinbox show` prints
it and the console's story tells it, long after the acknowledgment that carried it went out.

One row per interchange key, written by `record_findings` in the transaction that settles the interchange
(`Batch.record`), for every interchange an agreement validates (`validate = "report"` or `"strict"`, parked ones
included): `errors` counts every finding (those past the `KEPT` first included), `findings` is a JSON list of the
first `KEPT`, each an object:

    message     the ST02 / UNH 0062 of the message at fault, and `type` its type (810, INVOIC)
    position    the segment's 1-based position in its message (ST / UNH = 1), `segment` its tag, `loop` its loop
    element     the element's 1-based position (0: the segment itself), `component` in a composite (0: simple),
                `reference` its data element number (373, 2380)
    code        X12 723 for an element (1 missing, 4 too short, 5 too long, 7 invalid code, 8 invalid date...),
                `segment_code` X12 720 for the segment (1 unrecognized, 3 mandatory segment missing, 8 element errors)
    value       the value as sent, cut to `VALUE` characters

The first validation of a key is kept: a duplicate or a conflicting copy does not replace it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from edinbox import edi

__all__ = [
    "KEPT",
    "VALUE",
    "compact_findings",
    "describe_finding",
    "findings_lines",
    "findings_summary",
    "read_findings",
    "record_findings",
]

KEPT = 100
"""Findings kept per interchange: the list an analyst reads; the rest are counted."""

VALUE = 35
"""Characters of a bad value kept (an AK4's value is at most 99; a line of the story fits 35)."""

_WORDS = {
    "1": "missing",
    "2": "missing (conditionally required)",
    "3": "too many data elements",
    "4": "too short",
    "5": "too long",
    "6": "invalid character",
    "7": "invalid code value",
    "8": "invalid date",
    "9": "invalid time",
    "10": "excluded by another element",
    "13": "too many components",
}
"""X12 723 element codes in words."""

_SEGMENT_WORDS = {
    "1": "unrecognized segment",
    "2": "unexpected segment",
    "3": "mandatory segment missing",
    "4": "loop over its maximum repeat",
    "5": "segment over its maximum use",
}
"""X12 720 segment codes in words."""


def compact_findings(interchange: edi.Interchange, validation: edi.Validation) -> tuple[int, str]:
    """How many errors `validation` found in `interchange`, and the JSON list of the first `KEPT` (see the module)."""
    errors = sum(map(len, validation.findings.values())) + validation.dropped
    kept: list[dict[str, Any]] = []
    for index, found in validation.findings.items():
        message = interchange.messages[index]
        for finding in found[: KEPT - len(kept)]:
            kept.append(
                {
                    "message": message.control_number,
                    "type": message.type,
                    "position": finding.position,
                    "segment": finding.segment,
                    "loop": finding.loop,
                    "element": finding.element,
                    "component": finding.component,
                    "reference": finding.reference,
                    "code": finding.code,
                    "segment_code": finding.segment_code,
                    "value": finding.value[:VALUE],
                }
            )
        if len(kept) >= KEPT:
            break
    return errors, json.dumps(kept, ensure_ascii=False, separators=(",", ":"))


def describe_finding(finding: dict[str, Any]) -> str:
    """One finding (an object of the JSON list) in words: "810 0001: BIG02 (373) in segment 2: invalid date '2026'"."""
    segment, position = finding.get("segment", ""), finding.get("position", 0)
    element = int(finding.get("element") or 0)
    if element:
        component = f"-{finding['component']}" if finding.get("component") else ""
        reference = f" ({finding['reference']})" if finding.get("reference") else ""
        where = f"{segment}{element:02d}{component}{reference} in segment {position}"
        what = _WORDS.get(str(finding.get("code")), "an error")
    else:
        where = f"{segment} (segment {position})"
        what = _SEGMENT_WORDS.get(str(finding.get("segment_code")), "an error")
    loop = f" of loop {finding['loop']}" if finding.get("loop") else ""
    value = f" {finding['value']!r}" if finding.get("value") else ""
    return f"{finding.get('type', '')} {finding.get('message', '')}: {where}{loop}: {what}{value}"


def findings_summary(validated: dict[str, Any]) -> str:
    """The first line of what was found: "validated: no errors", "validated: 3 errors (the first 2 kept)"."""
    errors, kept = int(validated.get("errors") or 0), len(validated.get("findings") or ())
    if not errors:
        return "validated: no errors"
    counted = "1 error" if errors == 1 else f"{errors} errors"
    return f"validated: {counted}" + (f" (the first {kept} kept)" if kept < errors else "")


def findings_lines(validated: dict[str, Any]) -> list[str]:
    """What `read` returned as text: the summary, then each finding kept in words, indented."""
    return [findings_summary(validated), *(f"  {describe_finding(f)}" for f in validated.get("findings") or ())]


async def record_findings(tx: Any, *, consumer: str, found: Sequence[tuple[tuple[str, str], tuple[int, str]]]) -> None:
    """Keep, in the caller's transaction, the findings (errors, JSON) of each interchange key (source, message id),
    in one batch of statements; a key that has a row keeps it."""
    if found:
        rows = [
            {"consumer": consumer, "source": key[0], "message_id": key[1], "errors": errors, "findings": text}
            for key, (errors, text) in found
        ]
        await tx.unit.run_many("hub_record_findings", rows)


async def read_findings(tx: Any, *, consumer: str, source: str, message_id: str) -> dict[str, Any] | None:
    """The findings kept for one interchange key: `errors`, `findings` (the list) and `at`; None when it was not
    validated."""
    rows = await tx.unit.fetch("hub_findings_of", {"consumer": consumer, "source": source, "message_id": message_id})
    if not rows:
        return None
    errors, text, at = rows[0]
    try:
        findings = json.loads(text)
    except ValueError:  # written by this module only: a row edited by hand is shown as it is
        findings = [{"value": str(text)[:VALUE]}]
    return {"errors": int(errors), "findings": findings, "at": at}
