-- Migrations of the journal: the queries of version N are named `v<N>_<what>` and run in file order, in one
-- write transaction (BEGIN IMMEDIATE), when `migrate()` takes a journal from version N-1 to N.
-- `_core.MIGRATIONS` lists the versions; DEVELOPERS.md says how to add one. Never edit a released step.
-- SQLite cannot change a CHECK constraint: a step that does rebuilds the table as {rebuild}, then renames it.

-- name: v2_rebuild
CREATE TABLE {rebuild} (
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL
        CHECK (status IN ('processed', 'in_progress', 'failed', 'dead', 'conflict', 'requeued')),
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    lease_until REAL,
    received_at REAL NOT NULL,
    settled_at REAL,
    payload BLOB,
    conflicts INTEGER NOT NULL DEFAULT 0,
    conflict_fingerprint TEXT,
    conflict_payload BLOB,
    last_conflict_at REAL
)

-- name: v2_copy
INSERT INTO {rebuild} (consumer, source, message_id, fingerprint, status, attempts, last_error, lease_until,
    received_at, settled_at, payload, conflicts, conflict_fingerprint, conflict_payload, last_conflict_at)
SELECT consumer, source, message_id, fingerprint, status, attempts, last_error, lease_until,
    received_at, settled_at, payload, conflicts, conflict_fingerprint, conflict_payload, last_conflict_at
FROM {table}

-- name: v2_drop
DROP TABLE {table}

-- name: v2_rename
ALTER TABLE {rebuild} RENAME TO {table}

-- name: v2_key
CREATE UNIQUE INDEX {key_index} ON {table} (consumer, source, message_id)

-- name: v3_outbox
-- the outbox beside the journal (`outbox.sql`'s outbox_create); IF NOT EXISTS: an `edinbox init` may have made it
CREATE TABLE IF NOT EXISTS {outbox} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    destination TEXT NOT NULL,
    key TEXT NOT NULL,
    payload BLOB NOT NULL,
    headers TEXT,
    created_at REAL NOT NULL,
    sent_at REAL,
    parked_at REAL,
    reason TEXT
)

-- name: v3_outbox_pending
CREATE INDEX IF NOT EXISTS {outbox_pending} ON {outbox} (destination, key, id)
WHERE sent_at IS NULL AND parked_at IS NULL

-- name: v4_hub
-- the hub's counters got a shard in their key here until the hub kept a migration chain of its own: the hub's
-- version 2 (`hub/sql/<dialect>/migrations.sql`) does it now, and this journal's chain touches no hub table
SELECT 1

-- name: v5_hub
-- the hub's answers table was made here until the hub kept a migration chain of its own (the hub's version 2)
SELECT 1

-- name: v6_outbox_unsent
-- the unsent rows in id order (`outbox.sql`'s outbox_create_unsent): the claim no longer reads the sent rows
CREATE INDEX IF NOT EXISTS {outbox_unsent} ON {outbox} (id)
WHERE sent_at IS NULL AND parked_at IS NULL

-- name: v7_defaults
-- MariaDB's journal took a processed delivery's values as its columns' defaults (its INSERT names four columns);
-- nothing changes here: this journal's INSERT names every column it writes, as before
SELECT 1

-- name: v8_retry_at
-- when a failed row may run again (`schema.sql`'s create_table); NULL in the rows kept: they may run at once.
-- A column added at the end: no rebuild
ALTER TABLE {table} ADD COLUMN retry_at REAL

-- name: v9_outbox_destinations
-- the outbox's destinations lose their passwords: `mask`'s rules are code, not SQL, so the rows are rewritten by
-- the step in code (`stores._async_base.STEPS_IN_CODE`: outbox_destinations, outbox_set_destination) after this
SELECT 1

-- name: v10_trace
-- the W3C traceparent of the attempt that settled the row (`schema.sql`'s create_table); NULL in the rows kept.
-- A column added at the end: no rebuild
ALTER TABLE {table} ADD COLUMN trace TEXT

-- name: v11_payloads
-- the kept payloads beside the journal (`payloads.sql`): their table and indexes are made by the step in code
-- (`stores._async_base.STEPS_IN_CODE`: the `payloads_create*` statements `create_schema()` runs), after this
SELECT 1

-- name: v12_status_type
-- PostgreSQL checks the status by a domain instead of the table's CHECK (a CHECK there is rebuilt for every
-- statement that writes a row); nothing changes here
SELECT 1

-- name: v13_payloads_rebuild
-- a kept payload's search text is written after its settling transaction (`payloads.sql`'s payloads_index): NULL
-- until then. SQLite cannot drop a NOT NULL: the table is rebuilt as {payloads_rebuild}, its rowids kept (the
-- full-text index knows the rows by them), then renamed; its indexes and triggers are made again by the step in code
-- (`stores._async_base.STEPS_IN_CODE`: the `payloads_create*` statements), the triggers now indexing a row once its
-- text is set
CREATE TABLE {payloads_rebuild} (
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    truncated INTEGER NOT NULL,
    body BLOB NOT NULL,
    text TEXT,
    kept_at REAL NOT NULL
)

-- name: v13_payloads_copy
INSERT INTO {payloads_rebuild} (rowid, consumer, source, message_id, fingerprint, sha256, size, content_type,
    truncated, body, text, kept_at)
SELECT rowid, consumer, source, message_id, fingerprint, sha256, size, content_type, truncated, body, text, kept_at
FROM {payloads}

-- name: v13_payloads_drop
DROP TABLE {payloads}

-- name: v13_payloads_rename
ALTER TABLE {payloads_rebuild} RENAME TO {payloads}

-- name: v14_payloads_words
-- the full-text index keeps no copy of a kept payload's words, and a mark says how far it has indexed (`payloads.sql`).
-- Version 13's index (its content in the rows' `text`), its triggers and the index of the rows waiting are dropped
-- and every row indexed again from its body by the step in code (`stores._async_base.STEPS_IN_CODE`:
-- `index_kept_words`), which packs the bodies a row waiting still held as received
DROP TRIGGER IF EXISTS {payloads_on_insert}

-- name: v14_payloads_on_delete
DROP TRIGGER IF EXISTS {payloads_on_delete}

-- name: v14_payloads_on_update
DROP TRIGGER IF EXISTS {payloads_on_update}

-- name: v14_payloads_pending
DROP INDEX IF EXISTS {payloads_pending_index}
