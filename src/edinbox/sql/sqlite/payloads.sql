-- The message store beside the journal (`edinbox._payloads`): a processed message's payload, kept by a consumer
-- with `keep_payloads`, written in the transaction that settles it. `{payloads}` is `<journal>_payloads`, keyed as
-- the journal is; `body` is zlib-compressed (a prefix when `truncated`), `sha256` and `size` are the whole
-- payload's, `text` its search text. `{payloads_fts}` indexes `text` (FTS5, external content: the text is stored
-- once, in `{payloads}`), kept current by three triggers.

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

-- name: payloads_create_pending
-- the rows kept but not indexed yet, for `payloads_pending`: an index as small as that backlog
CREATE INDEX IF NOT EXISTS {payloads_pending_index} ON {payloads} (consumer) WHERE text IS NULL

-- name: payloads_create_fts
CREATE VIRTUAL TABLE IF NOT EXISTS {payloads_fts} USING fts5(text, content={payloads_name}, content_rowid=rowid)

-- name: payloads_create_on_insert
CREATE TRIGGER IF NOT EXISTS {payloads_on_insert} AFTER INSERT ON {payloads} WHEN new.text IS NOT NULL BEGIN
    INSERT INTO {payloads_fts} (rowid, text) VALUES (new.rowid, new.text);
END

-- name: payloads_create_on_delete
CREATE TRIGGER IF NOT EXISTS {payloads_on_delete} AFTER DELETE ON {payloads} WHEN old.text IS NOT NULL BEGIN
    INSERT INTO {payloads_fts} ({payloads_fts}, rowid, text) VALUES ('delete', old.rowid, old.text);
END

-- name: payloads_create_on_update
-- a row whose text changes leaves the index (a message kept again after a `forget` is not indexed yet), and enters it
-- again with its new text if it has one. `payloads_index` indexes a row that had none itself: an FTS5 insert run by a
-- trigger costs a flush of the index's pending terms per row (a savepoint each), a plain INSERT one per transaction
CREATE TRIGGER IF NOT EXISTS {payloads_on_update} AFTER UPDATE ON {payloads} WHEN old.text IS NOT NULL BEGIN
    INSERT INTO {payloads_fts} ({payloads_fts}, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO {payloads_fts} (rowid, text) SELECT new.rowid, new.text WHERE new.text IS NOT NULL;
END

-- name: payloads_keep
-- a message processed again after a `forget` replaces what was kept of it
INSERT INTO {payloads} (consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, text,
    kept_at)
VALUES (:consumer, :source, :message_id, :fingerprint, :sha256, :size, :content_type, :truncated, :body, :text, :now)
ON CONFLICT (consumer, source, message_id) DO UPDATE SET fingerprint = excluded.fingerprint,
    sha256 = excluded.sha256, size = excluded.size, content_type = excluded.content_type,
    truncated = excluded.truncated, body = excluded.body, text = excluded.text, kept_at = excluded.kept_at

-- name: payloads_waiting
-- whether a kept payload of this consumer waits for its index (read without a write lock)
SELECT 1 FROM {payloads} WHERE consumer = :consumer AND text IS NULL LIMIT 1

-- name: payloads_pending
-- the kept payloads of this consumer not indexed yet, with their rowid (in the write transaction that indexes them)
SELECT source, message_id, body, rowid FROM {payloads} WHERE consumer = :consumer AND text IS NULL LIMIT :limit

-- name: payloads_index_words
-- a kept payload's search text into the full-text index, computed after its settling transaction (then
-- `payloads_index` records it in the row: the update trigger leaves a row that had no text to this statement).
-- VALUES, not INSERT ... SELECT: FTS5 then keeps the batch's terms in memory until the commit
INSERT INTO {payloads_fts} (rowid, text) VALUES (:id, :text)

-- name: payloads_index
-- the row's text, and its bytes compressed
UPDATE {payloads} SET text = :text, body = :body WHERE rowid = :id AND text IS NULL

-- name: payloads_get
-- `indexed`: the body is compressed (a row not indexed yet holds the bytes as received)
SELECT consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, kept_at,
    text IS NOT NULL AS indexed
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

-- name: payloads_purge_batch
-- the kept payloads of this consumer older than the retention whose journal row is gone (purged, or forgotten)
DELETE FROM {payloads}
WHERE rowid IN (
    SELECT p.rowid FROM {payloads} AS p
    WHERE p.consumer = :consumer AND p.kept_at < :now - :older_than
        AND NOT EXISTS (
            SELECT 1 FROM {table} AS j
            WHERE j.consumer = p.consumer AND j.source = p.source AND j.message_id = p.message_id
        )
    LIMIT :batch_size
)
