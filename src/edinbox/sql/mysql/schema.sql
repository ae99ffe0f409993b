-- The journal on MariaDB (InnoDB, utf8mb4). The key columns are VARBINARY(512): a key part is at most 512 UTF-8
-- bytes (MAX_KEY_BYTES), so the unique key is at most 3 x 512 = 1536 bytes, inside InnoDB's 3072-byte index limit;
-- as VARCHAR(512) utf8mb4 each column could take 2048 bytes and the index would be refused. Binary columns also
-- compare byte for byte, as PostgreSQL and SQLite do ("a" and "A", "x" and "x " are different keys; a PAD SPACE
-- collation would make the last two one key). The unique key is the first UNIQUE NOT NULL index, so InnoDB
-- clusters the rows on it and a duplicate waits on the very record the first delivery holds.
-- Timestamps are DATETIME(6) in UTC (UTC_TIMESTAMP(6)), independent of the session's time zone.
-- The columns a processed delivery writes default to its values (status, attempts, both timestamps): its INSERT
-- names the key, the fingerprint and the trace only, which the server parses and fills faster (version 7); every
-- other INSERT names them all.
-- MySQL 8 has no CREATE INDEX IF NOT EXISTS: the store runs every `CREATE [UNIQUE] INDEX` of these files as
-- "create unless an index of that name exists" (error 1061, duplicate key name, means it is there).

-- name: create_schema
CREATE DATABASE IF NOT EXISTS {schema} CHARACTER SET utf8mb4

-- name: create_table
CREATE TABLE IF NOT EXISTS {table} (
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    fingerprint LONGTEXT NOT NULL,
    status VARCHAR(16) NOT NULL DEFAULT 'processed'
        CHECK (status IN ('processed', 'in_progress', 'failed', 'dead', 'conflict', 'requeued')),
    attempts INTEGER NOT NULL DEFAULT 1,
    last_error LONGTEXT,
    lease_until DATETIME(6),
    received_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    settled_at DATETIME(6) DEFAULT (UTC_TIMESTAMP(6)),
    payload LONGBLOB,
    conflicts INTEGER NOT NULL DEFAULT 0,
    conflict_fingerprint LONGTEXT,
    conflict_payload LONGBLOB,
    last_conflict_at DATETIME(6),
    retry_at DATETIME(6),
    trace VARCHAR(64),
    UNIQUE KEY {key_index} (consumer, source, message_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin

-- name: create_key
CREATE UNIQUE INDEX {key_index} ON {table} (consumer, source, message_id)

-- name: create_version
CREATE TABLE IF NOT EXISTS {version_table} (version INTEGER NOT NULL) ENGINE = InnoDB

-- name: seed_version
INSERT INTO {version_table} (version) SELECT %(version)s FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM {version_table})

-- name: schema_lock
SELECT GET_LOCK(%(lock)s, 60)

-- name: schema_unlock
SELECT RELEASE_LOCK(%(lock)s)

-- name: set_version
UPDATE {version_table} SET version = %(version)s

-- name: version
SELECT version FROM {version_table}

-- name: relation
SELECT table_name FROM information_schema.tables WHERE table_schema = {schema_name} AND table_name = %(name)s

-- name: columns
SELECT column_name FROM information_schema.columns WHERE table_schema = {schema_name} AND table_name = %(name)s

-- name: unique_keys
-- a unique index on a prefix of a column (sub_part) does not make the whole value unique: not a key
SELECT GROUP_CONCAT(column_name ORDER BY column_name SEPARATOR ',')
FROM information_schema.statistics
WHERE table_schema = {schema_name} AND table_name = %(name)s AND non_unique = 0
GROUP BY index_name
HAVING COUNT(sub_part) = 0
