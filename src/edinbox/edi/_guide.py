"""Implementation guides as data: the rules a message is validated against (`edinbox.edi.validate`), no I/O but
reading the package's own guide files.

A guide is a JSON file in `edinbox/edi/guides/` (the format is in docs/validation.md):

    structure   segments in order, "TAG REQ MAX" (REQ M or O), and loops {"loop": ID, "use": "REQ MAX",
                "segments": [...]} whose first segment opens each iteration
    segments    per tag, its elements in order: "REF REQ TYPE MIN MAX" (REQ M, O or X: X12's conditional, checked
                by `conditions` only) or "COMPOSITE REQ" naming an entry of `composites`
    composites  per composite, its components as "REF REQ TYPE MIN MAX"
    conditions  per tag, X12 syntax notes: P0304 (paired: all or none), R0203 (at least one), C0403 (if the first,
                then the others), E0203 (not more than one)
    codes       per data element reference, the values allowed (an element without a list takes any value)
    base        another guide this one starts from: its tables are merged over the base's, entry by entry

Types: AN (text), ID (a code), N0..N9 (digits, implied decimals, a leading minus sign), R (a decimal number, "." or
the EDIFACT decimal mark, a leading minus sign), DT (X12: CCYYMMDD or YYMMDD; EDIFACT 2380: as its 2379 format says,
102 CCYYMMDD by default), TM (HHMM, HHMMSS, HHMMSSd..). Lengths count characters, or digits for N and R types.

`guide(standard, message, version)` finds the shipped guide for a message (X12 810 004010 / 005010, 850 004010,
EDIFACT INVOIC D96A / D01B; None for any other); `Overlay.parse(require, allow)` reads an agreement's overlay and
`Guide.with_overlay` applies it.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

__all__ = ["GUIDES", "Element", "Guide", "Node", "Overlay", "Rule", "guide", "load"]

GUIDES = ("x12-810-004010", "x12-810-005010", "x12-850-004010", "edifact-invoic-d96a", "edifact-invoic-d01b")
"""The guides shipped with edinbox."""

TYPES = frozenset({"AN", "ID", "R", "DT", "TM", *(f"N{d}" for d in range(10))})


@dataclass(frozen=True, slots=True)
class Rule:
    """One simple element or component: its data element reference, requirement, type, lengths and codes."""

    ref: str
    required: bool
    type: str
    min: int
    max: int
    codes: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class Element:
    """One element of a segment: a simple one (`rule`) or a composite (`components`)."""

    ref: str
    required: bool
    rule: Rule | None = None
    components: tuple[Rule, ...] = ()


@dataclass(frozen=True, slots=True)
class Node:
    """A segment or a loop of the structure: `tag` is the segment's (a loop's first segment's), `loop` the loop id."""

    tag: str
    required: bool
    repeat: int
    loop: str = ""
    children: tuple[Node, ...] = ()


@dataclass(frozen=True, slots=True)
class Overlay:
    """A partner's changes to a guide, from its agreement: what it requires and what more it allows.

    `require`: "BIG04" (an element, "SEGnn" or "SEGnn-c" for a component, made mandatory), "BIG" (a segment that must
    be there), "RFF+ON" (a segment that must be there with this qualifier in its first element); `allow`: "REF*20"
    (the segment may repeat up to 20 times wherever the guide has it) or "ZZZ" (a segment accepted anywhere).
    """

    elements: tuple[tuple[str, int, int], ...] = ()
    segments: tuple[tuple[str, str], ...] = ()
    repeats: tuple[tuple[str, int], ...] = ()
    anywhere: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, require: str = "", allow: str = "") -> Overlay:
        """Read the agreement's `require` and `allow` (comma- or space-separated); ValueError naming a bad entry."""
        elements, segments, repeats, anywhere = [], [], [], set()
        for item in _items(require):
            if match := re.fullmatch(r"([A-Z][A-Z0-9]{1,2})([0-9]{2})(?:-([0-9]{1,2}))?", item):
                elements.append((match[1], int(match[2]), int(match[3] or 0)))
            elif match := re.fullmatch(r"([A-Z][A-Z0-9]{1,2})(?:\+([A-Za-z0-9]{1,3}))?", item):
                segments.append((match[1], match[2] or ""))
            else:
                raise ValueError(f"require: {item[:40]!r} is not SEG, SEG+QUALIFIER, SEGnn or SEGnn-c (e.g. BIG04)")
        for item in _items(allow):
            if match := re.fullmatch(r"([A-Z][A-Z0-9]{1,2})\*([0-9]{1,7})", item):
                repeats.append((match[1], int(match[2])))
            elif re.fullmatch(r"[A-Z][A-Z0-9]{1,2}", item):
                anywhere.add(item)
            else:
                raise ValueError(f"allow: {item[:40]!r} is not SEG*MAX (e.g. REF*20) or SEG")
        return cls(tuple(elements), tuple(segments), tuple(repeats), frozenset(anywhere))

    def __bool__(self) -> bool:
        return bool(self.elements or self.segments or self.repeats or self.anywhere)


def _items(text: str) -> list[str]:
    return [item for item in re.split(r"[\s,;]+", text.strip()) if item]


@dataclass(frozen=True, slots=True)
class Guide:
    """One message's implementation rules (see the module docstring); `covers` says what part of it is described."""

    name: str
    standard: str
    message: str
    version: str
    covers: str
    structure: tuple[Node, ...]
    segments: dict[str, tuple[Element, ...]] = field(hash=False)
    conditions: dict[str, tuple[tuple[str, tuple[int, ...]], ...]] = field(hash=False)
    """Per tag, its X12 syntax notes read: ("P", (3, 4)) for P0304."""
    tags: frozenset[str] = frozenset()
    """Every tag the structure names: another one is unrecognized (X12 720 code 1), a known one out of place code 2."""
    required: tuple[tuple[str, str], ...] = ()
    """Segments an overlay requires, with the qualifier of their first element ("" for any)."""
    anywhere: frozenset[str] = frozenset()
    """Segments an overlay accepts anywhere."""

    def with_overlay(self, overlay: Overlay) -> Guide:
        """This guide with a partner's overlay applied; ValueError when it names an element the guide lacks."""
        if not overlay:
            return self
        segments = dict(self.segments)
        for tag, position, component in overlay.elements:
            elements = list(segments.get(tag, ()))
            if not 0 < position <= len(elements):
                raise ValueError(f"require: {self.name} has no element {tag}{position:02d}")
            element = elements[position - 1]
            if component:
                parts = list(element.components)
                if not 0 < component <= len(parts):
                    raise ValueError(f"require: {self.name} has no component {tag}{position:02d}-{component}")
                parts[component - 1] = replace(parts[component - 1], required=True)
                element = replace(element, required=True, components=tuple(parts))
            else:
                rule = replace(element.rule, required=True) if element.rule else None
                element = replace(element, required=True, rule=rule)
            elements[position - 1] = element
            segments[tag] = tuple(elements)
        repeats = dict(overlay.repeats)
        structure = _repeats(self.structure, repeats) if repeats else self.structure
        return replace(
            self,
            structure=structure,
            segments=segments,
            required=self.required + overlay.segments,
            anywhere=self.anywhere | overlay.anywhere,
        )


def _repeats(nodes: tuple[Node, ...], repeats: dict[str, int]) -> tuple[Node, ...]:
    out = []
    for node in nodes:
        if node.loop:
            out.append(replace(node, children=_repeats(node.children, repeats)))
        elif node.tag in repeats:
            out.append(replace(node, repeat=max(node.repeat, repeats[node.tag])))
        else:
            out.append(node)
    return tuple(out)


@functools.lru_cache(maxsize=16)
def _raw(name: str) -> dict[str, Any]:
    """A guide file's tables, merged over its base's."""
    if name not in GUIDES:
        raise ValueError(f"no guide {name!r}: the guides are {', '.join(GUIDES)}")
    text = resources.files("edinbox.edi").joinpath("guides", f"{name}.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    base = data.get("base")
    if not base:
        return data
    merged = dict(_raw(base))
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


@functools.lru_cache(maxsize=16)
def load(name: str) -> Guide:
    """The shipped guide `name` (one of `GUIDES`), read once."""
    data = _raw(name)
    codes = {ref: frozenset(values) for ref, values in data.get("codes", {}).items()}
    composites = {ref: tuple(_rule(text, codes) for text in parts) for ref, parts in data.get("composites", {}).items()}
    segments = {}
    for tag, texts in data["segments"].items():
        elements = []
        for text in texts:
            words = text.split()
            if len(words) == 2:
                if words[0] not in composites:
                    raise ValueError(f"{name}: {tag} names the composite {words[0]}, which it does not describe")
                elements.append(Element(words[0], words[1] == "M", components=composites[words[0]]))
            else:
                rule = _rule(text, codes)
                elements.append(Element(rule.ref, rule.required, rule=rule))
        segments[tag] = tuple(elements)
    structure = tuple(_node(item) for item in data["structure"])
    return Guide(
        name=name,
        standard=data["standard"],
        message=data["message"],
        version=data["version"],
        covers=data["covers"],
        structure=structure,
        segments=segments,
        conditions={tag: tuple(map(_note, notes)) for tag, notes in data.get("conditions", {}).items()},
        tags=frozenset(_tags(structure)),
    )


def _note(text: str) -> tuple[str, tuple[int, ...]]:
    """An X12 syntax note ("P0304") as its kind and element positions."""
    if not re.fullmatch(r"[PRCEL](?:[0-9]{2}){2,}", text):
        raise ValueError(f"{text!r} is not an X12 syntax note (P0304, R0203, C0403, E0203)")
    return text[0], tuple(int(text[k : k + 2]) for k in range(1, len(text), 2))


def _rule(text: str, codes: dict[str, frozenset[str]]) -> Rule:
    ref, requirement, kind, low, high = text.split()
    if kind not in TYPES:
        raise ValueError(f"unknown element type {kind!r} in {text!r}")
    return Rule(ref, requirement == "M", kind, int(low), int(high), codes.get(ref) if kind == "ID" else None)


def _node(item: str | dict[str, Any]) -> Node:
    if isinstance(item, str):
        tag, requirement, repeat = item.split()
        return Node(tag, requirement == "M", int(repeat))
    requirement, repeat = item["use"].split()
    children = tuple(_node(child) for child in item["segments"])
    return Node(children[0].tag, requirement == "M", int(repeat), item["loop"], children)


def _tags(nodes: tuple[Node, ...]) -> set[str]:
    found = set()
    for node in nodes:
        found |= _tags(node.children) if node.loop else {node.tag}
    return found


def guide(standard: str, message: str, version: str) -> Guide | None:
    """The shipped guide for a message: X12 810 with its group's GS08 version (004010..., 005010...), 850 (004010...),
    EDIFACT INVOIC with its UNH S009 version ("D:96A:UN:EAN008"); None when no guide describes it."""
    if standard == "X12" and message == "810":
        for prefix in ("004010", "005010"):
            if version.startswith(prefix):
                return load(f"x12-810-{prefix}")
        return None
    if standard == "X12" and message == "850":
        return load("x12-850-004010") if version.startswith("004010") else None
    if standard == "EDIFACT" and message == "INVOIC":
        parts = version.upper().split(":")
        release = "".join(parts[:2])
        if release in ("D96A", "D01B"):
            return load(f"edifact-invoic-{release.lower()}")
    return None
