-- Migrations of the hub's tables (`_parts.HUB.migrations`): the statements of version N are named `v<N>_<what>`
-- and run in file order, after the journal's own steps, in the transaction of `migrate()` under the journal's schema
-- lock (GET_LOCK; each DDL statement commits on its own, so
-- each holds when it runs again). DEVELOPERS.md says how to add one. Never edit a released step.
-- Version 1 is the hub's tables as `edinbox init` made them before the hub kept a version row (journal versions up
-- to 10): `migrate()` finds them by `hub_control_numbers` and records version 1. A new hub is made at the current
-- version directly (`create_schema()`).

-- name: v2_counters_shard
-- the journal's steps 4 and 5 until the hub kept its own chain, run again for a hub whose journal was older: the
-- counters get a shard in their key (`hub.sql`'s hub_create_counters), the rows kept are shard 0. One statement, so
-- it holds when it runs again (also after the journal's step 4)
ALTER TABLE IF EXISTS {hub_counters} ADD COLUMN IF NOT EXISTS shard SMALLINT NOT NULL DEFAULT 0,
    DROP PRIMARY KEY, ADD PRIMARY KEY (consumer, outcome, shard)

-- name: v2_answers
-- the hub's answers given once (`hub.sql`'s hub_create_answers); IF NOT EXISTS: the journal's step 5 may have made it
CREATE TABLE IF NOT EXISTS {hub_answers} (
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    delivery VARBINARY(64) NOT NULL,
    answer VARCHAR(16) NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (consumer, source, message_id, delivery)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: v3_rename_invoices
-- the hub's tables get names no application's own tables take (the README's examples make an `invoices`); IF EXISTS: a
-- second run after a failure finds some renamed (and a hub made before the console has no console_audit)
ALTER TABLE IF EXISTS {invoices} RENAME TO {edinbox_hub_invoices}

-- name: v3_rename_rejected
ALTER TABLE IF EXISTS {rejected} RENAME TO {edinbox_hub_rejected}

-- name: v3_rename_counters
ALTER TABLE IF EXISTS {hub_counters} RENAME TO {edinbox_hub_counters}

-- name: v3_rename_control_numbers
ALTER TABLE IF EXISTS {hub_control_numbers} RENAME TO {edinbox_hub_control_numbers}

-- name: v3_rename_acknowledgments
ALTER TABLE IF EXISTS {hub_acknowledgments} RENAME TO {edinbox_hub_acknowledgments}

-- name: v3_rename_answers
ALTER TABLE IF EXISTS {hub_answers} RENAME TO {edinbox_hub_answers}

-- name: v3_rename_console_audit
ALTER TABLE IF EXISTS {console_audit} RENAME TO {edinbox_hub_console_audit}

-- name: v4_as2_receipts
-- the receipt (MDN) answered for each AS2 message received: a resend of the message is answered with its bytes
CREATE TABLE IF NOT EXISTS {edinbox_hub_as2_receipts} (
    consumer VARBINARY(512) NOT NULL,
    sender VARBINARY(128) NOT NULL,
    receiver VARBINARY(128) NOT NULL,
    message_id VARBINARY(1000) NOT NULL,
    receipt MEDIUMBLOB NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (consumer, sender, receiver, message_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: v5_ledger
-- the inbound control-number ledger (`hub.sql`'s hub_create_ledger)
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
    PRIMARY KEY (consumer, partner, level, number)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: v6_invoices_remote_id
-- the id a remote sink (the HTTP accounting API) gave each invoice it holds: in lease mode the hub keeps a row per such
-- invoice, so `stats`, `show` and the console see what the remote sink created (NULL: an invoice of this table's own)
ALTER TABLE {edinbox_hub_invoices} ADD COLUMN IF NOT EXISTS remote_id VARCHAR(255) COLLATE utf8mb4_nopad_bin

-- name: v7_findings
-- what validation found per interchange (`hub.sql`'s hub_create_findings)
CREATE TABLE IF NOT EXISTS {edinbox_hub_findings} (
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    errors INTEGER NOT NULL,
    findings MEDIUMTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (consumer, source, message_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: v7_ledger_changed
-- when a hub last wrote each ledger row: the gauges read only the rows changed since their last reading
ALTER TABLE {edinbox_hub_ledger} ADD COLUMN IF NOT EXISTS changed BIGINT NOT NULL DEFAULT 0

-- name: v7_ledger_changed_index
CREATE INDEX {ledger_changed_index} ON {edinbox_hub_ledger} (consumer, changed)

-- name: v8_drop_partner_index
-- nothing on MariaDB: the trigram index dropped by this version was PostgreSQL's
SELECT 1
