-- The hub's tables beside the journal, each named `edinbox_hub_*` (no name an application's own tables take):
-- invoices, parked payloads, outcome counters. Money is TEXT (exact). `create_schema()` (`edinbox init`) runs the
-- DDL (`_parts.HUB.create`), `migrate()` the hub's `migrations.sql`.

-- name: hub_create_invoices
CREATE TABLE IF NOT EXISTS {edinbox_hub_invoices} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    seller TEXT NOT NULL,
    number TEXT NOT NULL,
    kind TEXT NOT NULL,
    issue_date TEXT NOT NULL,
    buyer TEXT NOT NULL,
    currency TEXT,
    total TEXT,
    tax_total TEXT,
    lines INTEGER NOT NULL,
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    -- the id a remote sink (the HTTP accounting API) gave the invoice; NULL: the table's own; last, as step 6 adds it
    remote_id TEXT,
    CONSTRAINT invoices_key UNIQUE (seller, number, kind, issue_date)
)

-- name: hub_create_rejected
CREATE TABLE IF NOT EXISTS {edinbox_hub_rejected} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    consumer TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    delivery TEXT NOT NULL,
    reason TEXT NOT NULL,
    payload BLOB NOT NULL,
    deliveries INTEGER NOT NULL DEFAULT 1,
    rejected_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (consumer, fingerprint)
)

-- name: hub_create_counters
-- a batch adds to the rows of one shard (picked per batch); a count is the sum over the shards
CREATE TABLE IF NOT EXISTS {edinbox_hub_counters} (
    consumer TEXT NOT NULL,
    outcome TEXT NOT NULL,
    n INTEGER NOT NULL,
    shard INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, outcome, shard)
)

-- name: hub_insert_invoice
-- one row per parameter set: the sink runs it with run_many, once per batch, and reads the rows it inserted
INSERT INTO {edinbox_hub_invoices} (seller, number, kind, issue_date, buyer, currency, total, tax_total, lines,
    consumer, source, message_id)
VALUES (:seller, :number, :kind, :issue_date, :buyer, :currency, :total, :tax_total, :lines,
    :consumer, :source, :message_id)
ON CONFLICT (seller, number, kind, issue_date) DO NOTHING

-- name: hub_invoices_savepoint
SAVEPOINT hub_invoices

-- name: hub_invoices_rollback
ROLLBACK TO SAVEPOINT hub_invoices

-- name: hub_existing_invoices
-- which invoice keys of :invoices (JSON rows: seller, number, kind, issue_date) the table already holds; the keys
-- drive the join
SELECT i.seller, i.number, i.kind, i.issue_date
FROM json_each(:invoices) AS j
CROSS JOIN {edinbox_hub_invoices} AS i
WHERE i.seller = j.value ->> 0 AND i.number = j.value ->> 1 AND i.kind = j.value ->> 2
    AND i.issue_date = j.value ->> 3

-- name: hub_park
-- a content once per batch, with the number of the batch's deliveries that carried it
INSERT INTO {edinbox_hub_rejected} AS r (consumer, fingerprint, delivery, reason, payload, deliveries)
VALUES (:consumer, :fingerprint, :delivery, :reason, :payload, :deliveries)
ON CONFLICT (consumer, fingerprint) DO UPDATE SET deliveries = r.deliveries + excluded.deliveries

-- name: hub_park_reason
-- the reason of a payload parked by this delivery, rewritten once its source said where it kept the whole payload
UPDATE {edinbox_hub_rejected} SET reason = :reason
WHERE consumer = :consumer AND fingerprint = :fingerprint AND delivery = :delivery

-- name: hub_count
INSERT INTO {edinbox_hub_counters} AS c (consumer, outcome, shard, n) VALUES (:consumer, :outcome, :shard, :n)
ON CONFLICT (consumer, outcome, shard) DO UPDATE SET n = c.n + excluded.n

-- name: hub_counts
SELECT outcome, sum(n) FROM {edinbox_hub_counters} WHERE consumer = :consumer GROUP BY outcome

-- name: hub_totals
SELECT (SELECT count(*) FROM {edinbox_hub_invoices}),
    (SELECT count(*) FROM {edinbox_hub_rejected} WHERE consumer = :consumer)

-- name: hub_rejected_rows
SELECT id, delivery, reason, deliveries, rejected_at FROM {edinbox_hub_rejected}
WHERE consumer = :consumer
ORDER BY id DESC
LIMIT :limit

-- name: hub_rejected_row
SELECT id, delivery, reason, deliveries, rejected_at, payload FROM {edinbox_hub_rejected}
WHERE consumer = :consumer AND id = :id

-- name: hub_insert_remote_invoice
-- an invoice a remote sink created (or already held), with the id it gave it: the local view `stats`, `show` and the
-- console read; written in the transaction that completes the message (lease mode)
INSERT INTO {edinbox_hub_invoices} (seller, number, kind, issue_date, buyer, currency, total, tax_total, lines,
    consumer, source, message_id, remote_id)
VALUES (:seller, :number, :kind, :issue_date, :buyer, :currency, :total, :tax_total, :lines,
    :consumer, :source, :message_id, :remote_id)
ON CONFLICT (seller, number, kind, issue_date) DO NOTHING

-- name: hub_invoices_of
SELECT seller, number, kind, issue_date, total, currency, remote_id FROM {edinbox_hub_invoices}
WHERE consumer = :consumer AND source = :source AND message_id = :message_id
ORDER BY id

-- name: hub_privileges
-- SQLite has no roles: whoever opens the file may do everything
SELECT NULL WHERE 0

-- name: hub_create_control_numbers
-- the next interchange control number of our acknowledgments, per partner (one writer at a time on SQLite)
CREATE TABLE IF NOT EXISTS {edinbox_hub_control_numbers} (
    partner TEXT PRIMARY KEY,
    n INTEGER NOT NULL
)

-- name: hub_create_acknowledgments
CREATE TABLE IF NOT EXISTS {edinbox_hub_acknowledgments} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    duplicate INTEGER NOT NULL,
    partner TEXT NOT NULL,
    control_number TEXT NOT NULL,
    outbox_key TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (partner, control_number),
    UNIQUE (consumer, source, message_id, partner, control_number)
)

-- name: hub_reserve_control_numbers
-- each partner's last of its count of numbers reserved (the others are the `count - 1` before it), every
-- [partner, count] pair of :rows (JSON) in one statement
INSERT INTO {edinbox_hub_control_numbers} AS c (partner, n)
SELECT j.value ->> 0, j.value ->> 1 FROM json_each(:rows) AS j
WHERE true
ON CONFLICT (partner) DO UPDATE SET n = c.n + excluded.n
RETURNING partner, n

-- name: hub_record_acknowledgment
INSERT INTO {edinbox_hub_acknowledgments} (consumer, source, message_id, kind, duplicate, partner, control_number, outbox_key)
VALUES (:consumer, :source, :message_id, :kind, :duplicate, :partner, :control_number, :outbox_key)

-- name: hub_acknowledgments_of
SELECT a.kind, a.duplicate, a.control_number, a.outbox_key, a.created_at, o.destination, o.sent_at, o.parked_at,
    o.reason
FROM {edinbox_hub_acknowledgments} AS a
LEFT JOIN {outbox} AS o ON o.key = a.outbox_key
WHERE a.consumer = :consumer AND a.source = :source AND a.message_id = :message_id
ORDER BY a.id

-- name: hub_acknowledgment_totals
SELECT kind, duplicate, count(*), count(DISTINCT outbox_key) FROM {edinbox_hub_acknowledgments}
WHERE consumer = :consumer
GROUP BY kind, duplicate
-- name: hub_invoice_keys
-- `edinbox chaos`: every invoice's key, to find the ones that were lost
SELECT seller, number, kind, issue_date FROM {edinbox_hub_invoices}

-- name: hub_processed_keys
-- `edinbox chaos`: the interchanges the journal settled as processed, with their rows (more than one: no unique key)
SELECT source, message_id, count(*) FROM {table}
WHERE consumer = :consumer AND status = 'processed'
GROUP BY source, message_id

-- name: hub_rejected_fingerprints
-- `edinbox chaos`: the fingerprint of every parked payload, to find the bad deliveries parked (once)
SELECT fingerprint FROM {edinbox_hub_rejected}
WHERE consumer = :consumer

-- name: hub_forget_rejected
DELETE FROM {edinbox_hub_rejected} WHERE consumer = :consumer AND id = :id

-- name: hub_purge_rejected
-- rejected_at is ISO-8601 text in UTC: compared as text with the cut-off written the same way
DELETE FROM {edinbox_hub_rejected}
WHERE consumer = :consumer AND rejected_at < strftime('%Y-%m-%dT%H:%M:%fZ', :now - :older_than, 'unixepoch')

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
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (consumer, source, message_id, delivery)
)

-- name: hub_answer_once
-- one row per key and delivery: 1 row changed when this transaction is the first to answer it, 0 when one was
INSERT INTO {edinbox_hub_answers} (consumer, source, message_id, delivery, answer)
VALUES (:consumer, :source, :message_id, :delivery, :answer)
ON CONFLICT (consumer, source, message_id, delivery) DO NOTHING

-- name: hub_answers_of
SELECT answer, created_at FROM {edinbox_hub_answers}
WHERE consumer = :consumer AND source = :source AND message_id = :message_id AND delivery = 'rejection'

-- name: hub_rejection_totals
SELECT count(*) FROM {edinbox_hub_answers} WHERE consumer = :consumer AND delivery = 'rejection'

-- name: hub_purge_answers
-- past the horizon no broker redelivers a delivery, so its row is no longer needed; a rejection's row goes too
DELETE FROM {edinbox_hub_answers}
WHERE consumer = :consumer AND created_at < strftime('%Y-%m-%dT%H:%M:%fZ', :now - :older_than, 'unixepoch')

-- name: hub_create_as2_receipts
-- the receipt (MDN) answered for each AS2 message received, stored after its commit and before its answer: a resend
-- of the message (the same AS2-From, AS2-To and Message-ID) is answered with these bytes
CREATE TABLE IF NOT EXISTS {edinbox_hub_as2_receipts} (
    consumer TEXT NOT NULL,
    sender TEXT NOT NULL,
    receiver TEXT NOT NULL,
    message_id TEXT NOT NULL,
    receipt BLOB NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (consumer, sender, receiver, message_id)
)

-- name: hub_as2_receipt_put
-- the first receipt stored for a message wins
INSERT INTO {edinbox_hub_as2_receipts} (consumer, sender, receiver, message_id, receipt)
VALUES (:consumer, :sender, :receiver, :message_id, :receipt)
ON CONFLICT (consumer, sender, receiver, message_id) DO NOTHING

-- name: hub_as2_receipt_get
SELECT receipt FROM {edinbox_hub_as2_receipts}
WHERE consumer = :consumer AND sender = :sender AND receiver = :receiver AND message_id = :message_id

-- name: hub_purge_as2_receipts
-- past the retention a resend is new to the journal too: its receipt goes with the journal's rows
DELETE FROM {edinbox_hub_as2_receipts}
WHERE consumer = :consumer AND created_at < strftime('%Y-%m-%dT%H:%M:%fZ', :now - :older_than, 'unixepoch')

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
    seq INTEGER NOT NULL,
    arrivals INTEGER NOT NULL,
    first_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    previous_at TEXT,
    last_at TEXT,
    parked TEXT,
    -- when a hub last wrote the row (its clock, nanoseconds): the gauges read the rows changed since their last
    -- reading; last, as step 7 adds it
    changed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, partner, level, number)
)

-- name: hub_ledger_record
-- one (partner, level, number) of a batch: :n its copies accepted (more than one: the batch's own copies, so its
-- previous arrival is now; 0: only a parked interchange carried it, whose payload's fingerprint is :parked, and its
-- arrival times stay); a number seen before keeps its seq and first_at
INSERT INTO {edinbox_hub_ledger} AS l (consumer, partner, level, number, width, seq, arrivals, previous_at, last_at,
    parked, changed)
VALUES (:consumer, :partner, :level, :number, :width, :seq, :n,
    CASE WHEN :n > 1 THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END,
    CASE WHEN :n > 0 THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END, :parked, :changed)
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
WHERE l.consumer = :consumer AND (:partner IS NULL OR l.partner = :partner) AND l.changed >= :since
ORDER BY l.partner, l.level, l.seq

-- name: hub_purge_ledger
-- a number last seen before the retention: its gaps and duplicates are history
DELETE FROM {edinbox_hub_ledger}
WHERE consumer = :consumer
    AND coalesce(last_at, first_at) < strftime('%Y-%m-%dT%H:%M:%fZ', :now - :older_than, 'unixepoch')

-- name: hub_replication
-- SQLite has no replicas
SELECT NULL, NULL, NULL, NULL WHERE 0

-- name: hub_acknowledgment_bytes_of
-- `edinbox export`: the bytes of each acknowledgment sent for one message, while the outbox keeps them
SELECT a.outbox_key, o.payload
FROM {edinbox_hub_acknowledgments} AS a
JOIN {outbox} AS o ON o.key = a.outbox_key
WHERE a.consumer = :consumer AND a.source = :source AND a.message_id = :message_id
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
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (consumer, source, message_id)
)

-- name: hub_index_ledger_changed
-- the ledger's rows by when a hub last wrote them: the gauges read only the rows changed since their last reading
CREATE INDEX IF NOT EXISTS {ledger_changed_index} ON {edinbox_hub_ledger} (consumer, changed)

-- name: hub_record_findings
-- the first validation of an interchange key is kept (a duplicate or a conflicting copy does not replace it)
INSERT INTO {edinbox_hub_findings} (consumer, source, message_id, errors, findings)
VALUES (:consumer, :source, :message_id, :errors, :findings)
ON CONFLICT (consumer, source, message_id) DO NOTHING

-- name: hub_findings_of
SELECT errors, findings, created_at FROM {edinbox_hub_findings}
WHERE consumer = :consumer AND source = :source AND message_id = :message_id

-- name: hub_purge_findings
-- findings kept as long as the parked payloads and the answers
DELETE FROM {edinbox_hub_findings}
WHERE consumer = :consumer AND created_at < strftime('%Y-%m-%dT%H:%M:%fZ', :now - :older_than, 'unixepoch')
