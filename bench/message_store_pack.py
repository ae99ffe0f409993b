"""The message store's CPU per kept payload in the client, part by part: packing its bytes (zlib at several settings,
or kept as they are behind the `STORED` mark: `edinbox._payloads.pack`) and making its search words (the store's
`search_text` against a compiled `re.findall`), with the bytes each packing keeps.

The generated invoice interchanges (471 bytes on average) go through every variant once per round, the variants in
a new order each round; figures are CPU microseconds per payload, median and range over the rounds.

Run: .venv/bin/python -m bench.message_store_pack [--messages 2000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import time
import zlib
from collections.abc import Callable

from edinbox._payloads import pack, search_text
from edinbox.hub.demo._traffic import generate

_WORDS = re.compile(rb"[A-Za-z0-9]{3,}")


def _compressobj(level: int, wbits: int, mem: int) -> Callable[[bytes], bytes]:
    """zlib through `compressobj` with a window of 2**`wbits` bytes and `mem` as its memory level."""

    def run(payload: bytes) -> bytes:
        packer = zlib.compressobj(level, zlib.DEFLATED, wbits, mem)
        return packer.compress(payload) + packer.flush()

    return run


def _findall(payload: bytes) -> str:
    """The words as `search_text` gives them, found by one compiled regular expression."""
    return b" ".join(dict.fromkeys(_WORDS.findall(payload))).decode("ascii")


VARIANTS: dict[str, Callable[[bytes], bytes | str]] = {
    "zlib.compress level 6 (before)": lambda p: zlib.compress(p, 6),
    "zlib.compress level 1": lambda p: zlib.compress(p, 1),
    "compressobj wbits 9, memLevel 1": _compressobj(6, 9, 1),
    "compressobj wbits 10, memLevel 2": _compressobj(6, 10, 2),
    "compressobj wbits 12, memLevel 4": _compressobj(6, 12, 4),
    "pack (as it is under 1 KiB)": pack,
    "words: search_text (translate, split)": search_text,
    "words: re.findall, dict": _findall,
}


def main() -> int:
    """Time every variant over the rounds; print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    payloads = [payload for _, payload in generate(args.messages, duplicate_rate=0.0, seed=11, mixed=False).files]
    assert all(_findall(p) == search_text(p) for p in payloads)  # the same words, the same order
    spent: dict[str, list[float]] = {name: [] for name in VARIANTS}
    rng = random.Random(3)
    for _ in range(args.rounds):
        order = list(VARIANTS)
        rng.shuffle(order)
        for name in order:
            work = VARIANTS[name]
            started = time.process_time()
            for payload in payloads:
                work(payload)
            spent[name].append((time.process_time() - started) / len(payloads) * 1e6)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    raw = sum(map(len, payloads)) / len(payloads)
    print(f"Kept payload CPU, {len(payloads)} interchanges of {raw:.0f} bytes, {args.rounds} rounds (load {load})")
    print("| variant | CPU us per payload, median (range) | bytes kept |")
    print("|---|---|---|")
    for name, work in VARIANTS.items():
        times = spent[name]
        out = work(payloads[0])
        size = f"{sum(len(work(p)) for p in payloads) / len(payloads):.0f}" if isinstance(out, bytes) else "-"
        print(f"| {name} | {statistics.median(times):.1f} ({min(times):.1f}-{max(times):.1f}) | {size} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
