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
    text TEXT NOT NULL,
    kept_at REAL NOT NULL
)

-- name: payloads_create_key
CREATE UNIQUE INDEX IF NOT EXISTS {payloads_key_index} ON {payloads} (consumer, source, message_id)

-- name: payloads_create_kept
CREATE INDEX IF NOT EXISTS {payloads_kept_index} ON {payloads} (consumer, kept_at)

-- name: payloads_create_fts
CREATE VIRTUAL TABLE IF NOT EXISTS {payloads_fts} USING fts5(text, content={payloads_name}, content_rowid=rowid)

-- name: payloads_create_on_insert
CREATE TRIGGER IF NOT EXISTS {payloads_on_insert} AFTER INSERT ON {payloads} BEGIN
    INSERT INTO {payloads_fts} (rowid, text) VALUES (new.rowid, new.text);
END

-- name: payloads_create_on_delete
CREATE TRIGGER IF NOT EXISTS {payloads_on_delete} AFTER DELETE ON {payloads} BEGIN
    INSERT INTO {payloads_fts} ({payloads_fts}, rowid, text) VALUES ('delete', old.rowid, old.text);
END

-- name: payloads_create_on_update
CREATE TRIGGER IF NOT EXISTS {payloads_on_update} AFTER UPDATE ON {payloads} BEGIN
    INSERT INTO {payloads_fts} ({payloads_fts}, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO {payloads_fts} (rowid, text) VALUES (new.rowid, new.text);
END

-- name: payloads_keep
-- a message processed again after a `forget` replaces what was kept of it
INSERT INTO {payloads} (consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, text,
    kept_at)
VALUES (:consumer, :source, :message_id, :fingerprint, :sha256, :size, :content_type, :truncated, :body, :text, :now)
ON CONFLICT (consumer, source, message_id) DO UPDATE SET fingerprint = excluded.fingerprint,
    sha256 = excluded.sha256, size = excluded.size, content_type = excluded.content_type,
    truncated = excluded.truncated, body = excluded.body, text = excluded.text, kept_at = excluded.kept_at

-- name: payloads_get
SELECT consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, kept_at
FROM {payloads}
WHERE consumer = :consumer AND source = :source AND message_id = :message_id

-- name: payloads_search
-- `terms` is the search's words, each in double quotes: FTS5 finds the rows holding every one. The full-text index
-- finds the rows first (`+` keeps
-- the planner from walking the consumer's kept_at index instead and matching row by row), then the newest are kept
SELECT p.consumer, p.source, p.message_id, p.size, p.kept_at
FROM {payloads} AS p
WHERE p.rowid IN (SELECT rowid FROM {payloads_fts} WHERE {payloads_fts} MATCH :terms) AND +p.consumer = :consumer
ORDER BY p.kept_at DESC
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
