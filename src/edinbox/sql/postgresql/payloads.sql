-- The message store beside the journal (`edinbox._payloads`): a processed message's payload, kept by a consumer
-- with `keep_payloads`, written in the transaction that settles it. `{payloads}` is `<journal>_payloads`, keyed as
-- the journal is; `body` is packed (`edinbox._payloads.pack`: zlib-compressed from 1 KiB, else as it is behind a zero
-- byte; a prefix when `truncated`; stored as is by TOAST, not compressed again), `sha256` and `size` are the whole
-- payload's. The search text (`edinbox._payloads.search_text`) is kept as its words only, `words`: a tsvector of
-- lexemes as they are, lower-cased (what to_tsvector('simple', ...) makes of them, without running the text search
-- parser: half the server's time), no positions (a search asks for every word, not a phrase), under a GIN index; a
-- scan of a small table reads it as stored, never computing a tsvector per row. The settling transaction writes the
-- words (an UPDATE later would write the row again, with its index entries). A row kept at journal version 13 may
-- still wait with `words` NULL and `body` as received: `payloads_index_batch` indexes it.

-- name: payloads_create
CREATE TABLE IF NOT EXISTS {payloads} (
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size BIGINT NOT NULL,
    content_type TEXT NOT NULL,
    truncated BOOLEAN NOT NULL,
    body BYTEA NOT NULL,
    words TSVECTOR,
    kept_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, source, message_id)
)

-- name: payloads_create_storage
-- the body is compressed already: TOAST keeps it out of line as it is, without trying to compress it again
ALTER TABLE {payloads} ALTER COLUMN body SET STORAGE EXTERNAL

-- name: payloads_create_kept
CREATE INDEX IF NOT EXISTS {payloads_kept_index} ON {payloads} (consumer, kept_at)

-- name: payloads_create_pending
-- the rows kept but not indexed yet, for `payloads_pending`: an index as small as that backlog
CREATE INDEX IF NOT EXISTS {payloads_pending_index} ON {payloads} (consumer) WHERE words IS NULL

-- name: payloads_create_text
-- the indexed rows only: a row written by a settling transaction (no words yet) adds no GIN entry there
CREATE INDEX IF NOT EXISTS {payloads_text_index} ON {payloads} USING gin (words) WHERE words IS NOT NULL

-- name: payloads_keep
-- a message processed again after a `forget` replaces what was kept of it
INSERT INTO {payloads} (consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, words)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(fingerprint)s, %(sha256)s, %(size)s, %(content_type)s,
    %(truncated)s, %(body)s, array_to_tsvector(string_to_array(lower(%(text)s), ' ')))
ON CONFLICT (consumer, source, message_id) DO UPDATE SET fingerprint = excluded.fingerprint,
    sha256 = excluded.sha256, size = excluded.size, content_type = excluded.content_type,
    truncated = excluded.truncated, body = excluded.body, words = excluded.words, kept_at = excluded.kept_at

-- name: payloads_keep_batch
-- payloads_keep for a batch in one statement: parallel arrays, sent in binary, as the journal's insert_batch
INSERT INTO {payloads} (consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, words)
SELECT %(consumer)s, u.s, u.m, u.f, u.d, u.n, u.c, u.t, u.b, array_to_tsvector(string_to_array(lower(u.w), ' '))
FROM unnest(%(sources)b::text[], %(message_ids)b::text[], %(fingerprints)b::text[], %(sha256s)b::text[],
    %(sizes)b::bigint[], %(content_types)b::text[], %(truncateds)b::boolean[], %(bodies)b::bytea[], %(texts)b::text[])
    AS u (s, m, f, d, n, c, t, b, w)
ON CONFLICT (consumer, source, message_id) DO UPDATE SET fingerprint = excluded.fingerprint,
    sha256 = excluded.sha256, size = excluded.size, content_type = excluded.content_type,
    truncated = excluded.truncated, body = excluded.body, words = excluded.words, kept_at = excluded.kept_at

-- name: payloads_waiting
-- whether a kept payload of this consumer waits for its index
SELECT 1 FROM {payloads} WHERE consumer = %(consumer)s AND words IS NULL LIMIT 1

-- name: payloads_pending
-- the kept payloads of this consumer not indexed yet, held until indexed (another indexer skips them)
SELECT source, message_id, body FROM {payloads} WHERE consumer = %(consumer)s AND words IS NULL
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: payloads_index_batch
-- the search text of each of these kept payloads, and its body packed, made after their settling transaction (a row
-- kept at journal version 13): parallel arrays
UPDATE {payloads} AS p SET words = array_to_tsvector(string_to_array(lower(u.w), ' ')), body = u.b
FROM unnest(%(sources)b::text[], %(message_ids)b::text[], %(texts)b::text[], %(bodies)b::bytea[]) AS u (s, m, w, b)
WHERE p.consumer = %(consumer)s AND p.source = u.s AND p.message_id = u.m AND p.words IS NULL

-- name: payloads_get
-- `indexed`: the body is packed (a row journal version 13 left waiting holds the bytes as received)
SELECT consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, kept_at,
    words IS NOT NULL AS indexed
FROM {payloads}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: payloads_search
-- The full-text index finds the rows first (MATERIALIZED: the planner would otherwise walk the consumer's kept_at
-- index for the newest and match row by row), then the newest are kept. It stops at 5,000: a word that many payloads
-- hold ("UNB", a partner's own GLN) is searched the other way round instead, walking the kept_at index newest first
-- and matching row by row, which finds `limit` of them soon (the one-time filters run only one of the two)
WITH hits AS MATERIALIZED (
    SELECT consumer, source, message_id, size, kept_at
    FROM {payloads}
    WHERE words @@ plainto_tsquery('simple', %(words)s)
    LIMIT 5000
), few AS MATERIALIZED (
    SELECT count(*) < 5000 AS yes FROM hits
)
(SELECT consumer, source, message_id, size, kept_at
FROM hits
WHERE consumer = %(consumer)s AND (SELECT yes FROM few)
ORDER BY kept_at DESC
LIMIT %(limit)s)
UNION ALL
(SELECT consumer, source, message_id, size, kept_at
FROM {payloads}
WHERE consumer = %(consumer)s AND words @@ plainto_tsquery('simple', %(words)s) AND NOT (SELECT yes FROM few)
ORDER BY kept_at DESC
LIMIT %(limit)s)

-- name: payloads_purge_batch
-- the kept payloads of this consumer older than the retention whose journal row is gone (purged, or forgotten)
DELETE FROM {payloads}
WHERE ctid IN (
    SELECT p.ctid FROM {payloads} AS p
    WHERE p.consumer = %(consumer)s AND p.kept_at < now() - %(older_than)s
        AND NOT EXISTS (
            SELECT 1 FROM {table} AS j
            WHERE j.consumer = p.consumer AND j.source = p.source AND j.message_id = p.message_id
        )
    LIMIT %(batch_size)s
    FOR UPDATE SKIP LOCKED
)
