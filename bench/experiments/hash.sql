-- A candidate layout measured by bench/journal_scale.py (docs/scaling.md): the journal hash-partitioned on
-- message_id. The unique key (consumer, source, message_id) contains the partition key, so PostgreSQL accepts it
-- on the parent; an INSERT routes each row to the one partition its message_id hashes to, where that partition's
-- unique index (1/N of the rows, one level shallower) meets every copy of the key. Inbox.create_schema() and
-- Inbox.verify() accept the parent as the journal (the partitioned index is unique and valid).

-- name: create_hash
CREATE TABLE IF NOT EXISTS {table} (LIKE {template} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
PARTITION BY HASH (message_id)

-- name: create_hash_key
CREATE UNIQUE INDEX IF NOT EXISTS {key_index} ON {table} (consumer, source, message_id)

-- name: create_part
CREATE TABLE IF NOT EXISTS {part} PARTITION OF {table} FOR VALUES WITH (MODULUS {modulus}, REMAINDER {remainder})

-- name: index_level
-- the level of the root page of a unique index, the deepest of its partitions' for a partitioned one (pageinspect)
SELECT max((bt_metap(s.x::text)).level)
FROM (
    SELECT %(index)s::regclass WHERE NOT EXISTS (SELECT 1 FROM pg_inherits WHERE inhparent = %(index)s::regclass)
    UNION ALL SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = %(index)s::regclass
) AS s (x)
