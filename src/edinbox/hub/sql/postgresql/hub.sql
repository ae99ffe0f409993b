-- The hub's tables beside the journal (same schema), each named `edinbox_hub_*` (no name an application's own
-- tables take): invoices, parked payloads, outcome counters. Every `{name}` that is not the journal's is a table
-- beside it; `create_schema()` (`edinbox init`) runs the DDL (`_parts.HUB.create`), `migrate()` the hub's
-- `migrations.sql`.

-- name: hub_create_invoices
CREATE TABLE IF NOT EXISTS {edinbox_hub_invoices} (
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
    -- the id a remote sink (the HTTP accounting API) gave the invoice; NULL: the table's own; last, as step 6 adds it
    remote_id TEXT,
    CONSTRAINT invoices_key UNIQUE (seller, number, kind, issue_date)
)

-- name: hub_create_rejected
CREATE TABLE IF NOT EXISTS {edinbox_hub_rejected} (
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
-- a batch adds to the rows of one shard (picked per batch), so concurrent hubs rarely wait on each other's row
-- locks; a count is the sum over the shards
CREATE TABLE IF NOT EXISTS {edinbox_hub_counters} (
    consumer TEXT NOT NULL,
    outcome TEXT NOT NULL,
    n BIGINT NOT NULL,
    shard SMALLINT NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, outcome, shard)
)

-- name: hub_insert_invoice
-- one row per parameter set: the sink runs it with run_many, once per batch, and reads the rows it inserted
INSERT INTO {edinbox_hub_invoices} (seller, number, kind, issue_date, buyer, currency, total, tax_total, lines,
    consumer, source, message_id)
VALUES (%(seller)s, %(number)s, %(kind)s, %(issue_date)s, %(buyer)s, %(currency)s, %(total)s, %(tax_total)s, %(lines)s,
    %(consumer)s, %(source)s, %(message_id)s)
ON CONFLICT (seller, number, kind, issue_date) DO NOTHING

-- name: hub_insert_invoices
-- a batch's rows of `hub_insert_invoice` as one array per column (`_accounting._ARRAYS`), sent in binary, in one
-- statement that inserts them in the arrays' order and returns whose rows it inserted (an invoice already stored,
-- or met earlier in the arrays, is not)
INSERT INTO {edinbox_hub_invoices} (seller, number, kind, issue_date, buyer, currency, total, tax_total, lines,
    consumer, source, message_id)
SELECT u.seller, u.number, u.kind, u.issue_date, u.buyer, u.currency, u.total, u.tax_total, u.lines,
    %(consumer)s, u.source, u.message_id
FROM unnest(%(sellers)b::text[], %(numbers)b::text[], %(kinds)b::text[], %(issue_dates)b::date[],
    %(buyers)b::text[], %(currencies)b::text[], %(totals)b::numeric[], %(tax_totals)b::numeric[],
    %(lines)b::integer[], %(sources)b::text[], %(message_ids)b::text[])
    AS u (seller, number, kind, issue_date, buyer, currency, total, tax_total, lines, source, message_id)
ON CONFLICT (seller, number, kind, issue_date) DO NOTHING
RETURNING source, message_id

-- name: hub_park
-- a batch's parked payloads as one array per column (`edinbox.stores.run_rows`), sent in binary, each content once
-- with the number of the batch's deliveries that carried it, in the batch's order; a payload parked before counts them
INSERT INTO {edinbox_hub_rejected} AS r (consumer, fingerprint, delivery, reason, payload, deliveries)
SELECT %(consumer)s, u.f, u.d, u.r, u.p, u.n
FROM unnest(%(fingerprint)b::text[], %(delivery)b::text[], %(reason)b::text[], %(payload)b::bytea[],
    %(deliveries)b::integer[]) WITH ORDINALITY AS u (f, d, r, p, n, i)
ORDER BY u.i
ON CONFLICT (consumer, fingerprint) DO UPDATE SET deliveries = r.deliveries + excluded.deliveries

-- name: hub_park_reason
-- the reason of a payload parked by this delivery, rewritten once its source said where it kept the whole payload
UPDATE {edinbox_hub_rejected} SET reason = %(reason)s
WHERE consumer = %(consumer)s AND fingerprint = %(fingerprint)s AND delivery = %(delivery)s

-- name: hub_count
-- a batch's counts as one array of outcomes and one of counts (`edinbox.stores.run_rows`), in one statement
INSERT INTO {edinbox_hub_counters} AS c (consumer, outcome, shard, n)
SELECT %(consumer)s, t.outcome, %(shard)s, t.n FROM unnest(%(outcome)s::text[], %(n)s::bigint[]) AS t(outcome, n)
ON CONFLICT (consumer, outcome, shard) DO UPDATE SET n = c.n + excluded.n

-- name: hub_counts
SELECT outcome, sum(n) FROM {edinbox_hub_counters} WHERE consumer = %(consumer)s GROUP BY outcome

-- name: hub_totals
SELECT (SELECT count(*) FROM {edinbox_hub_invoices}),
    (SELECT count(*) FROM {edinbox_hub_rejected} WHERE consumer = %(consumer)s)

-- name: hub_rejected_rows
SELECT id, delivery, reason, deliveries, rejected_at FROM {edinbox_hub_rejected}
WHERE consumer = %(consumer)s
ORDER BY id DESC
LIMIT %(limit)s

-- name: hub_rejected_row
SELECT id, delivery, reason, deliveries, rejected_at, payload FROM {edinbox_hub_rejected}
WHERE consumer = %(consumer)s AND id = %(id)s

-- name: hub_insert_remote_invoice
-- an invoice a remote sink created (or already held), with the id it gave it: the local view `stats`, `show` and the
-- console read; written in the transaction that completes the message (lease mode)
INSERT INTO {edinbox_hub_invoices} (seller, number, kind, issue_date, buyer, currency, total, tax_total, lines,
    consumer, source, message_id, remote_id)
VALUES (%(seller)s, %(number)s, %(kind)s, %(issue_date)s, %(buyer)s, %(currency)s, %(total)s, %(tax_total)s, %(lines)s,
    %(consumer)s, %(source)s, %(message_id)s, %(remote_id)s)
ON CONFLICT (seller, number, kind, issue_date) DO NOTHING

-- name: hub_invoices_of
SELECT seller, number, kind, issue_date, total, currency, remote_id FROM {edinbox_hub_invoices}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
ORDER BY id

-- name: hub_privileges
-- what `edinbox run` needs and `edinbox init --grant` gives: DML on the tables, USAGE on their sequences
SELECT t.name FROM (VALUES ({table_name}), ({edinbox_hub_invoices_name}), ({edinbox_hub_rejected_name}), ({edinbox_hub_counters_name}),
    ({outbox_name}), ({edinbox_hub_control_numbers_name}), ({edinbox_hub_acknowledgments_name}),
    ({edinbox_hub_answers_name}), ({edinbox_hub_as2_receipts_name}), ({edinbox_hub_ledger_name}),
    ({edinbox_hub_findings_name})) AS t (name)
WHERE NOT (has_table_privilege(t.name, 'SELECT') AND has_table_privilege(t.name, 'INSERT')
    AND has_table_privilege(t.name, 'UPDATE') AND has_table_privilege(t.name, 'DELETE'))
UNION ALL
SELECT s.name FROM (VALUES (pg_get_serial_sequence({edinbox_hub_invoices_name}, 'id')),
    (pg_get_serial_sequence({edinbox_hub_rejected_name}, 'id')), (pg_get_serial_sequence({outbox_name}, 'id')),
    (pg_get_serial_sequence({edinbox_hub_acknowledgments_name}, 'id'))) AS s (name)
WHERE s.name IS NOT NULL AND NOT has_sequence_privilege(s.name, 'USAGE')

-- name: hub_create_control_numbers
-- the next interchange control number of our acknowledgments, per partner: the upsert's row lock serialises hubs
CREATE TABLE IF NOT EXISTS {edinbox_hub_control_numbers} (
    partner TEXT PRIMARY KEY,
    n BIGINT NOT NULL
)

-- name: hub_create_acknowledgments
CREATE TABLE IF NOT EXISTS {edinbox_hub_acknowledgments} (
    id BIGSERIAL PRIMARY KEY,
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    duplicate BOOLEAN NOT NULL,
    partner TEXT NOT NULL,
    control_number TEXT NOT NULL,
    outbox_key TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (partner, control_number),
    UNIQUE (consumer, source, message_id, partner, control_number)
)

-- name: hub_reserve_control_numbers
-- each partner's last of `counts` numbers reserved (the others are the `count - 1` before it), every partner of the
-- arrays in one statement; the rows are inserted and locked in the partners' order, so hubs never deadlock on them
INSERT INTO {edinbox_hub_control_numbers} AS c (partner, n)
SELECT u.partner, u.k FROM unnest(%(partner)s::text[], %(k)s::bigint[]) AS u (partner, k)
ORDER BY u.partner
ON CONFLICT (partner) DO UPDATE SET n = c.n + excluded.n
RETURNING partner, n

-- name: hub_record_acknowledgment
INSERT INTO {edinbox_hub_acknowledgments} (consumer, source, message_id, kind, duplicate, partner, control_number, outbox_key)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(kind)s, %(duplicate)s, %(partner)s, %(control_number)s,
    %(outbox_key)s)

-- name: hub_acknowledgments_of
SELECT a.kind, a.duplicate, a.control_number, a.outbox_key, a.created_at, o.destination, o.sent_at, o.parked_at,
    o.reason
FROM {edinbox_hub_acknowledgments} AS a
LEFT JOIN {outbox} AS o ON o.key = a.outbox_key
WHERE a.consumer = %(consumer)s AND a.source = %(source)s AND a.message_id = %(message_id)s
ORDER BY a.id

-- name: hub_acknowledgment_totals
SELECT kind, duplicate, count(*), count(DISTINCT outbox_key) FROM {edinbox_hub_acknowledgments}
WHERE consumer = %(consumer)s
GROUP BY kind, duplicate
-- name: hub_invoice_keys
-- `edinbox chaos`: every invoice's key, to find the ones that were lost
SELECT seller, number, kind, issue_date FROM {edinbox_hub_invoices}

-- name: hub_processed_keys
-- `edinbox chaos`: the interchanges the journal settled as processed, with their rows (more than one: no unique key)
SELECT source, message_id, count(*) FROM {table}
WHERE consumer = %(consumer)s AND status = 'processed'
GROUP BY source, message_id

-- name: hub_rejected_fingerprints
-- `edinbox chaos`: the fingerprint of every parked payload, to find the bad deliveries parked (once)
SELECT fingerprint FROM {edinbox_hub_rejected}
WHERE consumer = %(consumer)s

-- name: hub_forget_rejected
DELETE FROM {edinbox_hub_rejected} WHERE consumer = %(consumer)s AND id = %(id)s

-- name: hub_purge_rejected
DELETE FROM {edinbox_hub_rejected} WHERE consumer = %(consumer)s AND rejected_at < now() - %(older_than)s

-- name: hub_drop_schema
-- `edinbox demo` only: drop the schema it created for itself, with everything in it
DROP SCHEMA IF EXISTS {schema} CASCADE

-- name: hub_create_answers
-- what the hub answered once: a rejection per interchange key (delivery "rejection"), and the deliveries (a digest of
-- the broker's id for them) that were processed or got a duplicate notice: a broker's redelivery of one of them is
-- never taken for the partner's re-send
CREATE TABLE IF NOT EXISTS {edinbox_hub_answers} (
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    delivery TEXT NOT NULL,
    answer TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, source, message_id, delivery)
)

-- name: hub_answer_once
-- one row per key and delivery: 1 row changed when this transaction is the first to answer it, 0 when one was
INSERT INTO {edinbox_hub_answers} (consumer, source, message_id, delivery, answer)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(delivery)s, %(answer)s)
ON CONFLICT (consumer, source, message_id, delivery) DO NOTHING

-- name: hub_answers_of
SELECT answer, created_at FROM {edinbox_hub_answers}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s AND delivery = 'rejection'

-- name: hub_rejection_totals
SELECT count(*) FROM {edinbox_hub_answers} WHERE consumer = %(consumer)s AND delivery = 'rejection'

-- name: hub_purge_answers
-- past the horizon no broker redelivers a delivery, so its row is no longer needed; a rejection's row goes too
DELETE FROM {edinbox_hub_answers} WHERE consumer = %(consumer)s AND created_at < now() - %(older_than)s

-- name: hub_create_as2_receipts
-- the receipt (MDN) answered for each AS2 message received, stored after its commit and before its answer: a resend
-- of the message (the same AS2-From, AS2-To and Message-ID) is answered with these bytes
CREATE TABLE IF NOT EXISTS {edinbox_hub_as2_receipts} (
    consumer TEXT NOT NULL,
    sender TEXT NOT NULL,
    receiver TEXT NOT NULL,
    message_id TEXT NOT NULL,
    receipt BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, sender, receiver, message_id)
)

-- name: hub_as2_receipt_put
-- the first receipt stored for a message wins
INSERT INTO {edinbox_hub_as2_receipts} (consumer, sender, receiver, message_id, receipt)
VALUES (%(consumer)s, %(sender)s, %(receiver)s, %(message_id)s, %(receipt)s)
ON CONFLICT (consumer, sender, receiver, message_id) DO NOTHING

-- name: hub_as2_receipt_get
SELECT receipt FROM {edinbox_hub_as2_receipts}
WHERE consumer = %(consumer)s AND sender = %(sender)s AND receiver = %(receiver)s AND message_id = %(message_id)s

-- name: hub_purge_as2_receipts
-- past the retention a resend is new to the journal too: its receipt goes with the journal's rows
DELETE FROM {edinbox_hub_as2_receipts} WHERE consumer = %(consumer)s AND created_at < now() - %(older_than)s

-- name: hub_create_ledger
-- the inbound control-number ledger (`_ledger`): one row per number a partner sent at a level (ISA13, GS06, ST02,
-- UNB0020, UNG0048, UNH0062), leading zeros dropped; width orders numbers (then the text), 0 for one that is not a
-- number; arrivals counts the copies accepted (0: only parked, `parked` the fingerprint of the payload that carried
-- it); seq is when it first came (the hub's clock in nanoseconds, then its place in the batch)
CREATE TABLE IF NOT EXISTS {edinbox_hub_ledger} (
    consumer TEXT NOT NULL,
    partner TEXT NOT NULL,
    level TEXT NOT NULL,
    number TEXT NOT NULL,
    width INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    arrivals INTEGER NOT NULL,
    first_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    previous_at TIMESTAMPTZ,
    last_at TIMESTAMPTZ,
    parked TEXT,
    -- when a hub last wrote the row (its clock, nanoseconds): the gauges read the rows changed since their last
    -- reading; last, as step 7 adds it
    changed BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, partner, level, number)
)

-- name: hub_ledger_record
-- a batch's numbers as one array per column, each (partner, level, number) once: `n` its copies accepted (more
-- than one: the batch's own copies, so its previous arrival is now; 0: only a parked interchange carried it, whose
-- payload's fingerprint is `parked`, and its arrival times stay); rows locked in key order, so hubs never deadlock on
-- them; a number seen before keeps its seq and first_at
INSERT INTO {edinbox_hub_ledger} AS l (consumer, partner, level, number, width, seq, arrivals, previous_at, last_at,
    parked, changed)
SELECT %(consumer)s, u.partner, u.level, u.number, u.width, u.seq, u.n, CASE WHEN u.n > 1 THEN now() END,
    CASE WHEN u.n > 0 THEN now() END, u.parked, %(changed)s
FROM unnest(%(partner)b::text[], %(level)b::text[], %(number)b::text[], %(width)b::integer[],
    %(seq)b::bigint[], %(n)b::integer[], %(parked)b::text[]) AS u (partner, level, number, width, seq, n, parked)
ORDER BY u.partner, u.level, u.number
ON CONFLICT (consumer, partner, level, number) DO UPDATE SET arrivals = l.arrivals + excluded.arrivals,
    previous_at = CASE WHEN excluded.last_at IS NULL THEN l.previous_at
        ELSE coalesce(excluded.previous_at, l.last_at) END,
    last_at = coalesce(excluded.last_at, l.last_at), parked = coalesce(excluded.parked, l.parked),
    changed = excluded.changed

-- name: hub_ledger_rows
-- every number of the consumer (of one partner when :partner is not null) a hub wrote at or after :since (its clock,
-- nanoseconds; 0: all), with the parked payload's id
SELECT l.partner, l.level, l.number, l.width, l.seq, l.arrivals, l.first_at, l.previous_at, l.last_at, r.id, l.changed
FROM {edinbox_hub_ledger} AS l
LEFT JOIN {edinbox_hub_rejected} AS r ON r.consumer = l.consumer AND r.fingerprint = l.parked
WHERE l.consumer = %(consumer)s AND (%(partner)s::text IS NULL OR l.partner = %(partner)s)
    AND l.changed >= %(since)s
ORDER BY l.partner, l.level, l.seq

-- name: hub_purge_ledger
-- a number last seen before the retention: its gaps and duplicates are history
DELETE FROM {edinbox_hub_ledger}
WHERE consumer = %(consumer)s AND coalesce(last_at, first_at) < now() - %(older_than)s

-- name: hub_replication
-- `edinbox doctor`: whether this server is a standby, what its commits wait for, and the sync state of each
-- standby streaming from it (NULL for a role without pg_read_all_stats: it sees the rows, not their details)
SELECT pg_is_in_recovery(), current_setting('synchronous_standby_names'), current_setting('synchronous_commit'),
    ARRAY(SELECT sync_state FROM pg_stat_replication)

-- name: hub_acknowledgment_bytes_of
-- `edinbox export`: the bytes of each acknowledgment sent for one message, while the outbox keeps them
SELECT a.outbox_key, o.payload
FROM {edinbox_hub_acknowledgments} AS a
JOIN {outbox} AS o ON o.key = a.outbox_key
WHERE a.consumer = %(consumer)s AND a.source = %(source)s AND a.message_id = %(message_id)s
ORDER BY a.id

-- name: hub_create_findings
-- what validating an interchange against its implementation guide found (`_findings`), written in the transaction
-- that settles it: `errors` how many (those past the ones kept included), `findings` a JSON list of the first ones
-- (the message, and the segment position, tag, loop, element, component, data element, code and value cut short)
CREATE TABLE IF NOT EXISTS {edinbox_hub_findings} (
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    errors INTEGER NOT NULL,
    findings TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, source, message_id)
)

-- name: hub_index_ledger_changed
-- the ledger's rows by when a hub last wrote them: the gauges read only the rows changed since their last reading
CREATE INDEX IF NOT EXISTS {ledger_changed_index} ON {edinbox_hub_ledger} (consumer, changed)

-- name: hub_record_findings
-- the first validation of an interchange key is kept (a duplicate or a conflicting copy does not replace it)
INSERT INTO {edinbox_hub_findings} (consumer, source, message_id, errors, findings)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(errors)s, %(findings)s)
ON CONFLICT (consumer, source, message_id) DO NOTHING

-- name: hub_findings_of
SELECT errors, findings, created_at FROM {edinbox_hub_findings}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: hub_purge_findings
-- findings kept as long as the parked payloads and the answers
DELETE FROM {edinbox_hub_findings} WHERE consumer = %(consumer)s AND created_at < now() - %(older_than)s
