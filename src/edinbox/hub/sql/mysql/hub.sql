-- The hub's tables beside the journal (in its database), each named `edinbox_hub_*` (no name an application's own
-- tables take): invoices, parked payloads, outcome counters. Every `{name}` that is not the journal's is a table
-- beside it; `create_schema()` (`edinbox init`) runs the DDL (`_parts.HUB.create`), `migrate()` the hub's
-- `migrations.sql`.
-- Key columns use utf8mb4_nopad_bin (byte-exact, trailing spaces significant, as on PostgreSQL). The invoice key
-- must fit InnoDB's 3072-byte index limit at 4 bytes a character: seller and number take 191 characters (764
-- bytes each; an EDIFACT or X12 party id or document number is at most 35), kind 32: 2,215 bytes with the date.
-- A longer value is a DataError (data too long): that one message is parked.
-- Timestamps are DATETIME(6) in UTC.

-- name: hub_create_invoices
CREATE TABLE IF NOT EXISTS {edinbox_hub_invoices} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    seller VARCHAR(191) COLLATE utf8mb4_nopad_bin NOT NULL,
    number VARCHAR(191) COLLATE utf8mb4_nopad_bin NOT NULL,
    kind VARCHAR(32) COLLATE utf8mb4_nopad_bin NOT NULL,
    issue_date DATE NOT NULL,
    buyer TEXT NOT NULL,
    currency VARCHAR(16),
    total DECIMAL(20, 4),
    tax_total DECIMAL(20, 4),
    `lines` INTEGER NOT NULL,
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    -- the id a remote sink (the HTTP accounting API) gave the invoice; NULL: the table's own; last, as step 6 adds it
    remote_id VARCHAR(255) COLLATE utf8mb4_nopad_bin,
    UNIQUE KEY invoices_key (seller, number, kind, issue_date)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: hub_create_rejected
CREATE TABLE IF NOT EXISTS {edinbox_hub_rejected} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    consumer VARBINARY(512) NOT NULL,
    fingerprint VARBINARY(512) NOT NULL,
    delivery LONGTEXT NOT NULL,
    reason LONGTEXT NOT NULL,
    payload LONGBLOB NOT NULL,
    deliveries INTEGER NOT NULL DEFAULT 1,
    rejected_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    UNIQUE KEY rejected_key (consumer, fingerprint)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: hub_create_counters
-- a batch adds to the rows of one shard (picked per batch), so concurrent hubs rarely wait on each other's row
-- locks; a count is the sum over the shards
CREATE TABLE IF NOT EXISTS {edinbox_hub_counters} (
    consumer VARBINARY(512) NOT NULL,
    outcome VARCHAR(32) NOT NULL,
    n BIGINT NOT NULL,
    shard SMALLINT NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, outcome, shard)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: hub_insert_invoice
-- one row per parameter set: the sink runs it with run_many, once per batch, and reads the rows it inserted
-- a no-op update on the invoice key: 1 row when inserted, 0 when the invoice already exists
INSERT INTO {edinbox_hub_invoices} (seller, number, kind, issue_date, buyer, currency, total, tax_total, `lines`,
    consumer, source, message_id)
VALUES (%(seller)s, %(number)s, %(kind)s, %(issue_date)s, %(buyer)s, %(currency)s, %(total)s, %(tax_total)s, %(lines)s,
    %(consumer)s, %(source)s, %(message_id)s)
ON DUPLICATE KEY UPDATE seller = seller

-- name: hub_invoices_savepoint
SAVEPOINT hub_invoices

-- name: hub_invoices_rollback
ROLLBACK TO SAVEPOINT hub_invoices

-- name: hub_existing_invoices
-- which invoice keys of the JSON rows (seller, number, kind, issue_date) the table already holds, compared in the key's
-- own collation
SELECT i.seller, i.number, i.kind, i.issue_date
FROM JSON_TABLE(%(invoices)s, '$[*]' COLUMNS (
    i_seller LONGTEXT CHARACTER SET utf8mb4 PATH '$[0]',
    i_number LONGTEXT CHARACTER SET utf8mb4 PATH '$[1]',
    i_kind LONGTEXT CHARACTER SET utf8mb4 PATH '$[2]',
    i_issue_date DATE PATH '$[3]'
)) AS j
JOIN {edinbox_hub_invoices} AS i
    ON i.seller = j.i_seller COLLATE utf8mb4_nopad_bin AND i.number = j.i_number COLLATE utf8mb4_nopad_bin
    AND i.kind = j.i_kind COLLATE utf8mb4_nopad_bin AND i.issue_date = j.i_issue_date

-- name: hub_park
-- a content once per batch, with the number of the batch's deliveries that carried it
INSERT INTO {edinbox_hub_rejected} (consumer, fingerprint, delivery, reason, payload, deliveries)
VALUES (%(consumer)s, %(fingerprint)s, %(delivery)s, %(reason)s, %(payload)s, %(deliveries)s)
ON DUPLICATE KEY UPDATE deliveries = deliveries + VALUES(deliveries)

-- name: hub_park_reason
-- the reason of a payload parked by this delivery, rewritten once its source said where it kept the whole payload
UPDATE {edinbox_hub_rejected} SET reason = %(reason)s
WHERE consumer = %(consumer)s AND fingerprint = %(fingerprint)s AND delivery = %(delivery)s

-- name: hub_count
INSERT INTO {edinbox_hub_counters} (consumer, outcome, shard, n) VALUES (%(consumer)s, %(outcome)s, %(shard)s, %(n)s)
ON DUPLICATE KEY UPDATE n = n + VALUES(n)

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
INSERT INTO {edinbox_hub_invoices} (seller, number, kind, issue_date, buyer, currency, total, tax_total, `lines`,
    consumer, source, message_id, remote_id)
VALUES (%(seller)s, %(number)s, %(kind)s, %(issue_date)s, %(buyer)s, %(currency)s, %(total)s, %(tax_total)s, %(lines)s,
    %(consumer)s, %(source)s, %(message_id)s, %(remote_id)s)
ON DUPLICATE KEY UPDATE seller = seller

-- name: hub_invoices_of
SELECT seller, number, kind, issue_date, total, currency, remote_id FROM {edinbox_hub_invoices}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
ORDER BY id

-- name: hub_privileges
-- MariaDB's grants are the operator's (see `edinbox init --grant`): a missing one is refused at first use
-- (access denied: a configuration error that stops the process)
SELECT NULL FROM DUAL WHERE FALSE

-- name: hub_invoice_keys
-- `edinbox chaos`: every invoice's key, to find the ones that were lost
SELECT seller, number, kind, issue_date FROM {edinbox_hub_invoices}

-- name: hub_processed_keys
-- `edinbox chaos`: the interchanges the journal settled as processed, with their rows (more than one: no unique key)
SELECT CONVERT(source USING utf8mb4), CONVERT(message_id USING utf8mb4), count(*) FROM {table}
WHERE consumer = %(consumer)s AND status = 'processed'
GROUP BY source, message_id

-- name: hub_rejected_fingerprints
-- `edinbox chaos`: the fingerprint of every parked payload, to find the bad deliveries parked (once)
SELECT CONVERT(fingerprint USING utf8mb4) FROM {edinbox_hub_rejected}
WHERE consumer = %(consumer)s

-- name: hub_forget_rejected
DELETE FROM {edinbox_hub_rejected} WHERE consumer = %(consumer)s AND id = %(id)s

-- name: hub_purge_rejected
DELETE FROM {edinbox_hub_rejected}
WHERE consumer = %(consumer)s AND rejected_at < UTC_TIMESTAMP(6) - INTERVAL %(older_than)s MICROSECOND

-- name: hub_drop_schema
-- `edinbox demo` only: drop the database it created for itself (MariaDB's schema), with everything in it
DROP DATABASE IF EXISTS {schema}

-- name: hub_create_control_numbers
-- the next interchange control number of our acknowledgments, per partner: the upsert's row lock serialises hubs
CREATE TABLE IF NOT EXISTS {edinbox_hub_control_numbers} (
    partner VARCHAR(191) COLLATE utf8mb4_nopad_bin NOT NULL PRIMARY KEY,
    n BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: hub_create_acknowledgments
CREATE TABLE IF NOT EXISTS {edinbox_hub_acknowledgments} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    kind VARCHAR(32) NOT NULL,
    duplicate BOOLEAN NOT NULL,
    partner VARCHAR(191) COLLATE utf8mb4_nopad_bin NOT NULL,
    control_number VARCHAR(64) COLLATE utf8mb4_nopad_bin NOT NULL,
    outbox_key VARCHAR(255) COLLATE utf8mb4_bin NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    UNIQUE KEY acknowledgments_number (partner, control_number),
    UNIQUE KEY acknowledgments_key (consumer, source, message_id, partner, control_number)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: hub_reserve_control_numbers
-- each partner's last of its count of numbers reserved (the others are the `count - 1` before it), every
-- [partner, count] pair of the JSON array in one upsert, its rows locked in the partners' order (hubs never deadlock
-- on them); the row locks are held to the commit, so the read after it sees this transaction's own numbers
INSERT INTO {edinbox_hub_control_numbers} (partner, n)
SELECT j.partner, j.k FROM JSON_TABLE(%(rows)s, '$[*]' COLUMNS (
    partner VARCHAR(191) CHARACTER SET utf8mb4 PATH '$[0]',
    k BIGINT PATH '$[1]'
)) AS j
ORDER BY j.partner
ON DUPLICATE KEY UPDATE n = n + VALUES(n);
SELECT c.partner, c.n
FROM JSON_TABLE(%(rows)s, '$[*]' COLUMNS (partner VARCHAR(191) CHARACTER SET utf8mb4 PATH '$[0]')) AS j
JOIN {edinbox_hub_control_numbers} AS c ON c.partner = j.partner COLLATE utf8mb4_nopad_bin

-- name: hub_record_acknowledgment
INSERT INTO {edinbox_hub_acknowledgments} (consumer, source, message_id, kind, duplicate, partner, control_number, outbox_key)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(kind)s, %(duplicate)s, %(partner)s, %(control_number)s,
    %(outbox_key)s)

-- name: hub_acknowledgments_of
SELECT a.kind, a.duplicate, a.control_number, a.outbox_key, a.created_at, o.destination, o.sent_at, o.parked_at,
    o.reason
FROM {edinbox_hub_acknowledgments} AS a
LEFT JOIN {outbox} AS o ON o.`key` = a.outbox_key
WHERE a.consumer = %(consumer)s AND a.source = %(source)s AND a.message_id = %(message_id)s
ORDER BY a.id

-- name: hub_acknowledgment_totals
SELECT kind, duplicate, count(*), count(DISTINCT outbox_key) FROM {edinbox_hub_acknowledgments}
WHERE consumer = %(consumer)s
GROUP BY kind, duplicate

-- name: hub_create_answers
-- what the hub answered once: a rejection per interchange key (delivery "rejection"), and the deliveries (a digest of
-- the broker's id for them) that were processed or got a duplicate notice: a broker's redelivery of one of them is
-- never taken for the partner's re-send
CREATE TABLE IF NOT EXISTS {edinbox_hub_answers} (
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    delivery VARBINARY(64) NOT NULL,
    answer VARCHAR(16) NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (consumer, source, message_id, delivery)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: hub_answer_once
-- one row per key and delivery: 1 row changed when this transaction is the first to answer it, 0 when one was
INSERT IGNORE INTO {edinbox_hub_answers} (consumer, source, message_id, delivery, answer)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(delivery)s, %(answer)s)

-- name: hub_answers_of
SELECT answer, created_at FROM {edinbox_hub_answers}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s AND delivery = 'rejection'

-- name: hub_rejection_totals
SELECT count(*) FROM {edinbox_hub_answers} WHERE consumer = %(consumer)s AND delivery = 'rejection'

-- name: hub_purge_answers
-- past the horizon no broker redelivers a delivery, so its row is no longer needed; a rejection's row goes too
DELETE FROM {edinbox_hub_answers}
WHERE consumer = %(consumer)s AND created_at < UTC_TIMESTAMP(6) - INTERVAL %(older_than)s MICROSECOND

-- name: hub_create_as2_receipts
-- the receipt (MDN) answered for each AS2 message received, stored after its commit and before its answer: a resend
-- of the message (the same AS2-From, AS2-To and Message-ID) is answered with these bytes
CREATE TABLE IF NOT EXISTS {edinbox_hub_as2_receipts} (
    consumer VARBINARY(512) NOT NULL,
    sender VARBINARY(128) NOT NULL,
    receiver VARBINARY(128) NOT NULL,
    message_id VARBINARY(1000) NOT NULL,
    receipt MEDIUMBLOB NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (consumer, sender, receiver, message_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: hub_as2_receipt_put
-- the first receipt stored for a message wins
INSERT IGNORE INTO {edinbox_hub_as2_receipts} (consumer, sender, receiver, message_id, receipt)
VALUES (%(consumer)s, %(sender)s, %(receiver)s, %(message_id)s, %(receipt)s)

-- name: hub_as2_receipt_get
SELECT receipt FROM {edinbox_hub_as2_receipts}
WHERE consumer = %(consumer)s AND sender = %(sender)s AND receiver = %(receiver)s AND message_id = %(message_id)s

-- name: hub_purge_as2_receipts
-- past the retention a resend is new to the journal too: its receipt goes with the journal's rows
DELETE FROM {edinbox_hub_as2_receipts}
WHERE consumer = %(consumer)s AND created_at < UTC_TIMESTAMP(6) - INTERVAL %(older_than)s MICROSECOND

-- name: hub_create_ledger
-- the inbound control-number ledger (`_ledger`): one row per number a partner sent at a level (ISA13, GS06, ST02,
-- UNB0020, UNG0048, UNH0062), leading zeros dropped; width orders numbers (then the text), 0 for one that is not a
-- number; arrivals counts the copies accepted (0: only parked, `parked` the fingerprint of the payload that carried
-- it); seq is when it first came (the hub's clock in nanoseconds, then its place in the batch)
CREATE TABLE IF NOT EXISTS {edinbox_hub_ledger} (
    consumer VARBINARY(512) NOT NULL,
    partner VARCHAR(191) COLLATE utf8mb4_nopad_bin NOT NULL,
    level VARCHAR(8) COLLATE utf8mb4_nopad_bin NOT NULL,
    number VARCHAR(128) COLLATE utf8mb4_nopad_bin NOT NULL,
    width INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    arrivals INTEGER NOT NULL,
    first_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    previous_at DATETIME(6),
    last_at DATETIME(6),
    parked VARBINARY(512),
    -- when a hub last wrote the row (its clock, nanoseconds): the gauges read the rows changed since their last
    -- reading; last, as step 7 adds it
    changed BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, partner, level, number)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: hub_ledger_record
-- one (partner, level, number) of a batch: n its copies accepted (more than one: the batch's own copies, so its
-- previous arrival is now; 0: only a parked interchange carried it, whose payload's fingerprint is parked, and its
-- arrival times stay); a number seen before keeps its seq and first_at; previous_at is assigned before last_at, so it
-- reads the last arrival before this one
INSERT INTO {edinbox_hub_ledger} (consumer, partner, level, number, width, seq, arrivals, previous_at, last_at, parked,
    changed)
VALUES (%(consumer)s, %(partner)s, %(level)s, %(number)s, %(width)s, %(seq)s, %(n)s,
    IF(%(n)s > 1, UTC_TIMESTAMP(6), NULL), IF(%(n)s > 0, UTC_TIMESTAMP(6), NULL), %(parked)s, %(changed)s)
ON DUPLICATE KEY UPDATE arrivals = arrivals + VALUES(arrivals),
    previous_at = IF(VALUES(last_at) IS NULL, previous_at, COALESCE(VALUES(previous_at), last_at)),
    last_at = COALESCE(VALUES(last_at), last_at), parked = COALESCE(VALUES(parked), parked),
    changed = VALUES(changed)

-- name: hub_ledger_rows
-- every number of the consumer (of one partner when partner is not null) a hub wrote at or after since (its clock,
-- nanoseconds; 0: all), with the parked payload's id
SELECT l.partner, l.level, l.number, l.width, l.seq, l.arrivals, l.first_at, l.previous_at, l.last_at, r.id, l.changed
FROM {edinbox_hub_ledger} AS l
LEFT JOIN {edinbox_hub_rejected} AS r ON r.consumer = l.consumer AND r.fingerprint = l.parked
WHERE l.consumer = %(consumer)s AND (%(partner)s IS NULL OR l.partner = %(partner)s) AND l.changed >= %(since)s
ORDER BY l.partner, l.level, l.seq

-- name: hub_purge_ledger
-- a number last seen before the retention: its gaps and duplicates are history
DELETE FROM {edinbox_hub_ledger}
WHERE consumer = %(consumer)s
    AND COALESCE(last_at, first_at) < UTC_TIMESTAMP(6) - INTERVAL %(older_than)s MICROSECOND

-- name: hub_replication
-- `edinbox doctor` reads PostgreSQL's replication only: MariaDB's replicas are the operator's to check
SELECT NULL, NULL, NULL, NULL FROM DUAL WHERE FALSE

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
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    errors INTEGER NOT NULL,
    findings MEDIUMTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (consumer, source, message_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: hub_index_ledger_changed
-- the ledger's rows by when a hub last wrote them: the gauges read only the rows changed since their last reading
CREATE INDEX {ledger_changed_index} ON {edinbox_hub_ledger} (consumer, changed)

-- name: hub_record_findings
-- the first validation of an interchange key is kept (a duplicate or a conflicting copy does not replace it)
INSERT IGNORE INTO {edinbox_hub_findings} (consumer, source, message_id, errors, findings)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(errors)s, %(findings)s)

-- name: hub_findings_of
SELECT errors, findings, created_at FROM {edinbox_hub_findings}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: hub_purge_findings
-- findings kept as long as the parked payloads and the answers
DELETE FROM {edinbox_hub_findings}
WHERE consumer = %(consumer)s AND created_at < UTC_TIMESTAMP(6) - INTERVAL %(older_than)s MICROSECOND
