-- The hub's tables beside the journal (same schema): invoices, parked payloads, outcome counters.
-- Every `{name}` that is not the journal's is a table beside it; `edinbox init` alone runs the DDL.

-- name: hub_create_invoices
CREATE TABLE IF NOT EXISTS {invoices} (
    id BIGSERIAL PRIMARY KEY,
    seller TEXT NOT NULL,
    number TEXT NOT NULL,
    kind TEXT NOT NULL,
    issue_date DATE NOT NULL,
    buyer TEXT NOT NULL,
    currency TEXT,
    total NUMERIC(20, 4),
    tax_total NUMERIC(20, 4),
    lines INTEGER NOT NULL,
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT invoices_key UNIQUE (seller, number, kind, issue_date)
)

-- name: hub_create_rejected
CREATE TABLE IF NOT EXISTS {rejected} (
    id BIGSERIAL PRIMARY KEY,
    consumer TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    delivery TEXT NOT NULL,
    reason TEXT NOT NULL,
    payload BYTEA NOT NULL,
    deliveries INTEGER NOT NULL DEFAULT 1,
    rejected_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (consumer, fingerprint)
)

-- name: hub_create_counters
CREATE TABLE IF NOT EXISTS {hub_counters} (
    consumer TEXT NOT NULL,
    outcome TEXT NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (consumer, outcome)
)

-- name: hub_insert_invoice
INSERT INTO {invoices} (seller, number, kind, issue_date, buyer, currency, total, tax_total, lines,
    consumer, source, message_id)
VALUES (%(seller)s, %(number)s, %(kind)s, %(issue_date)s, %(buyer)s, %(currency)s, %(total)s, %(tax_total)s, %(lines)s,
    %(consumer)s, %(source)s, %(message_id)s)
ON CONFLICT (seller, number, kind, issue_date) DO NOTHING

-- name: hub_park
INSERT INTO {rejected} AS r (consumer, fingerprint, delivery, reason, payload)
VALUES (%(consumer)s, %(fingerprint)s, %(delivery)s, %(reason)s, %(payload)s)
ON CONFLICT (consumer, fingerprint) DO UPDATE SET deliveries = r.deliveries + 1

-- name: hub_count
INSERT INTO {hub_counters} AS c (consumer, outcome, n) VALUES (%(consumer)s, %(outcome)s, %(n)s)
ON CONFLICT (consumer, outcome) DO UPDATE SET n = c.n + excluded.n

-- name: hub_counts
SELECT outcome, n FROM {hub_counters} WHERE consumer = %(consumer)s

-- name: hub_totals
SELECT (SELECT count(*) FROM {invoices}),
    (SELECT count(*) FROM {rejected} WHERE consumer = %(consumer)s),
    (SELECT min(received_at) FROM {table} WHERE consumer = %(consumer)s),
    (SELECT count(*) FROM {table})

-- name: hub_table_bytes
SELECT pg_total_relation_size({table_name}::regclass)

-- name: hub_rejected_rows
SELECT id, delivery, reason, deliveries, rejected_at FROM {rejected}
WHERE consumer = %(consumer)s
ORDER BY id DESC
LIMIT %(limit)s

-- name: hub_rejected_row
SELECT id, delivery, reason, deliveries, rejected_at, payload FROM {rejected}
WHERE consumer = %(consumer)s AND id = %(id)s

-- name: hub_invoices_of
SELECT seller, number, kind, issue_date, total, currency FROM {invoices}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
ORDER BY id

-- name: hub_purgeable
SELECT count(*) FROM {table}
WHERE consumer = %(consumer)s AND status = 'processed' AND settled_at < now() - %(older_than)s

-- name: hub_privileges
-- what `edinbox run` needs and `edinbox init --grant` gives: DML on the tables, USAGE on their sequences
SELECT t.name FROM (VALUES ({table_name}), ({invoices_name}), ({rejected_name}), ({hub_counters_name})) AS t (name)
WHERE NOT (has_table_privilege(t.name, 'SELECT') AND has_table_privilege(t.name, 'INSERT')
    AND has_table_privilege(t.name, 'UPDATE') AND has_table_privilege(t.name, 'DELETE'))
UNION ALL
SELECT s.name FROM (VALUES (pg_get_serial_sequence({invoices_name}, 'id')),
    (pg_get_serial_sequence({rejected_name}, 'id'))) AS s (name)
WHERE s.name IS NOT NULL AND NOT has_sequence_privilege(s.name, 'USAGE')

-- name: hub_invoice_keys
-- `edinbox chaos`: every invoice's key, to find the ones that were lost
SELECT seller, number, kind, issue_date FROM {invoices}

-- name: hub_processed_keys
-- `edinbox chaos`: the interchanges the journal settled as processed, with their rows (more than one: no unique key)
SELECT source, message_id, count(*) FROM {table}
WHERE consumer = %(consumer)s AND status = 'processed'
GROUP BY source, message_id

-- name: hub_forget_rejected
DELETE FROM {rejected} WHERE consumer = %(consumer)s AND id = %(id)s

-- name: hub_purge_rejected
DELETE FROM {rejected} WHERE consumer = %(consumer)s AND rejected_at < now() - %(older_than)s

-- name: hub_drop_schema
-- `edinbox demo` only: drop the schema it created for itself, with everything in it
DROP SCHEMA IF EXISTS {schema} CASCADE
