-- The operator console: its audit table, the indexes its search needs, and its reads.
-- `edinbox init` runs the DDL (idempotent); the console itself runs no DDL.

-- name: console_create_audit
CREATE TABLE IF NOT EXISTS {edinbox_hub_console_audit} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    who TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    result TEXT NOT NULL
)

-- name: console_index_received
CREATE INDEX IF NOT EXISTS {received_index} ON {table} (consumer, received_at DESC)

-- name: console_index_status
CREATE INDEX IF NOT EXISTS {status_index} ON {table} (consumer, status, received_at DESC)

-- name: console_index_control
CREATE INDEX IF NOT EXISTS {control_index} ON {table} (consumer, message_id)

-- name: console_index_invoice_number
CREATE INDEX IF NOT EXISTS {invoice_number_index} ON {edinbox_hub_invoices} (number)

-- name: console_index_invoice_message
CREATE INDEX IF NOT EXISTS {invoice_message_index} ON {edinbox_hub_invoices} (consumer, source, message_id)

-- name: console_extensions
-- SQLite needs none
SELECT 1

-- name: console_index_partner
CREATE INDEX IF NOT EXISTS {partner_index} ON {table} (consumer, source)

-- name: console_partner_sources
-- the consumer's distinct sources holding a substring (the partner search), read by skipping through the unique key
-- (consumer, source, message_id): one index probe per source, however many rows each has
WITH RECURSIVE sources (source) AS (
    SELECT (SELECT source FROM {table} WHERE consumer = :consumer ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT n.source FROM {table} AS n WHERE n.consumer = :consumer AND n.source > s.source
        ORDER BY n.source LIMIT 1)
    FROM sources AS s WHERE s.source IS NOT NULL
)
SELECT source FROM sources WHERE source LIKE :partner ESCAPE '\'

-- name: console_search
SELECT j.source, j.message_id, j.status, j.attempts, j.received_at, j.conflicts, j.last_error
FROM {table} AS j
WHERE j.consumer = :consumer
    AND (:status IS NULL OR j.status = :status)
    AND (:control IS NULL OR j.message_id = :control)
    AND (:partners IS NULL OR j.source IN (SELECT value FROM json_each(:partners)))
    AND (:since IS NULL OR j.received_at >= :since)
    AND (:until IS NULL OR j.received_at < :until)
    AND (:ids IS NULL OR (j.message_id IN (SELECT value FROM json_each(:ids))
        AND j.source IN (SELECT value FROM json_each(:sources))))
ORDER BY j.received_at DESC, j.source, j.message_id
LIMIT :limit OFFSET :offset

-- name: console_invoice_keys
SELECT source, message_id FROM {edinbox_hub_invoices} WHERE consumer = :consumer AND number = :invoice LIMIT 1000

-- name: console_per_minute
SELECT CAST(received_at / 60 AS INTEGER) * 60 AS minute, status, count(*)
FROM {table}
WHERE consumer = :consumer AND received_at >= :since
GROUP BY 1, 2
ORDER BY 1

-- name: console_top_sources
SELECT source, count(*) FROM {table}
WHERE consumer = :consumer AND received_at >= :since
GROUP BY source
ORDER BY count(*) DESC
LIMIT 100

-- name: console_audit
INSERT INTO {edinbox_hub_console_audit} (at, who, action, target, result) VALUES (:now, :who, :action, :target, :result)

-- name: console_audit_rows
SELECT at, who, action, target, result FROM {edinbox_hub_console_audit} ORDER BY id DESC LIMIT :limit

-- name: console_story_deliveries
-- the message page's timeline: each delivery of the key the hub answered (processed, or a duplicate notice for a
-- re-send), and its rejection (delivery "rejection") when it was parked before it was journaled
SELECT answer, delivery, created_at FROM {edinbox_hub_answers}
WHERE consumer = :consumer AND source = :source AND message_id = :message_id
ORDER BY created_at

-- name: console_story_invoices
SELECT seller, number, kind, remote_id, created_at FROM {edinbox_hub_invoices}
WHERE consumer = :consumer AND source = :source AND message_id = :message_id
ORDER BY id

-- name: console_story_parked
-- parked copies of the interchange: the same payload fingerprint as the journal row's (or its conflicting copy's)
SELECT id, reason, deliveries, rejected_at FROM {edinbox_hub_rejected}
WHERE consumer = :consumer AND fingerprint IN (:fingerprint, :conflict_fingerprint)
ORDER BY id

-- name: console_story_ledger
-- its control number in the ledger, at the interchange's level, through the primary key; with any parked copy's id
SELECT l.level, l.number, l.arrivals, l.first_at, l.last_at, r.id
FROM {edinbox_hub_ledger} AS l
LEFT JOIN {edinbox_hub_rejected} AS r ON r.consumer = l.consumer AND r.fingerprint = l.parked
WHERE l.consumer = :consumer AND l.partner = :partner AND l.level IN ('ISA13', 'UNB0020')
    AND l.number = :number
