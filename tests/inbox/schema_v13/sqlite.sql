-- The kept payloads' table of journal version 13 (sqlite), frozen: the statements that made it, one per paragraph.
-- {payloads}, {payloads_name}, {payloads_fts}, {..._index}, {payloads_on_*}: names the test fills in.

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

CREATE UNIQUE INDEX IF NOT EXISTS {payloads_key_index} ON {payloads} (consumer, source, message_id)

CREATE INDEX IF NOT EXISTS {payloads_kept_index} ON {payloads} (consumer, kept_at)

CREATE INDEX IF NOT EXISTS {payloads_pending_index} ON {payloads} (consumer) WHERE text IS NULL

CREATE VIRTUAL TABLE IF NOT EXISTS {payloads_fts} USING fts5(text, content={payloads_name}, content_rowid=rowid)

CREATE TRIGGER IF NOT EXISTS {payloads_on_insert} AFTER INSERT ON {payloads} WHEN new.text IS NOT NULL BEGIN
    INSERT INTO {payloads_fts} (rowid, text) VALUES (new.rowid, new.text);
END

CREATE TRIGGER IF NOT EXISTS {payloads_on_delete} AFTER DELETE ON {payloads} WHEN old.text IS NOT NULL BEGIN
    INSERT INTO {payloads_fts} ({payloads_fts}, rowid, text) VALUES ('delete', old.rowid, old.text);
END

CREATE TRIGGER IF NOT EXISTS {payloads_on_update} AFTER UPDATE ON {payloads} WHEN old.text IS NOT NULL BEGIN
    INSERT INTO {payloads_fts} ({payloads_fts}, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO {payloads_fts} (rowid, text) SELECT new.rowid, new.text WHERE new.text IS NOT NULL;
END

