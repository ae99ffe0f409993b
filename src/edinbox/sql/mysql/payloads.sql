-- The message store beside the journal (`edinbox._payloads`): a processed message's payload, kept by a consumer
-- with `keep_payloads`, written in the transaction that settles it. `{payloads}` is `<journal>_payloads`, keyed as
-- the journal is (VARBINARY key parts, as the journal's); `body` is zlib-compressed (a prefix when `truncated`),
-- `sha256` and `size` are the whole payload's, `text` its search text, under a FULLTEXT index (InnoDB: words of
-- `innodb_ft_min_token_size`, 3 by default, or more are indexed).

-- name: payloads_create
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

-- name: payloads_keep
-- a message processed again after a `forget` replaces what was kept of it
INSERT INTO {payloads} (consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, text)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(fingerprint)s, %(sha256)s, %(size)s, %(content_type)s,
    %(truncated)s, %(body)s, %(text)s)
ON DUPLICATE KEY UPDATE fingerprint = VALUES(fingerprint), sha256 = VALUES(sha256), size = VALUES(size),
    content_type = VALUES(content_type), truncated = VALUES(truncated), body = VALUES(body), text = VALUES(text),
    kept_at = UTC_TIMESTAMP(6)

-- name: payloads_get
-- `indexed`: the body is packed (`text` is NOT NULL here: every row is written indexed)
SELECT consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, kept_at,
    text IS NOT NULL AS indexed
FROM {payloads}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: payloads_search_newest
-- The newest `walk` kept payloads of this consumer (the kept_at index, newest first) whose text holds every word
-- (`pattern`: a regular expression of whole words, `edinbox._payloads.words_pattern`), newest first. Asked before
-- `payloads_search`: a word nearly every payload holds ("UNB", a partner's own GLN) is found here in a few
-- milliseconds, where FULLTEXT would list every row holding it (a million) before sorting them by kept_at; when fewer
-- than `limit` are found here, `payloads_search` answers
SELECT consumer, source, message_id, size, kept_at
FROM (
    SELECT consumer, source, message_id, size, kept_at, text
    FROM {payloads}
    WHERE consumer = %(consumer)s
    ORDER BY kept_at DESC
    LIMIT %(walk)s
) AS newest
WHERE text REGEXP %(pattern)s
ORDER BY kept_at DESC
LIMIT %(limit)s

-- name: payloads_search
-- `required` is the search's words, each with a `+`: boolean mode finds the rows holding every one
SELECT consumer, source, message_id, size, kept_at
FROM {payloads}
WHERE MATCH (text) AGAINST (%(required)s IN BOOLEAN MODE) AND consumer = %(consumer)s
ORDER BY kept_at DESC
LIMIT %(limit)s

-- name: payloads_purge_batch
-- the kept payloads of this consumer older than the retention whose journal row is gone (purged, or forgotten)
DELETE FROM {payloads}
WHERE consumer = %(consumer)s AND kept_at < UTC_TIMESTAMP(6) - INTERVAL %(older_than)s MICROSECOND
    AND NOT EXISTS (
        SELECT 1 FROM {table} AS j
        WHERE j.consumer = {payloads}.consumer AND j.source = {payloads}.source
            AND j.message_id = {payloads}.message_id
    )
LIMIT %(batch_size)s
