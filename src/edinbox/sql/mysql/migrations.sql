-- Migrations of the journal: the queries of version N are named `v<N>_<what>` and run in file order, under the
-- schema's named lock (GET_LOCK), when `migrate()` takes a journal from version N-1 to N. MariaDB commits each
-- DDL statement on its own: a step's DDL is applied before the version row changes, so a step must hold when it
-- runs again after a failure (MODIFY to the same definition does).
-- `_core.MIGRATIONS` lists the versions; DEVELOPERS.md says how to add one. Never edit a released step.

-- name: v2_status_check
-- version 1 declared the status CHECK on the column (MariaDB names it after the column): MODIFY replaces it
ALTER TABLE {table} MODIFY status VARCHAR(16) NOT NULL
    CHECK (status IN ('processed', 'in_progress', 'failed', 'dead', 'conflict', 'requeued'))

-- name: v3_outbox
-- the outbox beside the journal (`outbox.sql`'s outbox_create); IF NOT EXISTS: an `edinbox init` may have made it
CREATE TABLE IF NOT EXISTS {outbox} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    destination VARCHAR(255) COLLATE utf8mb4_bin NOT NULL,
    `key` VARCHAR(255) COLLATE utf8mb4_bin NOT NULL,
    payload LONGBLOB NOT NULL,
    headers LONGTEXT,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    sent_at DATETIME(6),
    parked_at DATETIME(6),
    reason LONGTEXT
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: v3_outbox_pending
CREATE INDEX IF NOT EXISTS {outbox_pending} ON {outbox} (destination, `key`, id)

-- name: v4_hub
-- the hub's counters got a shard in their key here until the hub kept a migration chain of its own: the hub's
-- version 2 (`hub/sql/<dialect>/migrations.sql`) does it now, and this journal's chain touches no hub table
SELECT 1

-- name: v5_hub
-- the hub's answers table was made here until the hub kept a migration chain of its own (the hub's version 2)
SELECT 1

-- name: v6_outbox_unsent
-- the unsent rows in id order (`outbox.sql`'s outbox_create_unsent): the claim no longer reads the sent rows
CREATE INDEX IF NOT EXISTS {outbox_unsent} ON {outbox} (sent_at, parked_at, id)

-- name: v7_defaults
-- a processed delivery's values as the defaults (`schema.sql`'s create_table): its INSERT names four columns only.
-- Metadata only (MariaDB changes defaults in place); the same definition when it runs again
ALTER TABLE {table} ALTER COLUMN status SET DEFAULT 'processed', ALTER COLUMN attempts SET DEFAULT 1,
    ALTER COLUMN received_at SET DEFAULT (UTC_TIMESTAMP(6)), ALTER COLUMN settled_at SET DEFAULT (UTC_TIMESTAMP(6))

-- name: v8_retry_at
-- when a failed row may run again (`schema.sql`'s create_table); NULL in the rows kept: they may run at once.
-- IF NOT EXISTS: the step holds when it runs again (each DDL statement commits on its own here)
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS retry_at DATETIME(6)

-- name: v9_outbox_destinations
-- the outbox's destinations lose their passwords: `mask`'s rules are code, not SQL, so the rows are rewritten by
-- the step in code (`stores._async_base.STEPS_IN_CODE`: outbox_destinations, outbox_set_destination) after this
SELECT 1

-- name: v10_trace
-- the W3C traceparent of the attempt that settled the row (`schema.sql`'s create_table); NULL in the rows kept.
-- IF NOT EXISTS: the step holds when it runs again (each DDL statement commits on its own here)
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS trace VARCHAR(64)

-- name: v11_payloads
-- the kept payloads beside the journal (`payloads.sql`): their table and indexes are made by the step in code
-- (`stores._async_base.STEPS_IN_CODE`: the `payloads_create*` statements `create_schema()` runs), after this
SELECT 1

-- name: v12_status_type
-- PostgreSQL checks the status by a domain instead of the table's CHECK (a CHECK there is rebuilt for every
-- statement that writes a row); nothing changes here
SELECT 1

-- name: v13_payloads_index
-- SQLite and PostgreSQL index a kept payload after its settling transaction from here on; MariaDB's FULLTEXT keeps
-- indexing in it (its table is unchanged)
SELECT 1

-- name: v14_payloads_words
-- SQLite's full-text index no longer stores the words of a kept payload; nothing changes here
SELECT 1
