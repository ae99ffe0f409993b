"""The message store's values: what a kept payload's row holds, and the search text of a payload (no I/O).

A consumer with `keep_payloads` keeps each processed message's bytes beside the journal (`<journal>_payloads`),
written in the transaction that settles it: packed once indexed (`pack`: zlib-compressed from `COMPRESS_MIN` bytes, a
shorter one as it is behind a `STORED` mark), with the SHA-256 of the whole payload, its size, its content type, and
a search text (the payload's words: runs of ASCII letters and digits of `MIN_WORD` or more, each once, in order of
first appearance, capped; a search finds the payloads holding every word it gives). Above `payload_cap` bytes only
the first `payload_cap` bytes are kept, with the digest and size of the whole, and `truncated` says so.

On PostgreSQL and MariaDB the row is written with its search text in the settling transaction
(`INDEXED_ON_SETTLE`). On SQLite it is written without, and its words go into the full-text index later, a batch
at a time in a transaction of its own (the loop's idle time, and every search first: `fts_text`): there an FTS5
insert per row in the settling transaction costs more than the whole batch indexed later.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from edinbox._errors import ConfigurationError
from edinbox._message import Message

__all__ = [
    "FTS_BATCH_BYTES",
    "INDEXED_ON_SETTLE",
    "MAX_QUERY",
    "MAX_TEXT",
    "PAYLOAD_CAP",
    "WALK",
    "Hit",
    "Kept",
    "check_cap",
    "fts_rows",
    "fts_text",
    "fts_upto",
    "index_columns",
    "index_params",
    "keep_columns",
    "keep_params",
    "pack",
    "search_query",
    "search_text",
    "unpack",
    "words_pattern",
]

PAYLOAD_CAP = 4 * 1024 * 1024
"""The default `payload_cap`: bytes of a payload kept; a longer one keeps this prefix, its digest and its size."""
MAX_TEXT = 32 * 1024
"""Characters of a payload's search text: the values near its start are found, not those after this (PostgreSQL and
MariaDB; SQLite's index takes every word of the first `MAX_SCAN` bytes: `fts_text`)."""
MAX_SCAN = 256 * 1024
"""Bytes of a payload read for its search text."""
FTS_BATCH_BYTES = 16 * 1024 * 1024
"""Bytes of text a batch of SQLite's full-text index takes at most (past its first row): a batch of big payloads
holds the database's write lock, and its bodies in memory, for a bounded time, not 500 times `MAX_SCAN`."""
MIN_WORD = 3
"""The shortest word searched: shorter ones (qualifiers, `PO` of `PO-4711`) are in every payload or mean nothing
alone (MariaDB's FULLTEXT skips them too, `innodb_ft_min_token_size`)."""
MAX_QUERY = 200
"""Characters of a search."""
WALK = 2000
"""The newest kept payloads a MariaDB search reads first, matching their text row by row (`payloads_search_newest`),
before it asks FULLTEXT."""
COMPRESS_LEVEL = 6
"""zlib's level for a kept payload (its default): a 500-byte interchange shrinks by about 40 %, a longer one more."""
COMPRESS_MIN = 1024
"""The shortest payload compressed. Below, zlib's set-up (a 32 KiB window and 128 KiB of hash tables, 13-14 us at
any level or window size) costs more than its output saves: a typical 470-byte interchange is kept as it is, about
190 bytes more per row (bench/RESULTS.md, "Message store")."""
STORED = b"\x00"
"""The first byte of a packed body kept as it is (a zlib stream never starts with 0: its low four bits say deflate,
8)."""
INDEXED_ON_SETTLE = frozenset({"mysql", "postgresql"})
"""The dialects whose kept row carries its search text from the settling transaction (MariaDB: FULLTEXT indexes at
commit; PostgreSQL: the words and a GIN entry cost less there than the row written again later, bench/RESULTS.md);
SQLite writes it later (`index_params`), as PostgreSQL did at journal version 13 (its rows still waiting are indexed
the same way)."""

_QUERY = re.compile(r"[A-Za-z0-9]+")
_ALNUM = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_SPACES = bytes(byte if byte in _ALNUM else 0x20 for byte in range(256))
"""Every byte but an ASCII letter or digit as a space (one `translate`, then `split`)."""


def check_cap(cap: int) -> int:
    """`cap` when it is a positive number of bytes, else ConfigurationError."""
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
        raise ConfigurationError(f"payload_cap must be a positive number of bytes, got {cap!r}")
    return cap


def search_text(payload: bytes) -> str:
    """The words of `payload` as a search indexes them: its runs of ASCII letters and digits of `MIN_WORD` or more,
    each once, in order, one space between, at most `MAX_TEXT` characters (EDI segments `BGM+220+PO4711'DTM+137:
    20261201:102'` give `BGM 220 PO4711 DTM 137 20261201 102`)."""
    words = dict.fromkeys([w for w in payload[:MAX_SCAN].translate(_SPACES).split() if len(w) >= MIN_WORD])
    text = b" ".join(words).decode("ascii")
    return text if len(text) <= MAX_TEXT else text[: text.rfind(" ", 0, MAX_TEXT + 1)]


def fts_text(kept: bytes) -> str:
    """What SQLite's full-text index is given for the kept bytes `kept`: every byte of its first `MAX_SCAN` but an
    ASCII letter or digit as a space (FTS5 splits the words itself, in C). The index keeps no copy of it: a row
    leaves the index with the same text made again from its body, so this is part of the stored format (a change
    needs a journal version that indexes every row again)."""
    return kept[:MAX_SCAN].translate(_SPACES).decode("ascii")


def fts_upto(sizes: list[tuple[Any, ...]], budget: int | None = None) -> int:
    """The last rowid of the rows (rowid, size, in rowid order) one batch gives SQLite's full-text index: as many as
    hold `budget` bytes of text between them (each at most `MAX_SCAN`; `FTS_BATCH_BYTES` by default), at least one;
    0 for none."""
    budget = FTS_BATCH_BYTES if budget is None else budget
    total = 0
    for rowid, size in sizes:
        total += min(int(size), MAX_SCAN)
        if total >= budget:
            return int(rowid)
    return int(sizes[-1][0]) if sizes else 0


def fts_rows(rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The parameters that put SQLite's kept payloads into its full-text index (`payloads_index_words`) or take them
    out (`payloads_unindex`), from rows of rowid and packed body."""
    return [{"id": row[0], "text": fts_text(unpack(bytes(row[1]), indexed=True))} for row in rows]


def words_pattern(words: list[str]) -> str:
    """A regular expression (PCRE, case-insensitive) matching a search text that holds every one of `words` (from
    `search_query`: letters and digits only) as a whole word; anchored when there are several (an unanchored
    look-ahead would be tried again at every position of the text)."""
    if len(words) == 1:
        return rf"(?i)\b{words[0]}\b"
    return "(?i)^" + "".join(rf"(?=.*\b{word}\b)" for word in words)


def pack(kept: bytes) -> bytes:
    """The body of an indexed row: `kept` zlib-compressed from `COMPRESS_MIN` bytes, else behind the `STORED` mark."""
    return zlib.compress(kept, COMPRESS_LEVEL) if len(kept) >= COMPRESS_MIN else STORED + kept


def unpack(body: bytes, *, indexed: bool) -> bytes:
    """The bytes kept, from a row's body: as received before the row is indexed, else as `pack` made them."""
    if not indexed:
        return body
    return body[1:] if body[:1] == STORED else zlib.decompress(body)


def search_query(text: str) -> list[str]:
    """A search's words, as `search_text` keeps them ("PO-4711" looks for `4711`; "INV 501 ACME" for the payloads
    holding all three); ConfigurationError when it has none or is too long."""
    if not isinstance(text, str) or len(text) > MAX_QUERY:
        raise ConfigurationError(f"a search is a text of at most {MAX_QUERY} characters")
    words = list(dict.fromkeys(w for w in _QUERY.findall(text) if len(w) >= MIN_WORD))
    if not words:
        raise ConfigurationError(
            f"nothing to search for in {text!r}: give a value of {MIN_WORD} or more letters or digits "
            "(a PO number, an invoice number, a GLN)"
        )
    return words


def _content_type(headers: Mapping[str, str] | None) -> str:
    """The payload's content type as its headers say, else application/octet-stream."""
    for name, value in (headers or {}).items():
        if name.lower() == "content-type" and value:
            return str(value)[:200]
    return "application/octet-stream"


def keep_params(consumer: str, message: Message, *, cap: int, indexed: bool = True) -> dict[str, Any]:
    """The parameters of `message`'s kept row (`payloads_keep`), its bytes cut to `cap` and packed: `indexed`, with
    their search text; else with none (SQLite's index is written later: `fts_rows`)."""
    payload = bytes(message.payload)
    kept = payload[:cap]
    return {
        "consumer": consumer,
        "source": message.source,
        "message_id": message.message_id,
        "fingerprint": message.fingerprint,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "size": len(payload),
        "content_type": _content_type(message.headers),
        "truncated": len(kept) < len(payload),
        "body": pack(kept),
        "text": search_text(kept) if indexed else None,
    }


def index_params(consumer: str, row: tuple[Any, ...]) -> dict[str, Any]:
    """The parameters that index one kept payload from its `payloads_pending` row (PostgreSQL's rows left waiting by
    journal version 13, their bytes as received): its key, the search text of its kept bytes and those bytes packed
    (`pack`)."""
    source, message_id, body = row
    kept = bytes(body)
    return {
        "consumer": consumer,
        "source": _text(source),
        "message_id": _text(message_id),
        "text": search_text(kept),
        "body": pack(kept),
    }


def index_columns(consumer: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """`index_params` rows as parallel arrays for one set-based statement (PostgreSQL's `payloads_index_batch`)."""
    return {
        "consumer": consumer,
        "sources": [row["source"] for row in rows],
        "message_ids": [row["message_id"] for row in rows],
        "texts": [row["text"] for row in rows],
        "bodies": [row["body"] for row in rows],
    }


_ARRAYS = {
    "source": "sources",
    "message_id": "message_ids",
    "fingerprint": "fingerprints",
    "sha256": "sha256s",
    "size": "sizes",
    "content_type": "content_types",
    "truncated": "truncateds",
    "body": "bodies",
    "text": "texts",
}
"""Each column of a kept row, and the name of its array in `payloads_keep_batch`."""


def keep_columns(consumer: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """`keep_params` rows as parallel arrays (`sources`, `message_ids`, ...) for one set-based statement
    (PostgreSQL's `payloads_keep_batch`)."""
    return {"consumer": consumer, **{array: [row[name] for row in rows] for name, array in _ARRAYS.items()}}


@dataclass(frozen=True, slots=True)
class Kept:
    """A kept payload: its key, the journal's fingerprint, the SHA-256 and size of the whole payload, its content
    type, the bytes kept (all of them, or the first `payload_cap` when `truncated`) and when it was kept."""

    consumer: str
    source: str
    message_id: str
    fingerprint: str
    sha256: str
    size: int
    content_type: str
    truncated: bool
    payload: bytes
    kept_at: datetime | None

    @classmethod
    def from_row(cls, row: tuple[Any, ...], timestamp: Any) -> Kept:
        """A `payloads_get` row, its body unpacked (`unpack`)."""
        consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, kept_at, indexed = row
        return cls(
            _text(consumer),
            _text(source),
            _text(message_id),
            str(fingerprint),
            str(sha256),
            int(size),
            str(content_type),
            bool(truncated),
            unpack(bytes(body), indexed=bool(indexed)),
            timestamp(kept_at),
        )


@dataclass(frozen=True, slots=True)
class Hit:
    """A search's hit: the key of a kept payload, its size and when it was kept."""

    consumer: str
    source: str
    message_id: str
    size: int
    kept_at: datetime | None

    @classmethod
    def from_row(cls, row: tuple[Any, ...], timestamp: Any) -> Hit:
        """A `payloads_search` row."""
        consumer, source, message_id, size, kept_at = row
        return cls(_text(consumer), _text(source), _text(message_id), int(size), timestamp(kept_at))


def _text(value: Any) -> str:
    """A key part as text (MariaDB keeps them as bytes)."""
    return value.decode("utf-8") if isinstance(value, bytes | bytearray) else str(value)
