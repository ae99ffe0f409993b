-- The journal as edinbox wrote it at schema version 1, frozen: the upgrade tests build it, then migrate it.
-- Never edit this file; a later version gets a fixture of its own.
CREATE TABLE IF NOT EXISTS {table} (
    consumer text NOT NULL,
    source text NOT NULL,
    message_id text NOT NULL,
    fingerprint text NOT NULL,
    status text NOT NULL
        CHECK (status IN ('processed', 'in_progress', 'failed', 'dead', 'conflict')),
    attempts integer NOT NULL DEFAULT 0,
    last_error text,
    lease_until timestamptz,
    received_at timestamptz NOT NULL DEFAULT now(),
    settled_at timestamptz,
    payload bytea,
    conflicts integer NOT NULL DEFAULT 0,
    conflict_fingerprint text,
    conflict_payload bytea,
    last_conflict_at timestamptz
);
CREATE UNIQUE INDEX IF NOT EXISTS {key_index} ON {table} (consumer, source, message_id);
CREATE TABLE IF NOT EXISTS {version_table} (version integer NOT NULL);
INSERT INTO {version_table} (version) VALUES (1)
