-- Migrations of the journal: the queries of version N are named `v<N>_<what>` and run in file order, in one
-- transaction under the schema's advisory lock, when `migrate()` takes a journal from version N-1 to N.
-- `_core.MIGRATIONS` lists the versions; DEVELOPERS.md says how to add one. Never edit a released step.

-- name: v2_status_check_drop
-- version 1 declared the status CHECK inline: PostgreSQL named it <table>_status_check
ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {status_check}

-- name: v2_status_check_add
ALTER TABLE {table} ADD CONSTRAINT {status_check}
    CHECK (status IN ('processed', 'in_progress', 'failed', 'dead', 'conflict', 'requeued'))

-- name: v3_outbox
-- the outbox beside the journal (`outbox.sql`'s outbox_create); IF NOT EXISTS: an `edinbox init` may have made it
CREATE TABLE IF NOT EXISTS {outbox} (
    id BIGSERIAL PRIMARY KEY,
    destination TEXT NOT NULL,
    key TEXT NOT NULL,
    payload BYTEA NOT NULL,
    headers TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at TIMESTAMPTZ,
    parked_at TIMESTAMPTZ,
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
-- when a failed row may run again (`schema.sql`'s create_table); NULL in the rows kept: they may run at once
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS retry_at timestamptz

-- name: v9_outbox_destinations
-- the outbox's destinations lose their passwords: `mask`'s rules are code, not SQL, so the rows are rewritten by
-- the step in code (`stores._async_base.STEPS_IN_CODE`: outbox_destinations, outbox_set_destination) after this
SELECT 1

-- name: v10_trace
-- the W3C traceparent of the attempt that settled the row (`schema.sql`'s create_table); NULL in the rows kept
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS trace text

-- name: v11_payloads
-- the kept payloads beside the journal (`payloads.sql`): their table and indexes are made by the step in code
-- (`stores._async_base.STEPS_IN_CODE`: the `payloads_create*` statements `create_schema()` runs), after this
SELECT 1

-- name: v12_status_type
-- the status column's values checked by a domain instead of the table's CHECK (`schema.sql`'s create_status: the
-- CHECK was rebuilt for every statement that wrote a row). The domain is made without its check first: changing
-- the column to a domain with no constraint changes the catalogue only, where one with a constraint would rewrite
-- the table; the check is then added to the domain, which reads the rows once to validate them
DO $$
BEGIN
    CREATE DOMAIN {status_type} AS text;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$

-- name: v12_status_check_drop
ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {status_check}

-- name: v12_status_column
ALTER TABLE {table} ALTER COLUMN status TYPE {status_type}

-- name: v12_status_check_add
DO $$
BEGIN
    ALTER DOMAIN {status_type}
        ADD CONSTRAINT {status_check} CHECK (VALUE IN ('processed', 'in_progress', 'failed', 'dead', 'conflict', 'requeued'));
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$

-- name: v13_payloads_words
-- a kept payload's words are written after its settling transaction (`payloads.sql`'s payloads_index_batch): NULL
-- until then, the rows waiting under a partial index made by the step in code (`stores._async_base.STEPS_IN_CODE`:
-- the `payloads_create*` statements)
ALTER TABLE {payloads} ALTER COLUMN words DROP NOT NULL

-- name: v13_payloads_text_drop
-- the GIN index covers the indexed rows only from here on (`payloads.sql`'s payloads_create_text): dropped here, made
-- again by the step in code (a rebuild of the index: on a large table the migration takes its time)
DROP INDEX IF EXISTS {schema}.{payloads_text_index}

-- name: v14_payloads_words
-- SQLite's full-text index no longer stores the words of a kept payload; nothing changes here
SELECT 1
