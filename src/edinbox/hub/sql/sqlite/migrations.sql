-- Migrations of the hub's tables (`_parts.HUB.migrations`): the statements of version N are named `v<N>_<what>`
-- and run in file order, after the journal's own steps, in the transaction of `migrate()` under the journal's schema
-- lock (the write lock). DEVELOPERS.md says how to add one. Never edit a released step.
-- Version 1 is the hub's tables as `edinbox init` made them before the hub kept a version row (journal versions up
-- to 10): `migrate()` finds them by `hub_control_numbers` and records version 1. A new hub is made at the current
-- version directly (`create_schema()`).

-- name: v2_counters_rebuild
-- the journal's steps 4 and 5 until the hub kept its own chain, run again for a hub whose journal was older: the
-- counters get a shard in their key (`hub.sql`'s hub_create_counters): SQLite cannot change a primary key, so the
-- table is rebuilt, each count kept as shard 0 (summed over the shards when the journal's step 4 ran already)
CREATE TABLE {hub_counters_rebuild} (
    consumer TEXT NOT NULL,
    outcome TEXT NOT NULL,
    n INTEGER NOT NULL,
    shard INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, outcome, shard)
)

-- name: v2_counters_copy
INSERT INTO {hub_counters_rebuild} (consumer, outcome, n, shard)
SELECT consumer, outcome, sum(n), 0 FROM {hub_counters} GROUP BY consumer, outcome

-- name: v2_counters_drop
DROP TABLE {hub_counters}

-- name: v2_counters_rename
ALTER TABLE {hub_counters_rebuild} RENAME TO hub_counters

-- name: v2_answers
-- the hub's answers given once (`hub.sql`'s hub_create_answers); IF NOT EXISTS: the journal's step 5 may have made it
CREATE TABLE IF NOT EXISTS {hub_answers} (
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    delivery TEXT NOT NULL,
    answer TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (consumer, source, message_id, delivery)
)

-- name: v3_audit_missing
-- SQLite has no ALTER TABLE IF EXISTS: a hub made before the console has no console_audit, made here to be renamed
CREATE TABLE IF NOT EXISTS {console_audit} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    who TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    result TEXT NOT NULL
)

-- name: v3_rename_invoices
-- the hub's tables get names no application's own tables take (the README's examples make an `invoices`)
ALTER TABLE {invoices} RENAME TO {edinbox_hub_invoices}

-- name: v3_rename_rejected
ALTER TABLE {rejected} RENAME TO {edinbox_hub_rejected}

-- name: v3_rename_counters
ALTER TABLE {hub_counters} RENAME TO {edinbox_hub_counters}

-- name: v3_rename_control_numbers
ALTER TABLE {hub_control_numbers} RENAME TO {edinbox_hub_control_numbers}

-- name: v3_rename_acknowledgments
ALTER TABLE {hub_acknowledgments} RENAME TO {edinbox_hub_acknowledgments}

-- name: v3_rename_answers
ALTER TABLE {hub_answers} RENAME TO {edinbox_hub_answers}

-- name: v3_rename_console_audit
ALTER TABLE {console_audit} RENAME TO {edinbox_hub_console_audit}

-- name: v4_as2_receipts
-- the receipt (MDN) answered for each AS2 message received: a resend of the message is answered with its bytes
CREATE TABLE IF NOT EXISTS {edinbox_hub_as2_receipts} (
    consumer TEXT NOT NULL,
    sender TEXT NOT NULL,
    receiver TEXT NOT NULL,
    message_id TEXT NOT NULL,
    receipt BLOB NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (consumer, sender, receiver, message_id)
)

-- name: v5_ledger
-- the inbound control-number ledger (`hub.sql`'s hub_create_ledger)
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
    PRIMARY KEY (consumer, partner, level, number)
)

-- name: v6_invoices_remote_id
-- the id a remote sink (the HTTP accounting API) gave each invoice it holds: in lease mode the hub keeps a row per such
-- invoice, so `stats`, `show` and the console see what the remote sink created (NULL: an invoice of this table's own)
ALTER TABLE {edinbox_hub_invoices} ADD COLUMN remote_id TEXT

-- name: v7_findings
-- what validation found per interchange (`hub.sql`'s hub_create_findings)
CREATE TABLE IF NOT EXISTS {edinbox_hub_findings} (
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    errors INTEGER NOT NULL,
    findings TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (consumer, source, message_id)
)

-- name: v7_ledger_changed
-- when a hub last wrote each ledger row: the gauges read only the rows changed since their last reading
ALTER TABLE {edinbox_hub_ledger} ADD COLUMN changed INTEGER NOT NULL DEFAULT 0

-- name: v7_ledger_changed_index
CREATE INDEX IF NOT EXISTS {ledger_changed_index} ON {edinbox_hub_ledger} (consumer, changed)

-- name: v8_drop_partner_index
-- nothing on SQLite: the trigram index dropped by this version was PostgreSQL's
SELECT 1
