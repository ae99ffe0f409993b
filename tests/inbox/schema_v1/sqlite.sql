-- The journal as edinbox wrote it at schema version 1, frozen: the upgrade tests build it, then migrate it.
-- Never edit this file; a later version gets a fixture of its own.
CREATE TABLE IF NOT EXISTS {table} (
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL
        CHECK (status IN ('processed', 'in_progress', 'failed', 'dead', 'conflict')),
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
);
CREATE UNIQUE INDEX IF NOT EXISTS {key_index} ON {table} (consumer, source, message_id);
CREATE TABLE IF NOT EXISTS {version_table} (version INTEGER NOT NULL);
INSERT INTO {version_table} (version) VALUES (1)
