"""A Bloom filter of journal keys, for the `filtered` layout of bench/journal_scale.py (docs/scaling.md, "A filter
of the cold generation"): the keys of an immutable generation, checked in the consumer's memory so that only the
keys it may hold are probed in the database.

A key is the MD5 digest of `consumer, source, message_id` joined by U+001F, the same bytes in Python (`digest`) and
in PostgreSQL (`md5()` of the same text, bench/experiments/filtered.sql), so the filter can be built from the table by
whichever process seals the generation. Its k positions come from the digest's two 64-bit halves (double hashing:
h1 + i * h2 modulo the size). A key that was added is always found (no false negatives); a key that was not is
found with the probability the filter was sized for. `python -m bench.experiments.bloom` prints the Python time of
a batch's check.
"""

from __future__ import annotations

import hashlib
import math
import struct
from array import array
from collections.abc import Iterable

SEPARATOR = "\x1f"
RECORD = 22
"""A row of `COPY (SELECT <16-byte bytea>) TO STDOUT (FORMAT binary)`: field count (2), length (4), digest (16)."""
HEADER = 19
"""The binary COPY header: signature (11), flags (4), extension length (4)."""
HALVES = struct.Struct("<QQ").unpack
"""A digest's two 64-bit halves, h1 and h2: position i is (h1 + i * h2) mod size, taken step by step from
h1 mod size and h2 mod size so the arithmetic stays on small integers."""


def digest(consumer: str, source: str, message_id: str) -> bytes:
    """The 16 bytes a key is filtered by: MD5 of its three columns joined by U+001F (PostgreSQL's md5() alike)."""
    text = f"{consumer}{SEPARATOR}{source}{SEPARATOR}{message_id}"
    return hashlib.md5(text.encode(), usedforsecurity=False).digest()


class Bloom:
    """A Bloom filter over 16-byte key digests: a bit array and a number of positions per key."""

    def __init__(self, bits: bytearray, hashes: int) -> None:
        """A filter with these bits (8 per byte) and `hashes` positions per key."""
        self.bits = bits
        self.size = len(bits) * 8
        self.hashes = hashes

    @classmethod
    def sized(cls, keys: int, rate: float) -> Bloom:
        """An empty filter for `keys` keys at false-positive `rate`: -n ln p / (ln 2)^2 bits, -log2 p positions."""
        size = max(64, math.ceil(-keys * math.log(rate) / math.log(2) ** 2))
        return cls(bytearray((size + 7) // 8), max(1, round(-math.log2(rate))))

    def add(self, key: bytes) -> None:
        """Set the key's positions."""
        self.add_all([key])

    def add_all(self, keys: Iterable[bytes]) -> None:
        """Set the positions of every key."""
        bits, size, hashes = self.bits, self.size, range(self.hashes)
        for key in keys:
            first, step = HALVES(key)
            position, step = first % size, step % size
            for _ in hashes:
                bits[position >> 3] |= 1 << (position & 7)
                position = (position + step) % size

    def __contains__(self, key: bytes) -> bool:
        """Whether the key may have been added (always true when it was); stops at the first position not set."""
        bits, size = self.bits, self.size
        first, step = HALVES(key)
        position, step = first % size, step % size
        for _ in range(self.hashes):
            if not bits[position >> 3] & (1 << (position & 7)):
                return False
            position = (position + step) % size
        return True


def copied_digests(chunks: Iterable[bytes | bytearray | memoryview]) -> Iterable[bytes]:
    """The digests of a binary COPY of one 16-byte bytea column, chunk by chunk (a chunk may end mid-row)."""
    pending = bytearray()
    skip = HEADER
    for chunk in chunks:
        pending += chunk
        if skip:
            if len(pending) < skip:
                continue
            del pending[:skip]
            skip = 0
        whole = len(pending) // RECORD * RECORD
        for offset in range(0, whole, RECORD):
            yield bytes(pending[offset + 6 : offset + RECORD])
        del pending[:whole]
    # what is left is the 2-byte trailer


def one_word(words: array[int], key: bytes) -> bool:
    """A variant measured by `main` only: all of a key's 7 positions in one 64-bit word (one memory access)."""
    first, rest = HALVES(key)
    mask = (
        1 << (rest & 63)
        | 1 << (rest >> 6 & 63)
        | 1 << (rest >> 12 & 63)
        | 1 << (rest >> 18 & 63)
        | 1 << (rest >> 24 & 63)
        | 1 << (rest >> 30 & 63)
        | 1 << (rest >> 36 & 63)
    )
    return words[first % len(words)] & mask == mask


def main() -> None:
    """Print the Python time per batch of 1,000 fresh keys: their digests, then their check in an empty filter, a
    half-full one that fits the CPU caches, a half-full one sized for 10M keys, and the one-word variant."""
    import random
    import time
    import uuid

    batches = [[("bench", "bench:source", uuid.uuid4().hex) for _ in range(1000)] for _ in range(100)]
    started = time.perf_counter()
    digests = [[digest(*key) for key in batch] for batch in batches]
    print(f"digests: {(time.perf_counter() - started) * 10:.2f} ms per batch")
    for keys in (0, 20_000, 10_000_000):
        bloom = Bloom.sized(keys, 0.01)
        if keys:
            bloom.bits[:] = random.randbytes(len(bloom.bits))  # half the bits set, as in a filter at its size
        started = time.perf_counter()
        for batch in digests:
            [key in bloom for key in batch]
        print(f"check, filter of {len(bloom.bits):,} bytes: {(time.perf_counter() - started) * 10:.2f} ms per batch")
    words = array("Q", random.randbytes(15_000_000))  # 12 bits per key of 10M keys, half of them set
    started = time.perf_counter()
    for batch in digests:
        [one_word(words, key) for key in batch]
    print(f"check, one word per key, 15 MB: {(time.perf_counter() - started) * 10:.2f} ms per batch")


if __name__ == "__main__":
    main()
