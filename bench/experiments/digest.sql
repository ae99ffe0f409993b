-- A candidate layout measured by bench/journal_scale.py (docs/scaling.md): the journal's unique key is a 16-byte
-- digest of (consumer, source, message_id) instead of the three text columns, so its index is about half as big.

-- name: create_digest
CREATE TABLE IF NOT EXISTS {table} (LIKE {template} INCLUDING DEFAULTS INCLUDING CONSTRAINTS, key bytea NOT NULL)

-- name: create_digest_key
CREATE UNIQUE INDEX IF NOT EXISTS {key_index} ON {table} (key)

-- name: fill
INSERT INTO {table} (consumer, source, message_id, fingerprint, received_at, status, attempts, settled_at, key)
SELECT v.c, v.s, v.m, v.f, v.r, 'processed', 1, v.r,
    substring(sha256(convert_to(v.c || chr(31) || v.s || chr(31) || v.m, 'UTF8')) FROM 1 FOR 16)
FROM generate_series(1, %(rows)s) AS i, LATERAL (SELECT 'bench', {values}) AS v (c, s, m, f, r)

-- name: insert_batch
INSERT INTO {table} AS t (consumer, source, message_id, fingerprint, status, attempts, received_at, settled_at, key)
SELECT %(consumer)s, u.s, u.m, u.f, 'processed', 1, now(), now(),
    substring(sha256(convert_to(%(consumer)s || chr(31) || u.s || chr(31) || u.m, 'UTF8')) FROM 1 FOR 16)
FROM unnest(%(sources)b::text[], %(message_ids)b::text[], %(fingerprints)b::text[]) AS u (s, m, f)
ON CONFLICT DO NOTHING
RETURNING source, message_id
