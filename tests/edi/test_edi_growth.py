"""Parse time grows linearly with the input, for the shapes that once made it quadratic.

Each test parses an input and one four times as large, reads everything a caller can reach (envelope, segments,
fingerprint, key, invoices) and compares the process CPU time of both: the larger may cost at most 8 times the
smaller (linear is 4, quadratic 16; twice linear leaves room for the cache misses of a loaded machine). Each size
runs the same number of times (enough for 20 ms on the smaller), the two sizes in turn, best of five, so timer
resolution and a busy machine do not decide. No wall-clock bound.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable

import edi_fixtures as fixtures
import pytest

from edinbox.edi import EdiSyntaxError, parse

GROWTH = 4
BOUND = 8.0
_X12_LF = fixtures.X12_810.replace(b"~", b"\n")


def read_all(data: bytes) -> None:
    """Parse and touch what the hub touches; EdiSyntaxError is an answer like any other."""
    try:
        found = parse(data)
    except EdiSyntaxError:
        return
    for ic in found:
        ic.problems  # noqa: B018 - the envelope walk
        ic.segments  # noqa: B018 - every segment materialised
        ic.fingerprint()
        try:
            ic.message()
            ic.invoices()
        except EdiSyntaxError:
            pass


def cpu(data: bytes, runs: int) -> float:
    """Process CPU time of `runs` full reads of `data`, the garbage collector paused (its pauses come in steps)."""
    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        for _ in range(runs):
            read_all(data)
        return time.process_time() - start
    finally:
        gc.enable()


def growth(make: Callable[[int], bytes], size: int) -> float:
    """How many times longer a 4x larger input takes than one of about `size` bytes (best of 5, interleaved)."""
    small, large = make(size), make(size * GROWTH)
    assert len(large) > (GROWTH - 0.5) * len(small)
    runs = max(1, math.ceil(0.02 / max(cpu(small, 1), 1e-6)))
    best_small = best_large = math.inf
    for _ in range(5):
        best_small = min(best_small, cpu(small, runs))
        best_large = min(best_large, cpu(large, runs))
    return best_large / max(best_small, 1e-9)


def blank_lines(terminator: bytes) -> Callable[[int], bytes]:
    """An X12 810 whose terminator is a line break, with blank lines before the group trailer."""

    def make(size: int) -> bytes:
        data = _X12_LF.replace(b"\n", terminator)
        head, tail = data.rsplit(b"GE", 1)
        return head + terminator * (size // len(terminator)) + b"GE" + tail

    return make


def glued(one: bytes, glue: bytes = b"") -> Callable[[int], bytes]:
    """Copies of one interchange, one after the other."""
    return lambda size: (one + glue) * max(1, size // len(one + glue))


def separator_run(size: int) -> bytes:
    """One segment with a long run of component separators that ends in a value, beside one that ends in `+`."""
    run = b"FTX+AAI+" + b":" * size + b"x'FTX+AAI+:+x'"
    return fixtures.EDIFACT_INVOIC.replace(b"CUX+", run + b"CUX+")


def open_messages(size: int) -> bytes:
    """One interchange of many messages that never get their UNT."""
    body = b"UNH+1+ORDERS:D:96A:UN'BGM+220+PO-1+9'"
    count = size // len(body)
    return b"UNA:+.? 'UNB+UNOA:3+S:ZZZ+H:ZZZ+261130:1205+R1'" + body * count + b"UNZ+%d+R1'" % count


SHAPES = {
    "blank lines, LF terminator": (blank_lines(b"\n"), 2_000),
    "blank lines, CRLF terminator": (blank_lines(b"\r\n"), 4_000),
    "glued EDIFACT without UNA": (glued(fixtures.EDIFACT_INVOIC), 50_000),
    "glued EDIFACT with UNA": (glued(fixtures.edifact_orders(b"G1")), 50_000),
    "glued X12": (glued(fixtures.X12_810), 50_000),
    "glued EDIFACT, segments on lines": (glued(fixtures.EDIFACT_INVOIC.replace(b"'", b"\n")), 50_000),
    "truncated EDIFACT, one per line": (glued(fixtures.edifact_orders(b"T1", trailer=False), b"\n"), 50_000),
    "long separator run": (separator_run, 5_000),
    "messages without trailer": (open_messages, 50_000),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_parse_time_grows_linearly(shape: str) -> None:
    """Four times the input costs at most eight times the CPU time: no shape makes parsing quadratic."""
    make, size = SHAPES[shape]
    ratio = growth(make, size)
    assert ratio <= BOUND, f"{shape}: 4x the input took {ratio:.1f}x the time"
