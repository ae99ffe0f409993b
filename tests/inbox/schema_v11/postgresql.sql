-- The kept payloads' table of journal version 11 (postgresql), frozen: the statements that made it, one per paragraph.
-- {payloads}, {payloads_name}, {payloads_fts}, {..._index}, {payloads_on_*}: names the test fills in.

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
    words TSVECTOR NOT NULL,
    kept_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, source, message_id)
)

-- the body is compressed already: TOAST keeps it out of line as it is, without trying to compress it again
ALTER TABLE {payloads} ALTER COLUMN body SET STORAGE EXTERNAL

CREATE INDEX IF NOT EXISTS {payloads_kept_index} ON {payloads} (consumer, kept_at)

CREATE INDEX IF NOT EXISTS {payloads_text_index} ON {payloads} USING gin (words)
