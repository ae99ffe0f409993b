-- The hub's tables as `edinbox init` made them before the hub kept a version row (journal version 10, hub
-- version 1), from `hub/sql/mysql/hub.sql` and `console.sql` then. Frozen: never edit.
CREATE TABLE IF NOT EXISTS {invoices} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    seller VARCHAR(191) COLLATE utf8mb4_nopad_bin NOT NULL,
    number VARCHAR(191) COLLATE utf8mb4_nopad_bin NOT NULL,
    kind VARCHAR(32) COLLATE utf8mb4_nopad_bin NOT NULL,
    issue_date DATE NOT NULL,
    buyer TEXT NOT NULL,
    currency VARCHAR(16),
    total DECIMAL(20, 4),
    tax_total DECIMAL(20, 4),
    `lines` INTEGER NOT NULL,
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    UNIQUE KEY invoices_key (seller, number, kind, issue_date)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS {rejected} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    consumer VARBINARY(512) NOT NULL,
    fingerprint VARBINARY(512) NOT NULL,
    delivery LONGTEXT NOT NULL,
    reason LONGTEXT NOT NULL,
    payload LONGBLOB NOT NULL,
    deliveries INTEGER NOT NULL DEFAULT 1,
    rejected_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    UNIQUE KEY rejected_key (consumer, fingerprint)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS {hub_counters} (
    consumer VARBINARY(512) NOT NULL,
    outcome VARCHAR(32) NOT NULL,
    n BIGINT NOT NULL,
    shard SMALLINT NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, outcome, shard)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS {hub_control_numbers} (
    partner VARCHAR(191) COLLATE utf8mb4_nopad_bin NOT NULL PRIMARY KEY,
    n BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS {hub_acknowledgments} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    kind VARCHAR(32) NOT NULL,
    duplicate BOOLEAN NOT NULL,
    partner VARCHAR(191) COLLATE utf8mb4_nopad_bin NOT NULL,
    control_number VARCHAR(64) COLLATE utf8mb4_nopad_bin NOT NULL,
    outbox_key VARCHAR(255) COLLATE utf8mb4_bin NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    UNIQUE KEY acknowledgments_number (partner, control_number),
    UNIQUE KEY acknowledgments_key (consumer, source, message_id, partner, control_number)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS {hub_answers} (
    consumer VARBINARY(512) NOT NULL,
    source VARBINARY(512) NOT NULL,
    message_id VARBINARY(512) NOT NULL,
    delivery VARBINARY(64) NOT NULL,
    answer VARCHAR(16) NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (consumer, source, message_id, delivery)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS {console_audit} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    who LONGTEXT NOT NULL,
    action LONGTEXT NOT NULL,
    target LONGTEXT NOT NULL,
    result LONGTEXT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE INDEX {received_index} ON {table} (consumer, received_at DESC);

CREATE INDEX {status_index} ON {table} (consumer, status, received_at DESC);

CREATE INDEX {control_index} ON {table} (consumer, message_id);

CREATE INDEX {invoice_number_index} ON {invoices} (number);

CREATE INDEX {invoice_message_index} ON {invoices} (consumer, source, message_id)
