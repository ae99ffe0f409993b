-- The operator console: its audit table, the indexes its search needs, and its reads.
-- `edinbox init` runs the DDL (idempotent); the console itself runs no DDL.
-- Key columns are VARBINARY: reads convert them back to text. Times are DATETIME(6) in UTC, bound naive.

-- name: console_create_audit
CREATE TABLE IF NOT EXISTS {edinbox_hub_console_audit} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    who LONGTEXT NOT NULL,
    action LONGTEXT NOT NULL,
    target LONGTEXT NOT NULL,
    result LONGTEXT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: console_index_received
CREATE INDEX {received_index} ON {table} (consumer, received_at DESC)

-- name: console_index_status
CREATE INDEX {status_index} ON {table} (consumer, status, received_at DESC)

-- name: console_index_control
CREATE INDEX {control_index} ON {table} (consumer, message_id)

-- name: console_index_invoice_number
CREATE INDEX {invoice_number_index} ON {edinbox_hub_invoices} (number)

-- name: console_index_invoice_message
CREATE INDEX {invoice_message_index} ON {edinbox_hub_invoices} (consumer, source, message_id)

-- name: console_extensions
-- MariaDB needs none
SELECT 1

-- name: console_index_partner
CREATE INDEX {partner_index} ON {table} (consumer, source)

-- name: console_partner_sources
-- the consumer's distinct sources holding a substring (the partner search), case-insensitive (utf8mb4's default
-- collation), read by skipping through the unique key (consumer, source, message_id): one index probe per source
WITH RECURSIVE sources (source) AS (
    SELECT (SELECT source FROM {table} WHERE consumer = %(consumer)s ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT n.source FROM {table} AS n WHERE n.consumer = %(consumer)s AND n.source > s.source
        ORDER BY n.source LIMIT 1)
    FROM sources AS s WHERE s.source IS NOT NULL
)
SELECT CONVERT(source USING utf8mb4) FROM sources WHERE CONVERT(source USING utf8mb4) LIKE %(partner)s

-- name: console_search
-- one statement for every combination of filters: an absent filter is NULL; a partner is first resolved to its
-- sources (console_partner_sources), an invoice number to its messages' keys (console_invoice_keys), given as
-- JSON arrays
SELECT CONVERT(j.source USING utf8mb4), CONVERT(j.message_id USING utf8mb4), j.status, j.attempts, j.received_at,
    j.conflicts, j.last_error
FROM {table} AS j
WHERE j.consumer = %(consumer)s
    AND (%(status)s IS NULL OR j.status = %(status)s)
    AND (%(control)s IS NULL OR j.message_id = %(control)s)
    AND (%(partners)s IS NULL OR JSON_CONTAINS(%(partners)s, JSON_QUOTE(CONVERT(j.source USING utf8mb4))))
    AND (%(since)s IS NULL OR j.received_at >= %(since)s)
    AND (%(until)s IS NULL OR j.received_at < %(until)s)
    AND (%(ids)s IS NULL OR (
        JSON_CONTAINS(%(ids)s, JSON_QUOTE(CONVERT(j.message_id USING utf8mb4)))
        AND JSON_CONTAINS(%(sources)s, JSON_QUOTE(CONVERT(j.source USING utf8mb4)))))
ORDER BY j.received_at DESC, j.source, j.message_id
LIMIT %(limit)s OFFSET %(offset)s

-- name: console_invoice_keys
-- the messages that created invoices of one number: the search then looks them up by key
SELECT CONVERT(source USING utf8mb4), CONVERT(message_id USING utf8mb4) FROM {edinbox_hub_invoices}
WHERE consumer = %(consumer)s AND number = %(invoice)s
LIMIT 1000

-- name: console_per_minute
-- minutes since the epoch of the UTC column, whatever the session's time zone (UNIX_TIMESTAMP() would apply it)
SELECT TIMESTAMPDIFF(MINUTE, '1970-01-01', received_at) * 60 AS minute, status, count(*)
FROM {table}
WHERE consumer = %(consumer)s AND received_at >= %(since)s
GROUP BY 1, 2
ORDER BY 1

-- name: console_top_sources
SELECT CONVERT(source USING utf8mb4), count(*) FROM {table}
WHERE consumer = %(consumer)s AND received_at >= %(since)s
GROUP BY source
ORDER BY count(*) DESC
LIMIT 100

-- name: console_audit
INSERT INTO {edinbox_hub_console_audit} (who, action, target, result) VALUES (%(who)s, %(action)s, %(target)s, %(result)s)

-- name: console_audit_rows
SELECT at, who, action, target, result FROM {edinbox_hub_console_audit} ORDER BY id DESC LIMIT %(limit)s

-- name: console_story_deliveries
-- the message page's timeline: each delivery of the key the hub answered (processed, or a duplicate notice for a
-- re-send), and its rejection (delivery "rejection") when it was parked before it was journaled
SELECT answer, CONVERT(delivery USING utf8mb4), created_at FROM {edinbox_hub_answers}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
ORDER BY created_at

-- name: console_story_invoices
SELECT seller, number, kind, remote_id, created_at FROM {edinbox_hub_invoices}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
ORDER BY id

-- name: console_story_parked
-- parked copies of the interchange: the same payload fingerprint as the journal row's (or its conflicting copy's)
SELECT id, reason, deliveries, rejected_at FROM {edinbox_hub_rejected}
WHERE consumer = %(consumer)s AND fingerprint IN (%(fingerprint)s, %(conflict_fingerprint)s)
ORDER BY id

-- name: console_story_ledger
-- its control number in the ledger, at the interchange's level, through the primary key; with any parked copy's id
SELECT l.level, l.number, l.arrivals, l.first_at, l.last_at, r.id
FROM {edinbox_hub_ledger} AS l
LEFT JOIN {edinbox_hub_rejected} AS r ON r.consumer = l.consumer AND r.fingerprint = l.parked
WHERE l.consumer = %(consumer)s AND l.partner = %(partner)s AND l.level IN ('ISA13', 'UNB0020')
    AND l.number = %(number)s
