"""process_batch of 1,000 on a full journal (10M rows) against an empty one, side by side in one run.

    .venv/bin/python -m bench.journal_scale [--url postgresql://...] [--rows 10000000] [--turns 20]
        [--keys random,rising] [--layouts flat,digest,ring,hash,generations,filtered,collate] [--partitions 16]
        [--hot ROWS] [--rate 0.01] [--refill] [--wal-compression] [--sorted] [--former] [--redelivered]
        [--steady BATCHES] [--explain BATCHES]
        [--private FOLDER [--server sized|default] [-c NAME=VALUE ...] [--compare NAME=VALUE[,...] ...] [--remove]]

With `--private FOLDER` the journals live in a PostgreSQL cluster of their own in FOLDER (initdb on the first run,
reused after: the filled journals stay there), started for the run with the `--server` settings (`sized`: the
sizing rule of docs/scaling.md, `shared_buffers` holding the unique index and checkpoints spaced; `default`:
PostgreSQL's defaults) plus any `-c NAME=VALUE`, stopped at the end, and deleted with `--remove`. With
`--compare SETTINGS` (repeatable), the whole run is repeated once per SETTINGS, the cluster restarted with them
added (`--compare huge_pages=off --compare huge_pages=on`), the huge page counters of /proc/meminfo printed after
each start and each run, and at the end every rate and ratio side by side, one column per SETTINGS.

Journals are filled with generate_series (not through the API) into schema `bench_scale` and kept between runs
(`--refill` rebuilds them). Two key shapes: `random` (a UUID per message, one source) and `rising` (1,000
partners, each with rising 9-digit control numbers, as X12 ISA13). Seven layouts:

- `flat`: today's journal (one table, unique index on consumer, source, message_id), through `Inbox.process_batch`;
- `digest`: the flat journal keyed by a 16-byte digest of (consumer, source, message_id)
  (`bench/experiments/digest.sql`): the same one insert per batch into an index about half as big;
- `ring`: the journal as a ring of slot partitions (docs/scaling.md): inserts go to the current slot, whose
  index is small and hot; the older slots inside the horizon are only probed (read, never written), so a batch
  dirties a few pages instead of one leaf per key. Run with the statements of `bench/experiments/ring.sql` (a
  candidate measured here, not adopted: docs/scaling.md);
- `hash`: the journal hash-partitioned on message_id (`--partitions`, 16 by default; `bench/experiments/hash.sql`)
  under the same unique key, which holds the partition key: each partition's index holds 1/N of the rows and is a level
  shallower, and an INSERT routes each row to its one partition. Inbox.create_schema() and verify() accept the
  partitioned table, so it runs through `Inbox.process_batch` like `flat`;
- `generations`: two generations (`bench/experiments/generations.sql`): a hot table of its own takes the inserts (a
  plain INSERT of the keys that no cold row holds), the cold one (an empty table, or the full flat journal) is only
  probed, read-only;
- `filtered`: the two generations with a Bloom filter of the cold one's keys in the process's memory
  (`bench/experiments/bloom.py`, `bench/experiments/filtered.sql`; false-positive rate `--rate`, 1 % by default): built
  from the cold table and stored as a bytea in table `filters` (once: later runs load it), checked in Python per key;
  only the keys it may hold probe the cold table, the others go straight to the hot table's plain INSERT, after the
  shared rotation lock. The cold one is empty or the full flat journal; the full one's hot table is empty, or with
  `--hot ROWS` a kept table of ROWS older keys (a generation near its rotation); the filter's size, build, store and
  load times are printed, and after each measurement its Python time and the keys it sent to a probe;
- `collate`: the flat journal with its key columns `COLLATE "C"` (bytewise comparisons), through
  `Inbox.process_batch`.

Each turn runs one batch of 1,000 fresh messages on every variant (order rotated), right after a CHECKPOINT: the
first change of each index leaf pays a full-page image, which for random keys is nearly every key. With
`--steady N`, N untimed batches then go into each full journal and the turns run again: a busy journal deep into
its checkpoint cycle, whose leaves have mostly had their image already. The ratio is full / empty of the same
layout, of the totals and as the median of each turn's own ratio; beside it the WAL written per batch, the CPU
time per batch of the benchmark's process and (for the flat variants, when the server runs on this machine) of the
variant's server process: on a loaded machine the wall-clock ratio moves with the load, the CPU times much less.
With `--wal-compression`, another flat variant: the full journal with `wal_compression=lz4` on its connections;
with `--sorted`, two more: the same batches sorted by key before `process_batch`; with `--former`, two more: the flat
journals through process_batch's former insert (ON CONFLICT DO NOTHING for every batch, not a plain INSERT first);
with `--redelivered`, two more on empty journals, today's insert and the former one, whose batches each end with a
key of the batch before (the plain INSERT's worst case: rolled back at its last row, then ON CONFLICT). A layout
other than flat is also compared with the flat empty journal (today's). With `--explain N`, N more batches per
flat, hash or collate journal go through `EXPLAIN (ANALYZE, BUFFERS)` of the store's ON CONFLICT insert (rolled
back): the buffer visits (shared hits and reads) per batch, and the level of the unique index's root (the deepest
partition's).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from tests.servers import PrivatePostgres

from bench.experiments.bloom import Bloom, copied_digests, digest
from edinbox import Inbox, Message, Tx
from edinbox.stores._queries import load_queries, named_queries

CONSUMER = "bench"
SCHEMA = "bench_scale"
TEMPLATE = f"{SCHEMA}.template"
"""An empty journal made by the API: the candidate layouts copy its columns and checks (CREATE TABLE ... LIKE)."""
PARTNERS = 1000
SLOTS = 8
BATCH = 1000
SERVERS = {
    "default": {"maintenance_work_mem": "1GB"},
    "sized": {
        "maintenance_work_mem": "1GB",
        "shared_buffers": "2GB",
        "checkpoint_timeout": "30min",
        "max_wal_size": "8GB",
    },
}
"""The private cluster's settings: PostgreSQL's defaults, or sized by the rule of docs/scaling.md (the 10M-row
journal's unique index, 570-739 MB, held in shared_buffers; a checkpoint every 30 minutes rather than every 5).
maintenance_work_mem only speeds up the index build after a fill."""
APPLICATION = "journal_scale_"
"""The application_name prefix of the flat variants' connections, followed by the variant's name."""
SHOWN = ("shared_buffers", "checkpoint_timeout", "max_wal_size", "wal_compression", "fsync", "synchronous_commit")


class Keys:
    """Fresh message keys of one shape: random UUIDs, or per-partner rising control numbers."""

    def __init__(self, shape: str, *, start: int) -> None:
        """Rising numbers continue after `start` per partner (the rows already in the journal)."""
        self.shape = shape
        self.counters = [start] * PARTNERS

    def batch(self) -> list[Message]:
        """One batch of fresh messages."""
        if self.shape == "random":
            return [Message(uuid.uuid4().hex, "bench:source", b"x" * 64) for _ in range(BATCH)]
        messages = []
        for _ in range(BATCH):
            partner = random.randrange(PARTNERS)
            self.counters[partner] += 1
            source = f"X12:ZZ:P{partner:04d}>ZZ:HUB"
            messages.append(Message(f"{self.counters[partner]:09d}", source, b"x" * 64))
        return messages


class Redelivered(Keys):
    """Batches of fresh keys but the last, a copy of the previous batch's first: a redelivery, which a plain
    INSERT meets at its very last row."""

    def __init__(self, shape: str, *, start: int) -> None:
        """Keys of `shape` after `start`, as Keys."""
        super().__init__(shape, start=start)
        self.previous: Message | None = None

    def batch(self) -> list[Message]:
        """One batch: BATCH - 1 fresh messages, then the first of the batch before (from the second batch on)."""
        messages = super().batch()
        first, self.previous = self.previous, messages[0]
        if first is not None:
            messages[-1] = first
        return messages


def fill_values(shape: str) -> str:
    """The SELECT list giving row i of a filled journal (source, message_id, fingerprint, received_at)."""
    fingerprint = "md5(i::text) || md5((-i)::text)"
    received = "now() - make_interval(secs => (%(rows)s - i) * 0.05)"
    if shape == "random":
        return f"'bench:source', md5('r' || i), {fingerprint}, {received}"
    return (
        f"'X12:ZZ:P' || lpad((i %% {PARTNERS})::text, 4, '0') || '>ZZ:HUB', "
        f"lpad((i / {PARTNERS})::text, 9, '0'), {fingerprint}, {received}"
    )


def count(connection: psycopg.Connection[Any], table: str) -> int:
    """Rows in `table` (0 when it is missing)."""
    exists = connection.execute("SELECT to_regclass(%s)", [f"{SCHEMA}.{table}"]).fetchone()
    if exists is None or exists[0] is None:
        return 0
    row = connection.execute(f"SELECT count(*) FROM {SCHEMA}.{table}".encode()).fetchone()
    return int(row[0]) if row else 0


def fill_flat(url: str, connection: psycopg.Connection[Any], table: str, *, shape: str, rows: int) -> None:
    """Create a flat journal through the API and fill it with `rows` rows, the unique index built afterwards."""
    with Inbox(url, consumer=CONSUMER, table=f"{SCHEMA}.{table}") as inbox:
        inbox.create_schema()
        connection.execute(f"TRUNCATE {SCHEMA}.{table}".encode())
        connection.execute(f"DROP INDEX {SCHEMA}.{table}_key".encode())
        connection.execute(
            f"INSERT INTO {SCHEMA}.{table} (consumer, source, message_id, fingerprint, received_at, status, "
            f"attempts, settled_at) SELECT '{CONSUMER}', s, m, f, r, 'processed', 1, r "
            f"FROM generate_series(1, %(rows)s) AS i, LATERAL (SELECT {fill_values(shape)}) AS v (s, m, f, r)".encode(),
            {"rows": rows},
        )
        inbox.create_schema()  # the unique index again, built in one sorted pass
    connection.execute(f"VACUUM ANALYZE {SCHEMA}.{table}".encode())


def create_ring(connection: psycopg.Connection[Any], table: str) -> None:
    """Create a ring journal (its parent, slot partitions and head row) from the named statements."""
    names = {"table": f"{SCHEMA}.{table}", "head": f"{SCHEMA}.{table}_head", "key_index": f"{table}_key"}
    names["template"] = TEMPLATE
    for name in ("create_ring", "create_ring_key", "create_head", "seed_head"):
        connection.execute(RING[name].format(**names).encode())
    for slot in range(SLOTS):
        connection.execute(RING["create_slot"].format(slot=f"{SCHEMA}.{table}_{slot}", number=slot, **names).encode())


def fill_ring(connection: psycopg.Connection[Any], table: str, *, shape: str, rows: int) -> None:
    """A ring journal with `rows` rows spread over the slots before the current one (slot 0 stays empty)."""
    connection.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{table}, {SCHEMA}.{table}_head".encode())
    create_ring(connection, table)
    connection.execute(f"DROP INDEX {SCHEMA}.{table}_key".encode())
    connection.execute(
        f"INSERT INTO {SCHEMA}.{table} (consumer, source, message_id, fingerprint, received_at, status, "
        f"attempts, settled_at, slot) SELECT '{CONSUMER}', s, m, f, r, 'processed', 1, r, "
        f"1 + (i * {SLOTS - 1}) / (%(rows)s + 1) "
        f"FROM generate_series(1, %(rows)s) AS i, LATERAL (SELECT {fill_values(shape)}) AS v (s, m, f, r)".encode(),
        {"rows": rows},
    )
    connection.execute(RING["create_ring_key"].format(table=f"{SCHEMA}.{table}", key_index=f"{table}_key").encode())
    connection.execute(f"VACUUM ANALYZE {SCHEMA}.{table}".encode())


EXPERIMENTS = Path(__file__).parent / "experiments"
"""The statements of the candidate layouts, none of them adopted (bench/experiments/README.md)."""
RING = named_queries((EXPERIMENTS / "ring.sql").read_text("utf-8"))
DIGEST = named_queries((EXPERIMENTS / "digest.sql").read_text("utf-8"))
HASH = named_queries((EXPERIMENTS / "hash.sql").read_text("utf-8"))
GENERATIONS = named_queries((EXPERIMENTS / "generations.sql").read_text("utf-8"))
FILTERED = named_queries((EXPERIMENTS / "filtered.sql").read_text("utf-8"))
FILTERS = f"{SCHEMA}.filters"
TEMPLATED = {"template": TEMPLATE}
INSERT = load_queries("postgresql", "queries")["insert_batch"]
"""The store's ON CONFLICT insert of a batch, for EXPLAIN."""


def create_hash(connection: psycopg.Connection[Any], table: str, *, partitions: int) -> None:
    """Create a journal hash-partitioned on message_id, its partitions and its unique key."""
    names = {"table": f"{SCHEMA}.{table}", "key_index": f"{table}_key", "template": TEMPLATE}
    connection.execute(HASH["create_hash"].format(**names).encode())
    for n in range(partitions):
        part = HASH["create_part"].format(part=f"{SCHEMA}.{table}_{n}", modulus=partitions, remainder=n, **names)
        connection.execute(part.encode())
    connection.execute(HASH["create_hash_key"].format(**names).encode())


def fill_hash(url: str, connection: psycopg.Connection[Any], table: str, *, shape: str, rows: int, parts: int) -> None:
    """A hash-partitioned journal with `rows` rows, filled as the flat one (the API's schema on the parent)."""
    connection.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{table}".encode())
    create_hash(connection, table, partitions=parts)
    fill_flat(url, connection, table, shape=shape, rows=rows)


def create_collated(connection: psycopg.Connection[Any], table: str) -> None:
    """Create a journal whose key columns compare bytewise (COLLATE "C"), its unique index then created by
    Inbox.create_schema() on them."""
    connection.execute(
        f"CREATE TABLE {SCHEMA}.{table} (LIKE {TEMPLATE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)".encode()
    )
    for column in ("consumer", "source", "message_id"):
        connection.execute(f'ALTER TABLE {SCHEMA}.{table} ALTER {column} TYPE text COLLATE "C"'.encode())


def key_indexes(connection: psycopg.Connection[Any], table: str) -> list[str]:
    """The unique index of a journal, or its partitions' indexes when it is partitioned (those hold the pages)."""
    index = f"{SCHEMA}.{table}_key"
    rows = connection.execute(
        b"SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass ORDER BY 1", [index]
    ).fetchall()
    return [row[0] for row in rows] or [index]


def reset(connection: psycopg.Connection[Any], table: str, *, layout: str) -> None:
    """Remove what earlier runs added to a full journal (their messages share one fingerprint), then read its
    unique index into the OS cache and into shared_buffers as far as they hold it (pg_prewarm), so every run
    starts from the same warm state."""
    if layout == "ring":
        connection.execute(f"TRUNCATE {SCHEMA}.{table}_0".encode())  # the current slot: only the runs wrote to it
        indexes = [f"{SCHEMA}.{table}_{slot}_consumer_source_message_id_slot_idx" for slot in range(1, SLOTS)]
    else:
        fingerprint = Message("x", "x", b"x" * 64).fingerprint
        connection.execute(f"DELETE FROM {SCHEMA}.{table} WHERE fingerprint = %s".encode(), [fingerprint])
        # INDEX_CLEANUP ON: a plain VACUUM skips the index when under 2 % of the heap pages hold dead rows
        # (PostgreSQL 14+), which left the deleted keys' entries in it, met again by the next run's same keys
        connection.execute(f"VACUUM (INDEX_CLEANUP ON) {SCHEMA}.{table}".encode())
        indexes = key_indexes(connection, table)
    connection.execute(b"CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    for index in indexes:
        connection.execute(b"SELECT pg_prewarm(%s::regclass, 'read')", [index])
        connection.execute(b"SELECT pg_prewarm(%s::regclass, 'buffer')", [index])


def batch_params(messages: list[Message]) -> dict[str, Any]:
    """A batch's parameters for the inserts: the consumer and the keys' columns as arrays."""
    return {
        "consumer": CONSUMER,
        "sources": [m.source for m in messages],
        "message_ids": [m.message_id for m in messages],
        "fingerprints": [m.fingerprint for m in messages],
        "traces": [None] * len(messages),
    }


def sql_batch(
    connection: psycopg.Connection[Any], insert: bytes, *, lock: str | None = None
) -> Callable[[list[Message]], None]:
    """process_batch's statements on a candidate layout: the ring's shared rotation lock when given, then the
    layout's insert of the batch (every message fresh: each must come back as inserted)."""

    def run(messages: list[Message]) -> None:
        with connection.transaction():
            if lock is not None:
                connection.execute(RING["ring_lock"].encode(), {"lock": lock})
            cursor = connection.execute(insert, batch_params(messages))
            assert len(cursor.fetchall()) == len(messages), "a fresh message was taken for a duplicate"

    return run


def ring_batch(connection: psycopg.Connection[Any], table: str) -> Callable[[list[Message]], None]:
    """The batch on a ring journal: the shared rotation lock, then the probing insert."""
    insert = RING["insert_batch"].format(table=f"{SCHEMA}.{table}", head=f"{SCHEMA}.{table}_head").encode()
    return sql_batch(connection, insert, lock=f"edinbox:{SCHEMA}.{table}")


def create_digest(connection: psycopg.Connection[Any], table: str) -> None:
    """Create a journal keyed by a 16-byte digest of its key."""
    names = {"table": f"{SCHEMA}.{table}", "key_index": f"{table}_key", "template": TEMPLATE}
    for name in ("create_digest", "create_digest_key"):
        connection.execute(DIGEST[name].format(**names).encode())


def fill_digest(connection: psycopg.Connection[Any], table: str, *, shape: str, rows: int) -> None:
    """A digest-keyed journal with `rows` rows, its unique index built afterwards."""
    connection.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{table}".encode())
    create_digest(connection, table)
    connection.execute(f"DROP INDEX {SCHEMA}.{table}_key".encode())
    fill = DIGEST["fill"].format(table=f"{SCHEMA}.{table}", values=fill_values(shape))
    connection.execute(fill.encode(), {"rows": rows})
    create_digest(connection, table)
    connection.execute(f"VACUUM ANALYZE {SCHEMA}.{table}".encode())


def digest_batch(connection: psycopg.Connection[Any], table: str) -> Callable[[list[Message]], None]:
    """The batch on a digest-keyed journal: one insert."""
    return sql_batch(connection, DIGEST["insert_batch"].format(table=f"{SCHEMA}.{table}").encode())


def former(inbox: Inbox) -> Inbox:
    """The inbox with process_batch's former insert: ON CONFLICT DO NOTHING for every batch, fresh or not (two
    searches of the unique index per key, a speculative insertion per row)."""
    statements = inbox._store._sql  # type: ignore[attr-defined]

    class Former(type(statements)):  # type: ignore[misc]
        """The statements with `fresh` always false: every batch goes to ON CONFLICT DO NOTHING."""

        fresh = property(lambda self: False, lambda self, value: None)

    statements.__class__ = Former
    return inbox


def create_generations(connection: psycopg.Connection[Any], hot: str, cold: str | None) -> None:
    """Create a two-generation journal's hot table (and its cold one, unless it is a filled flat journal)."""
    for table in (hot, cold):
        if table is not None:
            connection.execute(GENERATIONS["create_generation"].format(table=f"{SCHEMA}.{table}", **TEMPLATED).encode())
            key = GENERATIONS["create_generation_key"].format(table=f"{SCHEMA}.{table}", key_index=f"{table}_key")
            connection.execute(key.encode())


def generations_batch(connection: psycopg.Connection[Any], hot: str, cold: str) -> Callable[[list[Message]], None]:
    """The batch on a two-generation journal: the keys no cold row holds, inserted into the hot table."""
    insert = GENERATIONS["insert_batch"].format(hot=f"{SCHEMA}.{hot}", cold=f"{SCHEMA}.{cold}").encode()

    def run(messages: list[Message]) -> None:
        with connection.transaction():
            cursor = connection.execute(insert, batch_params(messages))
            assert cursor.rowcount == len(messages), "a fresh message was taken for a duplicate"

    return run


def fill_hot(connection: psycopg.Connection[Any], table: str, *, shape: str, rows: int, below: int) -> None:
    """A hot generation of `rows` older keys, none in the cold one: random keys of their own, or per partner the
    control numbers just below `below`, where the fresh keys start (the hot table's right-most leaves)."""
    connection.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{table}".encode())
    create_generations(connection, table, None)
    connection.execute(f"DROP INDEX {SCHEMA}.{table}_key".encode())
    if shape == "random":
        keys = "'bench:source', md5('h' || i)"
    else:
        first = below - rows // PARTNERS
        keys = (
            f"'X12:ZZ:P' || lpad((i %% {PARTNERS})::text, 4, '0') || '>ZZ:HUB', "
            f"lpad(({first} + (i - 1) / {PARTNERS})::text, 9, '0')"
        )
    connection.execute(
        f"INSERT INTO {SCHEMA}.{table} (consumer, source, message_id, fingerprint, received_at, status, attempts, "
        f"settled_at) SELECT '{CONSUMER}', s, m, md5(i::text) || md5((-i)::text), now(), 'processed', 1, now() "
        f"FROM generate_series(1, %(rows)s) AS i, LATERAL (SELECT {keys}) AS v (s, m)".encode(),
        {"rows": rows},
    )
    create_generations(connection, table, None)
    connection.execute(f"VACUUM ANALYZE {SCHEMA}.{table}".encode())


def build_filter(connection: psycopg.Connection[Any], cold: str, *, rate: float) -> Bloom:
    """A Bloom filter of the cold table's keys: counted, sized for `rate`, filled from the digests the server
    computes (bench/experiments/filtered.sql: key_digests); print the time of each step."""
    started = time.perf_counter()
    keys = count(connection, cold)
    bloom = Bloom.sized(keys, rate)
    counted = time.perf_counter()
    copied = 0.0
    with connection.cursor() as cursor, cursor.copy(FILTERED["key_digests"].format(cold=f"{SCHEMA}.{cold}")) as copy:
        bloom.add_all(copied_digests(copy))
        copied = time.perf_counter()
    print(
        f"built the filter of {cold}: {keys:,} keys, {len(bloom.bits) / 1e6:.2f} MB, {bloom.hashes} positions per"
        f" key, in {copied - started:.1f} s (count {counted - started:.1f} s, digests read and added"
        f" {copied - counted:.1f} s)",
        flush=True,
    )
    return bloom


def stored_filter(connection: psycopg.Connection[Any], cold: str, *, rate: float, rebuild: bool) -> Bloom:
    """The filter of the cold table as every hub would get it: loaded from table `filters` (built and stored
    there first when missing or `rebuild`); print the store and load times."""
    names = {"filters": FILTERS}
    connection.execute(FILTERED["create_filters"].format(**names).encode())
    load = FILTERED["load_filter"].format(**names).encode()
    if rebuild or connection.execute(load, {"generation": cold}).fetchone() is None:
        bloom = build_filter(connection, cold, rate=rate)
        started = time.perf_counter()
        stored = {"generation": cold, "keys": count(connection, cold), "hashes": bloom.hashes, "bits": bloom.bits}
        connection.execute(FILTERED["store_filter"].format(**names).encode(), stored)
        print(f"stored the filter of {cold} in {time.perf_counter() - started:.2f} s", flush=True)
    started = time.perf_counter()
    row = connection.execute(load, {"generation": cold}).fetchone()
    assert row is not None
    keys, hashes, bits = row
    bloom = Bloom(bytearray(bits), hashes)
    # the digests the server computed are the ones the process computes: every sampled key of the table is held
    sample = connection.execute(f"SELECT consumer, source, message_id FROM {SCHEMA}.{cold} LIMIT 10000".encode())
    assert all(digest(*key) in bloom for key in sample.fetchall()), "a key of the cold table is not in its filter"
    print(
        f"loaded the filter of {cold} ({keys:,} keys, {len(bits) / 1e6:.2f} MB) in"
        f" {time.perf_counter() - started:.2f} s",
        flush=True,
    )
    return bloom


class Checked:
    """What a filtered variant's filter did: Python time spent checking, keys checked, keys sent to a probe."""

    def __init__(self) -> None:
        """No batch yet."""
        self.clear()

    def clear(self) -> None:
        """Forget the batches so far (each measurement counts its own)."""
        self.seconds = 0.0
        self.keys = 0
        self.maybe = 0
        self.batches = 0

    def line(self, name: str) -> str:
        """One printed line: the check's time per batch and the share of keys that went to a probe."""
        batches, keys = max(self.batches, 1), max(self.keys, 1)
        return (
            f"  {name:<16} filter check {self.seconds / batches * 1e3:.2f} ms/batch (Python),"
            f" {self.maybe / batches:.1f} keys/batch probed in the cold table ({self.maybe / keys:.2%})"
        )


def filtered_batch(
    connection: psycopg.Connection[Any], hot: str, cold: str, head: str, *, bloom: Bloom, checked: Checked
) -> Callable[[list[Message]], None]:
    """The batch on a filtered two-generation journal: the filter checked per key, then in one round trip BEGIN,
    the shared rotation lock and the insert into the hot table of the keys the filter rules out or the cold table
    does not hold; then COMMIT."""
    names = {"hot": f"{SCHEMA}.{hot}", "cold": f"{SCHEMA}.{cold}", "head": f"{SCHEMA}.{head}"}
    insert = FILTERED["insert_batch"].format(**names).encode()
    lock = FILTERED["rotation_lock"].encode()
    rotation = {"lock": f"edinbox:{SCHEMA}.{head}"}

    def run(messages: list[Message]) -> None:
        started = time.perf_counter()
        maybe = [digest(CONSUMER, m.source, m.message_id) in bloom for m in messages]
        checked.seconds += time.perf_counter() - started
        checked.batches += 1
        checked.keys += len(messages)
        checked.maybe += sum(maybe)
        params = batch_params(messages) | {"maybe": maybe, "generation": 1}
        with connection.pipeline():
            connection.execute(b"BEGIN")
            connection.execute(lock, rotation)
            cursor = connection.execute(insert, params)
        assert cursor.rowcount == len(messages), "a fresh message was taken for a duplicate"
        connection.execute(b"COMMIT")

    return run


def flat_batch(inbox: Inbox, *, ordered: bool = False, known: int = 0) -> Callable[[list[Message]], None]:
    """Inbox.process_batch with a handler that does nothing (the journal's cost alone); `ordered`: the batch
    sorted by key first; `known`: at most this many keys of a batch are in the journal already."""

    def handler(tx: Tx, new: list[Message]) -> None:
        assert BATCH - known <= len(new) <= BATCH

    def run(messages: list[Message]) -> None:
        if ordered:
            messages.sort(key=lambda m: (m.source, m.message_id))
        inbox.process_batch(messages, handler)

    return run


Variants = dict[str, tuple[Keys, Callable[[list[Message]], None]]]


def wal_position(probe: psycopg.Connection[Any]) -> int:
    """The server's current WAL insert position in bytes (the benchmark is the only writer)."""
    row = probe.execute(b"SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone()
    return int(row[0]) if row else 0


def application(variant: str) -> str:
    """The application_name of a flat variant's connection."""
    return APPLICATION + variant.replace(" ", "_")


def server_cpu(probe: psycopg.Connection[Any]) -> dict[str, int]:
    """CPU time so far (ns) of each flat variant's server process, by its application_name, when the server runs
    on this machine (/proc/<pid>/schedstat); empty otherwise."""
    rows = probe.execute(
        b"SELECT application_name, pid FROM pg_stat_activity WHERE application_name LIKE %s", [f"{APPLICATION}%"]
    ).fetchall()
    spent = {}
    for application, pid in rows:
        stat = Path(f"/proc/{pid}/schedstat")
        if stat.exists():
            spent[application] = int(stat.read_text().split()[0])
    return spent


def measure(title: str, variants: Variants, *, turns: int, probe: psycopg.Connection[Any]) -> dict[str, str]:
    """Run the variants turn by turn (order rotated), one batch each per turn; print rates, ratios (of the totals,
    and the median of each turn's ratio, which a burst of load on the shared machine moves less) and the WAL each
    batch wrote (read from `probe` between batches, outside the timed part). Return each variant's rate and, for a
    full one, its ratios, for the side-by-side summary of `--compare`."""
    elapsed = dict.fromkeys(variants, 0.0)
    wal = dict.fromkeys(variants, 0)
    paired: dict[str, list[float]] = {name: [] for name in variants}  # each turn's batch time of each variant
    cpu = dict.fromkeys(variants, 0)
    client = dict.fromkeys(variants, 0.0)
    for keys, run in variants.values():  # warm-up: connections, plans, caches
        run(keys.batch())
    order = list(variants)
    for _ in range(turns):
        order = order[1:] + order[:1]
        for name in order:
            keys, run = variants[name]
            messages = keys.batch()
            before, cpu_before = wal_position(probe), server_cpu(probe)
            started, client_before = time.perf_counter(), time.process_time()
            run(messages)
            paired[name].append(time.perf_counter() - started)
            client[name] += time.process_time() - client_before
            elapsed[name] += paired[name][-1]
            wal[name] += wal_position(probe) - before
            cpu[name] += server_cpu(probe).get(application(name), 0) - cpu_before.get(application(name), 0)
    rates = {name: turns * BATCH / seconds for name, seconds in elapsed.items()}
    print(f"\n## {title}  ({turns} interleaved turns of {BATCH} messages per variant)")
    summary = {}
    for name, value in rates.items():
        summary[name] = f"{value:,.0f} msg/s"
        line = f"  {name:<16} {value:>9,.0f} msg/s  {wal[name] / turns / 1e6:5.2f} MB WAL/batch"
        line += f"  CPU ms/batch: client {client[name] / turns * 1e3:4.1f}"
        line += f", server {cpu[name] / turns / 1e6:4.1f}" if cpu[name] else ""
        if name.endswith("full"):
            empty = name.split()[0] + " empty"
            turn = statistics.median(e / f for e, f in zip(paired[empty], paired[name], strict=True))
            summary[name] = f"x{value / rates[empty]:.2f} (median x{turn:.2f})"
            line += f"  x{value / rates[empty]:.2f} of {empty} (median of the turns x{turn:.2f})"
            if empty != "flat empty" and "flat empty" in rates:
                line += f", x{value / rates['flat empty']:.2f} of flat empty"
        print(line, flush=True)
    return summary


def measured(
    title: str, variants: Variants, checked: dict[str, Checked], *, turns: int, probe: psycopg.Connection[Any]
) -> dict[str, str]:
    """`measure`, then what each filtered variant's filter did during it."""
    for filtered in checked.values():
        filtered.clear()
    summary = measure(title, variants, turns=turns, probe=probe)
    for name, filtered in checked.items():
        print(filtered.line(name), flush=True)
    return summary


def hot_name(shape: str, rows: int) -> str:
    """The kept hot table of the filtered full journal with `rows` older keys."""
    return f"filtered_hot_{shape}_{rows}"


def huge_pages() -> str:
    """The huge page counters of /proc/meminfo (Total, Free, Rsvd): a server whose shared memory uses huge pages
    has them reserved (Rsvd) or touched (Total - Free)."""
    lines = Path("/proc/meminfo").read_text().splitlines()
    counters = dict(line.replace(":", "").split()[:2] for line in lines if line.startswith("HugePages_"))
    return ", ".join(f"{name}={counters.get(f'HugePages_{name}', '?')}" for name in ("Total", "Free", "Rsvd"))


def explain(
    connection: psycopg.Connection[Any], tables: dict[str, str], keys: dict[str, Keys], *, batches: int
) -> None:
    """Print, per journal, the buffer visits (shared hits + reads) of the store's insert of a fresh batch under
    EXPLAIN (ANALYZE, BUFFERS), rolled back (range and median over `batches`), and its unique index's root level."""
    print(f"\n## EXPLAIN (ANALYZE, BUFFERS) of the store's insert, {batches} batches of {BATCH} each, rolled back")
    connection.execute(b"CREATE EXTENSION IF NOT EXISTS pageinspect")
    for name, table in tables.items():
        visits, reads, times = [], [], []
        statement = b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + INSERT.format(table=f"{SCHEMA}.{table}").encode()
        for _ in range(batches):
            messages = keys[name].batch()
            with connection.transaction(force_rollback=True):
                row = connection.execute(statement, batch_params(messages)).fetchone()
            plan = row[0][0] if row else {}
            top = plan.get("Plan", {})
            visits.append(int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0)))
            reads.append(int(top.get("Shared Read Blocks", 0)))
            times.append(float(plan.get("Execution Time", 0.0)))
        level = connection.execute(HASH["index_level"].encode(), {"index": f"{SCHEMA}.{table}_key"}).fetchone()
        print(
            f"  {name:<16} buffer visits/batch {min(visits):,}-{max(visits):,}"
            f" (median {statistics.median(visits):,.0f}),"
            f" reads {statistics.median(reads):,.0f}, execution {statistics.median(times):.1f} ms,"
            f" root level {level[0] if level else '?'}",
            flush=True,
        )


def advance(variants: Variants, batches: int) -> None:
    """Run `batches` untimed batches on every full variant: the traffic a busy journal takes between two
    checkpoints, after which most leaves it writes already had their full-page image in this checkpoint cycle."""
    for name, (keys, run) in variants.items():
        if name.endswith("full"):
            for _ in range(batches):
                run(keys.batch())


def full_name(layout: str, shape: str, rows: int, *, partitions: int = 16) -> str:
    """The kept full journal of a layout, key shape and size (10M rows: no size in the name; the hash layout's
    partitions in it unless 16)."""
    kept = f"{layout}{partitions}" if layout == "hash" and partitions != 16 else layout
    return f"{kept}_{shape}" + ("" if rows == 10_000_000 else f"_{rows}")


def main() -> None:
    """Run on the given server, or on a private cluster started (and stopped) here."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--url", default=os.environ.get("EDINBOX_TEST_POSTGRES", "postgresql://postgres@127.0.0.1/test")
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--keys", default="random,rising")
    parser.add_argument("--layouts", default="flat,digest,ring")
    parser.add_argument("--partitions", type=int, default=16, help="the hash layout's partitions")
    parser.add_argument("--hot", type=int, default=0, help="rows in the filtered full journal's hot table")
    parser.add_argument("--rate", type=float, default=0.01, help="the filtered layout's false-positive rate")
    parser.add_argument("--explain", type=int, default=0, help="then EXPLAIN this many batches per flat/hash journal")
    parser.add_argument("--refill", action="store_true")
    parser.add_argument("--wal-compression", action="store_true", help="also the full flat journal with lz4 WAL")
    parser.add_argument(
        "--steady", type=int, default=0, help="then measure again after this many untimed batches on the full journals"
    )
    parser.add_argument("--former", action="store_true", help="also the flat journals with ON CONFLICT every batch")
    parser.add_argument(
        "--redelivered", action="store_true", help="also empty journals whose batches each repeat one earlier key"
    )
    parser.add_argument("--sorted", action="store_true", help="also the flat batches sorted by key")
    parser.add_argument("--private", type=Path, help="run a PostgreSQL cluster of its own, kept in this folder")
    parser.add_argument("--server", choices=sorted(SERVERS), default="sized", help="the private cluster's settings")
    parser.add_argument("-c", dest="settings", action="append", default=[], help="NAME=VALUE for the private cluster")
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        help="NAME=VALUE[,NAME=VALUE]: run again on the private cluster restarted with these settings added",
    )
    parser.add_argument("--remove", action="store_true", help="delete the private cluster at the end")
    args = parser.parse_args()
    if args.private is None:
        run(args)
        return
    base = SERVERS[args.server] | dict(setting.split("=", 1) for setting in args.settings)
    runs = [dict(setting.split("=", 1) for setting in compared.split(",")) for compared in args.compare] or [{}]
    server = PrivatePostgres(args.private.resolve(), settings=base)
    results: list[tuple[str, dict[str, dict[str, str]]]] = []  # (settings, title -> variant -> rate or ratio)
    try:
        for extra in runs:
            server.settings = base | extra
            server.start()
            named = ",".join(f"{name}={value}" for name, value in extra.items()) or "as given"
            print(f"\n# server started with {named}; huge pages: {huge_pages()}", flush=True)
            args.url = server.url
            results.append((named, run(args)))
            print(f"# huge pages at the end of the run: {huge_pages()}", flush=True)
            server.stop()
    finally:
        if server.running():
            server.stop()
        if args.remove:
            server.remove()
    if len(results) > 1:
        side_by_side(results)


def side_by_side(results: list[tuple[str, dict[str, dict[str, str]]]]) -> None:
    """Print each measurement's rate (empty) or ratio (full) per run, one column per run's settings, in run order."""
    print("\n## side by side: " + " | ".join(named for named, _ in results))
    for title, variants in results[0][1].items():
        print(f"  {title}")
        for name in variants:
            cells = [measured.get(title, {}).get(name, "-") for _, measured in results]
            print(f"    {name:<16} " + " | ".join(f"{cell:>22}" for cell in cells), flush=True)


def run(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """Fill (or reuse) the journals at `args.url`, then compare full and empty per key shape and layout; return
    each measurement's rates and ratios by title."""
    shapes = args.keys.split(",")
    layouts = args.layouts.split(",")
    connection = psycopg.connect(args.url, autocommit=True)
    shown = ", ".join(f"{name}={connection.execute(f'SHOW {name}'.encode()).fetchall()[0][0]}" for name in SHOWN)
    print(f"PostgreSQL {connection.info.server_version}: {shown}")
    connection.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}".encode())
    with Inbox(args.url, consumer=CONSUMER, table=TEMPLATE) as template:
        template.create_schema()
    print(f"journal at scale, {os.cpu_count()} CPUs, load average {os.getloadavg()} (the machine is shared)")
    for shape in shapes:
        for layout in layouts:
            table = full_name(layout, shape, args.rows, partitions=args.partitions)
            if layout == "filtered" and args.hot:  # a kept hot table of older keys for the full journal
                hot = hot_name(shape, args.hot)
                if args.refill or count(connection, hot) < args.hot:
                    started = time.perf_counter()
                    below = args.rows // PARTNERS + 1 + 5 * 10**6
                    fill_hot(connection, hot, shape=shape, rows=args.hot, below=below)
                    print(f"filled {hot} with {args.hot:,} rows in {time.perf_counter() - started:.0f} s", flush=True)
            if layout in ("generations", "filtered"):  # their cold table is the flat journal
                continue
            if args.refill or count(connection, table) < args.rows:
                started = time.perf_counter()
                if layout == "flat":
                    fill_flat(args.url, connection, table, shape=shape, rows=args.rows)
                elif layout == "collate":
                    connection.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{table}".encode())
                    create_collated(connection, table)
                    fill_flat(args.url, connection, table, shape=shape, rows=args.rows)
                elif layout == "hash":
                    fill_hash(args.url, connection, table, shape=shape, rows=args.rows, parts=args.partitions)
                elif layout == "digest":
                    fill_digest(connection, table, shape=shape, rows=args.rows)
                else:
                    fill_ring(connection, table, shape=shape, rows=args.rows)
                print(f"filled {table} with {args.rows:,} rows in {time.perf_counter() - started:.0f} s", flush=True)
    suffix = uuid.uuid4().hex[:8]
    results: dict[str, dict[str, str]] = {}
    work = psycopg.connect(args.url, autocommit=True)
    inboxes: list[Inbox] = []
    closing: list[psycopg.Connection[Any]] = []
    try:
        for shape in shapes:
            start = args.rows // PARTNERS + 1
            variants: Variants = {}
            tables: dict[str, str] = {}  # the flat and hash journals, for EXPLAIN
            checked: dict[str, Checked] = {}  # the filtered variants' filters at work
            for layout in layouts:
                empty = f"empty_{layout}_{shape}_{suffix}"
                if layout == "hash":
                    create_hash(connection, empty, partitions=args.partitions)
                if layout == "collate":
                    create_collated(connection, empty)
                if layout in ("flat", "hash", "collate"):
                    full = full_name(layout, shape, args.rows, partitions=args.partitions)
                    journals = [(f"{layout} empty", empty, args.url), (f"{layout} full", full, args.url)]
                    if (
                        layout == "flat" and args.wal_compression
                    ):  # a superuser's session setting, through libpq's options
                        compressed = f"{args.url}{'&' if '?' in args.url else '?'}options=-c%20wal_compression%3Dlz4"
                        journals.append((f"{layout} lz4 full", full, compressed))
                    if layout == "flat" and args.former:  # the same journals, ON CONFLICT for every batch
                        journals += [("former empty", f"{empty}_former", args.url), ("former full", full, args.url)]
                    if layout == "flat" and args.redelivered:  # on empty journals: a plain INSERT's worst case
                        journals += [
                            ("redelivered flat", f"{empty}_redelivered", args.url),
                            ("redelivered former", f"{empty}_redelivered_former", args.url),
                        ]
                    if layout == "flat" and args.sorted:  # the same batches sorted by key before process_batch
                        journals += [("sorted empty", f"{empty}_sorted", args.url), ("sorted full", full, args.url)]
                    for n, (name, table, url) in enumerate(journals):
                        named = f"{url}{'&' if '?' in url else '?'}application_name={application(name)}"
                        inbox = Inbox(named, consumer=CONSUMER, table=f"{SCHEMA}.{table}")
                        inbox.create_schema()
                        inbox.verify()  # the partitioned journal passes the store's own checks
                        inboxes.append(inbox)
                        # two variants on one full journal: rising numbers of their own, each above the filled ones
                        if "former" in name:
                            former(inbox)
                        redelivered = name.startswith("redelivered")
                        batch = flat_batch(inbox, ordered=name.startswith("sorted"), known=int(redelivered))
                        fresh = (Redelivered if redelivered else Keys)(shape, start=start + n * 10**6)
                        variants[name] = (fresh, batch)
                        if name in (f"{layout} empty", f"{layout} full"):
                            tables[name] = table
                elif layout == "generations":  # hot tables of their own; the full one's cold is the flat journal
                    create_generations(connection, f"{empty}_hot", f"{empty}_cold")
                    create_generations(connection, f"{empty}_hotfull", None)
                    cold = full_name("flat", shape, args.rows)
                    pairs = (("empty", f"{empty}_hot", f"{empty}_cold"), ("full", f"{empty}_hotfull", cold))
                    for name, hot, probed in pairs:
                        variant = f"{layout} {name}"
                        named = f"{args.url}{'&' if '?' in args.url else '?'}application_name={application(variant)}"
                        direct = psycopg.connect(named, autocommit=True)
                        closing.append(direct)
                        fresh = Keys(shape, start=start + 5 * 10**6)
                        variants[variant] = (fresh, generations_batch(direct, hot, probed))
                elif layout == "filtered":  # the full one's cold is the flat journal, its hot empty or kept
                    create_generations(connection, f"{empty}_hot", f"{empty}_cold")
                    cold = full_name("flat", shape, args.rows)
                    hot = hot_name(shape, args.hot) if args.hot else f"{empty}_hotfull"
                    if not args.hot:
                        create_generations(connection, hot, None)
                    pairs = (
                        ("empty", f"{empty}_hot", f"{empty}_cold", f"{empty}_head", False),
                        ("full", hot, cold, f"{empty}_headfull", args.refill),
                    )
                    for name, hot, probed, head, rebuild in pairs:
                        for statement in ("create_head", "seed_head"):
                            connection.execute(FILTERED[statement].format(head=f"{SCHEMA}.{head}").encode())
                        bloom = stored_filter(connection, probed, rate=args.rate, rebuild=rebuild or name == "empty")
                        variant = f"{layout} {name}"
                        named = f"{args.url}{'&' if '?' in args.url else '?'}application_name={application(variant)}"
                        direct = psycopg.connect(named, autocommit=True)
                        closing.append(direct)
                        checked[variant] = Checked()
                        batch = filtered_batch(direct, hot, probed, head, bloom=bloom, checked=checked[variant])
                        variants[variant] = (Keys(shape, start=start + 5 * 10**6), batch)
                elif layout == "digest":
                    create_digest(connection, empty)
                    variants[f"{layout} empty"] = (Keys(shape, start=start), digest_batch(work, empty))
                    full = full_name(layout, shape, args.rows)
                    variants[f"{layout} full"] = (Keys(shape, start=start), digest_batch(work, full))
                else:
                    create_ring(connection, empty)
                    variants[f"{layout} empty"] = (Keys(shape, start=start), ring_batch(work, empty))
                    variants[f"{layout} full"] = (
                        Keys(shape, start=start),
                        ring_batch(work, full_name(layout, shape, args.rows)),
                    )
            for layout in {"flat" if layout in ("generations", "filtered") else layout for layout in layouts}:
                reset(connection, full_name(layout, shape, args.rows, partitions=args.partitions), layout=layout)
            if "filtered" in layouts and args.hot:
                reset(connection, hot_name(shape, args.hot), layout="flat")
            connection.execute(b"CHECKPOINT")
            title = f"{shape} keys, {args.rows:,} rows in the full journals"
            if "filtered" in layouts:
                title += f" (filtered full: {args.hot:,} rows in its hot table)"
            checkpointed = f"{title}, right after a checkpoint"
            results[checkpointed] = measured(checkpointed, variants, checked, turns=args.turns, probe=connection)
            if args.steady:
                advance(variants, args.steady)
                steady = f"{title}, {args.steady:,} more batches into the checkpoint cycle"
                results[steady] = measured(steady, variants, checked, turns=args.turns, probe=connection)
            if args.explain:
                # rising numbers of their own, above every variant's: the statement is rolled back
                keys = {name: Keys(shape, start=start + 10**7) for name in tables}
                explain(work, tables, keys, batches=args.explain)
    finally:
        for inbox in inboxes:
            inbox.close()
        for direct in closing:
            direct.close()
        for shape in shapes:
            for layout in layouts:
                empty = f"{SCHEMA}.empty_{layout}_{shape}_{suffix}"
                connection.execute(f"DROP TABLE IF EXISTS {empty}, {empty}_head, {empty}_version".encode())
                connection.execute(f"DROP TABLE IF EXISTS {empty}_sorted, {empty}_sorted_version".encode())
                for kept in ("former", "redelivered", "redelivered_former"):
                    connection.execute(f"DROP TABLE IF EXISTS {empty}_{kept}, {empty}_{kept}_version".encode())
                connection.execute(f"DROP TABLE IF EXISTS {empty}_hot, {empty}_cold, {empty}_hotfull".encode())
                connection.execute(f"DROP TABLE IF EXISTS {empty}_headfull".encode())
                if layout == "filtered" and count(connection, "filters"):  # the empty cold table's filter
                    cold = f"empty_{layout}_{shape}_{suffix}_cold"
                    connection.execute(f"DELETE FROM {FILTERS} WHERE generation = %s".encode(), [cold])
        connection.close()
        work.close()
    return results


if __name__ == "__main__":
    main()
