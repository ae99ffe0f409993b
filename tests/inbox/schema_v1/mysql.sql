-- The journal as edinbox wrote it at schema version 1 on MariaDB, frozen: the upgrade tests build it, then migrate
-- it. Never edit this file; a later version gets a fixture of its own.
CREATE TABLE IF NOT EXISTS {table} (
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    fingerprint LONGTEXT NOT NULL,
    status VARCHAR(16) NOT NULL
        CHECK (status IN ('processed', 'in_progress', 'failed', 'dead', 'conflict')),
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error LONGTEXT,
    lease_until DATETIME(6),
    received_at DATETIME(6) NOT NULL,
    settled_at DATETIME(6),
    payload LONGBLOB,
    conflicts INTEGER NOT NULL DEFAULT 0,
    conflict_fingerprint LONGTEXT,
    conflict_payload LONGBLOB,
    last_conflict_at DATETIME(6),
    UNIQUE KEY {key_index} (consumer, source, message_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE IF NOT EXISTS {version_table} (version INTEGER NOT NULL) ENGINE = InnoDB;
INSERT INTO {version_table} (version) VALUES (1)
