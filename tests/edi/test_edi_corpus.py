"""The shared corpus of real partner files: every file's control numbers and senders match its MANIFEST.md.

The corpus lives beside the repository (`shared/edi-samples/` in the repository's parent folder or one above it)
and is never copied into it; the test is skipped where it is absent.
"""

from __future__ import annotations

import re

import edi_fixtures as fixtures
import pytest

from edinbox.edi import EdiSyntaxError, parse

CORPUS = fixtures.CORPUS
MANIFEST = CORPUS / "MANIFEST.md"
# Files whose interchanges are incomplete or malformed, per the manifest: read, but never keyed.
UNKEYABLE = {2, 3, 7, 22, 39, 40}
# Byte-different renderings of one interchange (same content): one key, one fingerprint.
SAME_CONTENT = ("edifact_invoic_d97b_UNAcustomSeps_release_staedi.edi", "edifact_invoic_d97b_hardwrapped15_staedi.edi")


def _rows() -> list[tuple[int, str, list[str], list[tuple[str, str]]]]:
    """(number, file, control numbers, senders) of each manifest row."""
    rows = []
    for line in MANIFEST.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 6 or not cells[0].isdigit():
            continue
        number, name, controls, sender = int(cells[0]), cells[1].strip("`"), cells[4], cells[5]
        qualifier, _, ident = sender.partition("/")
        ident = re.sub("[\u2420\u237d]+$", "", ident)  # the manifest shows padding as visible marks
        qualifier = "" if qualifier == "\u2014" else qualifier
        rows.append((number, name, [c.strip() for c in controls.split(",")], [(qualifier, ident)]))
    return rows


ROWS = _rows() if MANIFEST.exists() else []
needs_corpus = pytest.mark.skipif(not MANIFEST.exists(), reason=f"corpus not present at {CORPUS}")


@needs_corpus
@pytest.mark.parametrize(("number", "name", "controls", "senders"), ROWS, ids=[r[1] for r in ROWS])
def test_corpus_file_matches_manifest(
    number: int, name: str, controls: list[str], senders: list[tuple[str, str]]
) -> None:
    """Each sample parses into the interchanges its manifest row lists, with those senders and numbers."""
    data = (CORPUS / name).read_bytes()
    found = parse(data)
    assert [ic.control_number for ic in found] == controls
    assert {(ic.sender.qualifier, ic.sender.id) for ic in found} == set(senders)
    for ic in found:
        assert data[ic.span[0] : ic.span[1]] == ic.raw
        if number in UNKEYABLE:
            assert not ic.keyable
            with pytest.raises(EdiSyntaxError):
                ic.message()
        else:
            assert ic.keyable, ic.problems
            assert ic.message().message_id == ic.control_number


@needs_corpus
def test_corpus_covers_every_file() -> None:
    """Every sample file in the folder has a manifest row, so none escapes the check above."""
    files = {p.name for p in CORPUS.iterdir() if p.name != "MANIFEST.md"}
    assert files <= {r[1] for r in ROWS}
    assert len(ROWS) >= len(files)


@needs_corpus
def test_corpus_renderings_of_one_interchange_share_key_and_fingerprint() -> None:
    """Custom-UNA and hard-wrapped copies of one interchange give one key and one fingerprint."""
    first, second = (parse((CORPUS / name).read_bytes())[0] for name in SAME_CONTENT)
    assert first.key == second.key
    assert first.fingerprint() == second.fingerprint()


@needs_corpus
def test_corpus_control_number_reuse_is_same_key_other_fingerprint() -> None:
    """Two X12 files reuse sender and ISA13 with different content: same key, different fingerprint."""
    first = parse((CORPUS / "x12_810_4010_staedi.edi").read_bytes())[0]
    second = parse((CORPUS / "x12_810_850_twoGroups_staedi.edi").read_bytes())[0]
    assert first.key == second.key
    assert first.fingerprint() != second.fingerprint()


@needs_corpus
def test_corpus_invoices_are_read() -> None:
    """The keyable INVOIC and 810 samples yield invoices with Decimal totals."""
    totals = {}
    for name in (
        "edifact_invoic_d97a_noUNA_pydifact.edi",
        "edifact_invoic_d93a_UNAcomma_utf8InUNOA_staedi.edi",
        "edifact_invoic_d97b_noUNA_staedi.edi",
        "x12_810_4010_staedi.edi",
        "x12_810_BOM_unpaddedISA_tabs_edinet.edi",
    ):
        totals[name] = [str(i.total) for i in parse((CORPUS / name).read_bytes())[0].invoices()]
    assert totals == {
        "edifact_invoic_d97a_noUNA_pydifact.edi": ["1960.29"],
        "edifact_invoic_d93a_UNAcomma_utf8InUNOA_staedi.edi": ["901.78"],
        "edifact_invoic_d97b_noUNA_staedi.edi": ["2137.58"],
        "x12_810_4010_staedi.edi": ["2554.38", "2554.38"],
        "x12_810_BOM_unpaddedISA_tabs_edinet.edi": ["365.96"],
    }


@needs_corpus
def test_corpus_edifact_rewrapped_at_any_width_keeps_key_fingerprint_and_invoices() -> None:
    """Every keyable EDIFACT sample, its line breaks removed and hard-wrapped again at 60 to 100 columns (UNA or
    none, a line may start with a tag-like "UNG+" or "EAN+1"), is keyed with the same key, fingerprint and
    invoices: a hard wrap is never taken for segments ending at line breaks."""
    checked = 0
    for path in sorted(CORPUS.iterdir()):
        if path.name == "MANIFEST.md" or not path.name.startswith("edifact_"):
            continue
        for ic in parse(path.read_bytes()):
            if not ic.keyable:
                continue
            flat = parse(ic.raw.replace(b"\r", b"").replace(b"\n", b""))[0]
            totals = [i.total for i in flat.invoices()]
            for width in range(60, 101):
                wrapped = b"\r\n".join(flat.raw[k : k + width] for k in range(0, len(flat.raw), width))
                (again,) = parse(wrapped)
                assert again.keyable, (path.name, width, again.problems)
                assert (again.key, again.fingerprint()) == (flat.key, flat.fingerprint()), (path.name, width)
                assert [i.total for i in again.invoices()] == totals
            checked += 1
    assert checked >= 10


# Keyable samples whose trailers disagree with their content, each as its manifest row says (a wrong UNT count, a
# UNZ or IEA02 reference unlike the header's, IEA01 = 1 for no group): the hub parks these and rejects them.
DISAGREEING = {
    "edifact_infent_UNOL_releaseApostrophe_UNG_edinet.edi": [("set", "29")],
    "edifact_infent_junkPrefix_UNOL_oneline_pydifact.ped": [("set", "29")],
    "edifact_medrpt_latin1_newlinesInData_pydifact.edi": [("interchange", "28")],
    "edifact_orders_UNG_testIndicator_staedi.edi": [("set", "29")],
    "edifact_orders_UNOC_UNZrefMismatch_pydifact.edi": [("interchange", "28")],
    "edifact_quotes_BOM_UNA_edinet.edi": [("set", "29"), ("set", "29"), ("interchange", "28")],
    "x12_850_BOM_NBSPpaddedISA_edinet.edi": [("interchange", "001")],
    "x12_TA1_only_staedi.edi": [("interchange", "021")],
}


@needs_corpus
def test_corpus_trailer_disagreements_are_the_manifests() -> None:
    """Among the keyable samples, exactly those whose manifest notes a wrong count or reference have
    disagreements, with the codes of what is wrong; every other keyable sample has none."""
    for name in sorted(r[1] for r in ROWS):
        found = [
            (d.level, d.code) for ic in parse((CORPUS / name).read_bytes()) if ic.keyable for d in ic.disagreements
        ]
        assert found == DISAGREEING.get(name, []), name
