"""The journal layouts bench/journal_scale.py measures: their keys, tables, fills and batches, and the names of
the journals it keeps."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

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


def application(variant: str) -> str:
    """The application_name of a flat variant's connection."""
    return APPLICATION + variant.replace(" ", "_")


def hot_name(shape: str, rows: int) -> str:
    """The kept hot table of the filtered full journal with `rows` older keys."""
    return f"filtered_hot_{shape}_{rows}"


def full_name(layout: str, shape: str, rows: int, *, partitions: int = 16) -> str:
    """The kept full journal of a layout, key shape and size (10M rows: no size in the name; the hash layout's
    partitions in it unless 16)."""
    kept = f"{layout}{partitions}" if layout == "hash" and partitions != 16 else layout
    return f"{kept}_{shape}" + ("" if rows == 10_000_000 else f"_{rows}")
