-- A candidate layout measured by bench/journal_scale.py (docs/scaling.md): the journal in two generations. A hot
-- table takes every insert under its own unique index; a cold table (the generation before, up to the horizon) is
-- only probed, read-only, so its index is never dirtied. A batch inserts into the hot table the keys that no cold
-- row holds, with a plain INSERT (one descent of the hot index per key) after one probe of the cold index.

-- name: create_generation
CREATE TABLE IF NOT EXISTS {table} (LIKE {template} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)

-- name: create_generation_key
CREATE UNIQUE INDEX IF NOT EXISTS {key_index} ON {table} (consumer, source, message_id)

-- name: insert_batch
INSERT INTO {hot} (consumer, source, message_id, fingerprint, status, attempts, received_at, settled_at)
SELECT %(consumer)s, u.s, u.m, u.f, 'processed', 1, now(), now()
FROM unnest(%(sources)b::text[], %(message_ids)b::text[], %(fingerprints)b::text[]) AS u (s, m, f)
WHERE NOT EXISTS (
    SELECT 1 FROM {cold} AS c WHERE c.consumer = %(consumer)s AND c.source = u.s AND c.message_id = u.m
)
