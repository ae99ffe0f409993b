-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema}

-- name: create_status
-- The status column's type: text with its six values checked by a domain, not by a CHECK on the table. PostgreSQL
-- rebuilds a table's CHECK expressions for every statement that writes a row (about 5 us: one single-row INSERT took
-- ~18 us with the CHECK, ~12 with the domain or none); a domain's check is kept planned in the session's type cache.
-- No CREATE DOMAIN IF NOT EXISTS: an existing one (a journal dropped and created again) is kept.
DO $$
BEGIN
    CREATE DOMAIN {status_type} AS text
        CONSTRAINT {status_check} CHECK (VALUE IN ('processed', 'in_progress', 'failed', 'dead', 'conflict', 'requeued'));
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$

-- name: create_table
CREATE TABLE IF NOT EXISTS {table} (
    consumer text NOT NULL,
    source text NOT NULL,
    message_id text NOT NULL,
    fingerprint text NOT NULL,
    status {status_type} NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    last_error text,
    lease_until timestamptz,
    received_at timestamptz NOT NULL DEFAULT now(),
    settled_at timestamptz,
    payload bytea,
    conflicts integer NOT NULL DEFAULT 0,
    conflict_fingerprint text,
    conflict_payload bytea,
    last_conflict_at timestamptz,
    retry_at timestamptz,
    trace text
)

-- name: create_key
CREATE UNIQUE INDEX IF NOT EXISTS {key_index} ON {table} (consumer, source, message_id)

-- name: create_version
CREATE TABLE IF NOT EXISTS {version_table} (version integer NOT NULL)

-- name: seed_version
INSERT INTO {version_table} (version) SELECT %(version)s WHERE NOT EXISTS (SELECT 1 FROM {version_table})

-- name: schema_lock
SELECT pg_advisory_xact_lock(hashtextextended(%(lock)s, 0))

-- name: set_version
UPDATE {version_table} SET version = %(version)s

-- name: version
SELECT version FROM {version_table}

-- name: relation
SELECT to_regclass(%(name)s)::text

-- name: columns
SELECT attname::text FROM pg_attribute WHERE attrelid = to_regclass(%(name)s) AND attnum > 0 AND NOT attisdropped

-- name: unique_keys
SELECT array_agg(a.attname::text ORDER BY a.attname::text)
FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
WHERE i.indrelid = to_regclass(%(name)s) AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
    AND i.indnkeyatts = 3
GROUP BY i.indexrelid

-- name: table_keys
-- the key columns alone (the first indnkeyatts of indkey): an INCLUDE column is stored, not part of the unique key
SELECT array_agg(a.attname::text ORDER BY a.attname::text)
FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1])
WHERE i.indrelid = to_regclass(%(name)s) AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
GROUP BY i.indexrelid

-- name: sequences
SELECT n.nspname::text, s.relname::text
FROM pg_depend d
JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
JOIN pg_namespace n ON n.oid = s.relnamespace
WHERE d.refobjid = to_regclass(%(name)s) AND d.deptype IN ('a', 'i')
