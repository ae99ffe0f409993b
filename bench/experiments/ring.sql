-- A candidate layout measured by bench/journal_scale.py and not adopted (docs/scaling.md): the journal as a ring
-- of slot partitions. Inserts go to the current slot only; the other slots inside the horizon are probed, never
-- written, so a batch dirties a few hot pages, not a leaf per key.

-- name: create_ring
CREATE TABLE IF NOT EXISTS {table} (LIKE {template} INCLUDING DEFAULTS INCLUDING CONSTRAINTS, slot smallint NOT NULL)
PARTITION BY LIST (slot)

-- name: create_ring_key
CREATE UNIQUE INDEX IF NOT EXISTS {key_index} ON {table} (consumer, source, message_id, slot)

-- name: create_slot
CREATE TABLE IF NOT EXISTS {slot} PARTITION OF {table} FOR VALUES IN ({number})

-- name: create_head
CREATE TABLE IF NOT EXISTS {head} (slot smallint NOT NULL, since timestamptz NOT NULL DEFAULT now())

-- name: seed_head
INSERT INTO {head} (slot) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM {head})

-- Every writing transaction holds the rotation lock shared, taken in a statement before the one that reads the
-- head: a rotation (exclusive) waits for them, so a key inserted in the old slot is committed, and seen by the
-- probe, before any insert goes to the new slot.
-- name: ring_lock
SELECT pg_advisory_xact_lock_shared(hashtextextended(%(lock)s, 0))

-- name: insert_batch
INSERT INTO {table} AS t (consumer, source, message_id, fingerprint, status, attempts, received_at, settled_at, slot)
SELECT %(consumer)s, u.s, u.m, u.f, 'processed', 1, now(), now(), h.slot
FROM unnest(%(sources)b::text[], %(message_ids)b::text[], %(fingerprints)b::text[]) AS u (s, m, f), {head} AS h
WHERE NOT EXISTS (
    SELECT 1 FROM {table} AS o WHERE o.consumer = %(consumer)s AND o.source = u.s AND o.message_id = u.m
)
ON CONFLICT DO NOTHING
RETURNING source, message_id
