-- A candidate layout measured by bench/journal_scale.py (docs/scaling.md, "A filter of the cold generation"): two
-- generations as in bench/experiments/generations.sql, plus a Bloom filter of the cold generation's keys
-- (bench/experiments/bloom.py),
-- built once the generation is sealed and stored here so that every hub loads the same one. A batch probes the
-- cold table only for the keys the filter may hold; every other key goes straight to the hot table's plain INSERT.

-- name: create_filters
CREATE TABLE IF NOT EXISTS {filters} (
    generation text PRIMARY KEY,
    keys bigint NOT NULL,
    hashes integer NOT NULL,
    bits bytea NOT NULL
)

-- name: create_head
CREATE TABLE IF NOT EXISTS {head} (generation integer NOT NULL)

-- name: seed_head
INSERT INTO {head} (generation) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM {head})

-- The filter's keys, as bench/experiments/bloom.py's digest(): MD5 of consumer, source and message id joined by U+001F.
-- name: key_digests
COPY (SELECT decode(md5(consumer || E'\x1f' || source || E'\x1f' || message_id), 'hex') FROM {cold})
TO STDOUT (FORMAT binary)

-- name: store_filter
INSERT INTO {filters} (generation, keys, hashes, bits) VALUES (%(generation)s, %(keys)s, %(hashes)s, %(bits)s)
ON CONFLICT (generation) DO UPDATE SET keys = excluded.keys, hashes = excluded.hashes, bits = excluded.bits

-- name: load_filter
SELECT keys, hashes, bits FROM {filters} WHERE generation = %(generation)s

-- Every writing transaction holds the rotation lock shared, taken in a statement before the insert: a rotation
-- (exclusive) waits for the writers of the old hot table, and the insert's snapshot, taken after the lock, sees
-- the head the rotation committed.
-- name: rotation_lock
SELECT pg_advisory_xact_lock_shared(hashtextextended(%(lock)s, 0))

-- The keys of the batch that no cold row holds, into the hot table: `maybe` is the filter's answer per key, and
-- only those keys probe the cold table (OR evaluates its arms in order: a key the filter rules out runs no
-- probe). Nothing is inserted if the head moved past the generation whose filter the process holds.
-- name: insert_batch
INSERT INTO {hot} (consumer, source, message_id, fingerprint, status, attempts, received_at, settled_at)
SELECT %(consumer)s, u.s, u.m, u.f, 'processed', 1, now(), now()
FROM unnest(%(sources)b::text[], %(message_ids)b::text[], %(fingerprints)b::text[], %(maybe)b::boolean[])
    AS u (s, m, f, maybe)
WHERE (SELECT generation FROM {head}) = %(generation)s
    AND (NOT u.maybe OR NOT EXISTS (
        SELECT 1 FROM {cold} AS c WHERE c.consumer = %(consumer)s AND c.source = u.s AND c.message_id = u.m
    ))
