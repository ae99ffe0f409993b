-- The operator console: its audit table, the indexes its search needs, and its reads.
-- `edinbox init` runs the DDL (idempotent); the console itself runs no DDL.

-- name: console_create_audit
CREATE TABLE IF NOT EXISTS {edinbox_hub_console_audit} (
    id BIGSERIAL PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL DEFAULT now(),
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
-- none: the partner search matches the consumer's distinct sources (console_partner_sources)
SELECT 1

-- name: console_index_partner
-- none: a trigram index on the source cost each journal row more than the row itself (hub migration v8 drops it)
SELECT 1

-- name: console_partner_sources
-- the consumer's distinct sources holding a substring (the partner search, without case), read by skipping through
-- the unique key (consumer, source, message_id): one index probe per source, however many rows each has
WITH RECURSIVE sources (source) AS (
    SELECT min(source) FROM {table} WHERE consumer = %(consumer)s
    UNION ALL
    SELECT (SELECT min(n.source) FROM {table} AS n WHERE n.consumer = %(consumer)s AND n.source > s.source)
    FROM sources AS s WHERE s.source IS NOT NULL
)
SELECT source FROM sources WHERE source ILIKE %(partner)s::text

-- name: console_search
-- one statement for every combination of filters: an absent filter is NULL, which the planner folds away;
-- an invoice number is first resolved to its messages' keys (console_invoice_keys), a partner to its sources
-- (console_partner_sources), so each is looked up by its index with the planner's estimate of its rows
SELECT j.source, j.message_id, j.status, j.attempts, j.received_at, j.conflicts, j.last_error
FROM {table} AS j
WHERE j.consumer = %(consumer)s
    AND (%(status)s::text IS NULL OR j.status = %(status)s::text)
    AND (%(control)s::text IS NULL OR j.message_id = %(control)s::text)
    AND (%(partners)s::text[] IS NULL OR j.source = ANY (%(partners)s::text[]))
    AND (%(since)s::timestamptz IS NULL OR j.received_at >= %(since)s::timestamptz)
    AND (%(until)s::timestamptz IS NULL OR j.received_at < %(until)s::timestamptz)
    AND (%(ids)s::text[] IS NULL OR (j.message_id = ANY (%(ids)s::text[]) AND j.source = ANY (%(sources)s::text[])))
ORDER BY j.received_at DESC, j.source, j.message_id
LIMIT %(limit)s OFFSET %(offset)s

-- name: console_invoice_keys
-- the messages that created invoices of one number: the search then looks them up by key
SELECT source, message_id FROM {edinbox_hub_invoices} WHERE consumer = %(consumer)s AND number = %(invoice)s LIMIT 1000

-- name: console_per_minute
SELECT (floor(extract(epoch FROM received_at) / 60) * 60)::bigint AS minute, status, count(*)
FROM {table}
WHERE consumer = %(consumer)s AND received_at >= %(since)s
GROUP BY 1, 2
ORDER BY 1

-- name: console_top_sources
SELECT source, count(*) FROM {table}
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
SELECT answer, delivery, created_at FROM {edinbox_hub_answers}
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
