-- The kept payloads' table of journal version 11 (mysql), frozen: the statements that made it, one per paragraph.
-- {payloads}, {payloads_name}, {payloads_fts}, {..._index}, {payloads_on_*}: names the test fills in.

CREATE TABLE IF NOT EXISTS {payloads} (
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    fingerprint LONGTEXT NOT NULL,
    sha256 CHAR(64) NOT NULL,
    size BIGINT NOT NULL,
    content_type VARCHAR(200) NOT NULL,
    truncated BOOLEAN NOT NULL,
    body LONGBLOB NOT NULL,
    text MEDIUMTEXT NOT NULL,
    kept_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (consumer, source, message_id),
    KEY {payloads_kept_index} (consumer, kept_at),
    FULLTEXT KEY {payloads_text_index} (text)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4
