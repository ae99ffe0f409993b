-- The message store beside the journal (`edinbox._payloads`): a processed message's payload, kept by a consumer
-- with `keep_payloads`, written in the transaction that settles it. `{payloads}` is `<journal>_payloads`, keyed as
-- the journal is; `body` is packed (`pack`: zlib-compressed from 1 KiB; a prefix when `truncated`), `sha256` and
-- `size` are the whole payload's. `text` is unused (the search text of journal versions 11-13; NULL from 14).
-- `{payloads_fts}` indexes each row's words (FTS5, contentless: the words are not stored, `fts_text` makes them again
-- from the body when a row leaves the index), written after the settling transaction, a batch at a time:
-- `{payloads_mark}` holds the highest rowid indexed, and every row above it waits. A row is never written below the
-- mark unindexed: a new row's rowid is above every row's, and a purge that takes the highest rows lowers the mark.
-- name: payloads_create
CREATE TABLE IF NOT EXISTS {payloads} (
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    truncated INTEGER NOT NULL,
    body BLOB NOT NULL,
    text TEXT,
    kept_at REAL NOT NULL
)

-- name: payloads_create_key
CREATE UNIQUE INDEX IF NOT EXISTS {payloads_key_index} ON {payloads} (consumer, source, message_id)

-- name: payloads_create_kept
CREATE INDEX IF NOT EXISTS {payloads_kept_index} ON {payloads} (consumer, kept_at)

-- name: payloads_create_fts
CREATE VIRTUAL TABLE IF NOT EXISTS {payloads_fts} USING fts5(text, content='')

-- name: payloads_create_mark
CREATE TABLE IF NOT EXISTS {payloads_mark} (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_to INTEGER NOT NULL
)

-- name: payloads_create_mark_row
INSERT OR IGNORE INTO {payloads_mark} (id, indexed_to) VALUES (1, 0)

-- name: payloads_keep
-- a message processed again after a `forget` conflicts with what was kept of it: that row is deleted then (out of
-- the full-text index first: `edinbox._async_fts.replace`) and this runs again
INSERT INTO {payloads} (consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, kept_at)
VALUES (:consumer, :source, :message_id, :fingerprint, :sha256, :size, :content_type, :truncated, :body, :now)
ON CONFLICT (consumer, source, message_id) DO NOTHING

-- name: payloads_kept_row
-- the row kept of one message: its rowid, and whether it is in the full-text index (at or below the mark)
SELECT p.rowid, p.rowid <= m.indexed_to FROM {payloads} AS p, {payloads_mark} AS m
WHERE p.consumer = :consumer AND p.source = :source AND p.message_id = :message_id

-- name: payloads_body
SELECT body FROM {payloads} WHERE rowid = :id

-- name: payloads_unindex
-- a row's words out of the full-text index (the words it was indexed with, made again from its body: `fts_text`)
INSERT INTO {payloads_fts} ({payloads_fts}, rowid, text) VALUES ('delete', :id, :text)

-- name: payloads_delete_row
DELETE FROM {payloads} WHERE rowid = :id

-- name: payloads_waiting
-- whether a kept payload waits for the full-text index (read without a write lock): one above the mark
SELECT 1 FROM {payloads} WHERE rowid > (SELECT indexed_to FROM {payloads_mark}) LIMIT 1

-- name: payloads_pending_sizes
-- the kept payloads above the mark, in rowid order, with their sizes (in the write transaction that indexes them):
-- how many of them one batch takes (`fts_upto`), before their bodies are read
SELECT rowid, size FROM {payloads} WHERE rowid > (SELECT indexed_to FROM {payloads_mark}) ORDER BY rowid LIMIT :limit

-- name: payloads_pending
-- the kept payloads above the mark up to rowid `upto`, with their bodies
SELECT rowid, body FROM {payloads}
WHERE rowid > (SELECT indexed_to FROM {payloads_mark}) AND rowid <= :upto
ORDER BY rowid

-- name: payloads_index_words
-- VALUES, not INSERT ... SELECT: FTS5 then keeps the batch's terms in memory until the commit
INSERT INTO {payloads_fts} (rowid, text) VALUES (:id, :text)

-- name: payloads_index_mark
UPDATE {payloads_mark} SET indexed_to = :id WHERE indexed_to < :id

-- name: payloads_get
-- `indexed`: the body is packed (every row from journal version 14)
SELECT consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, kept_at, 1 AS indexed
FROM {payloads}
WHERE consumer = :consumer AND source = :source AND message_id = :message_id

-- name: payloads_search
-- `terms` is the search's words, each in double quotes: FTS5 finds the rows holding every one, newest (highest rowid:
-- the order they were kept in) first, as it reads its index: a word most payloads hold ("UNB") reads `limit` of
-- them, not all
SELECT p.consumer, p.source, p.message_id, p.size, p.kept_at
FROM {payloads_fts} AS f JOIN {payloads} AS p ON p.rowid = f.rowid
WHERE f.{payloads_fts} MATCH :terms AND p.consumer = :consumer
ORDER BY f.rowid DESC
LIMIT :limit

-- name: payloads_purgeable
-- the kept payloads of this consumer older than the retention whose journal row is gone (purged, or forgotten):
-- rowid, and whether the row is in the full-text index (its body is read then, one at a time)
SELECT p.rowid, p.rowid <= m.indexed_to
FROM {payloads} AS p, {payloads_mark} AS m
WHERE p.consumer = :consumer AND p.kept_at < :now - :older_than
    AND NOT EXISTS (
        SELECT 1 FROM {table} AS j
        WHERE j.consumer = p.consumer AND j.source = p.source AND j.message_id = p.message_id
    )
LIMIT :batch_size

-- name: payloads_lower_mark
-- after rows were deleted: the mark no higher than the highest rowid left, so that the next row kept (SQLite gives it
-- the highest rowid plus one) is above it
UPDATE {payloads_mark} SET indexed_to = (SELECT coalesce(max(rowid), 0) FROM {payloads})
WHERE indexed_to > (SELECT coalesce(max(rowid), 0) FROM {payloads})

-- name: payloads_fts_stored
-- migration 14 (`stores._async_base.index_kept_words`): whether the full-text index is version 13's, reading the
-- words from the rows' `text` (external content)
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = {payloads_fts_name} AND sql LIKE '%content_rowid%'

-- name: payloads_fts_drop
DROP TABLE {payloads_fts}

-- name: payloads_waiting_rows
-- migration 14: the rows version 13 left waiting, their bytes as received (packed then, one at a time)
SELECT rowid FROM {payloads} WHERE text IS NULL

-- name: payloads_pack
UPDATE {payloads} SET body = :body WHERE rowid = :id

-- name: payloads_forget_text
UPDATE {payloads} SET text = NULL WHERE text IS NOT NULL
