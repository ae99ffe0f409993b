-- name: create_table
CREATE TABLE IF NOT EXISTS {table} (
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
    last_conflict_at REAL,
    retry_at REAL,
    trace TEXT
)

-- name: create_key
CREATE UNIQUE INDEX IF NOT EXISTS {key_index} ON {table} (consumer, source, message_id)

-- name: create_version
CREATE TABLE IF NOT EXISTS {version_table} (version INTEGER NOT NULL)

-- name: seed_version
INSERT INTO {version_table} (version) SELECT :version WHERE NOT EXISTS (SELECT 1 FROM {version_table})

-- name: set_version
UPDATE {version_table} SET version = :version

-- name: version
SELECT version FROM {version_table}

-- name: relation
SELECT name FROM sqlite_master WHERE type = 'table' AND name = :name

-- name: columns
SELECT name FROM pragma_table_info(:name)

-- name: indexes
SELECT name FROM pragma_index_list(:name) WHERE "unique" = 1 AND partial = 0

-- name: index_columns
SELECT name FROM pragma_index_info(:name) ORDER BY name
