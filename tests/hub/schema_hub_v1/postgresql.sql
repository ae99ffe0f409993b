-- The hub's tables as `edinbox init` made them before the hub kept a version row (journal version 10, hub
-- version 1), from `hub/sql/postgresql/hub.sql` and `console.sql` then. Frozen: never edit.
CREATE TABLE IF NOT EXISTS {invoices} (
    id BIGSERIAL PRIMARY KEY,
    seller TEXT NOT NULL,
    number TEXT NOT NULL,
    kind TEXT NOT NULL,
    issue_date DATE NOT NULL,
    buyer TEXT NOT NULL,
    currency TEXT,
    total NUMERIC(20, 4),
    tax_total NUMERIC(20, 4),
    lines INTEGER NOT NULL,
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT invoices_key UNIQUE (seller, number, kind, issue_date)
);

CREATE TABLE IF NOT EXISTS {rejected} (
    id BIGSERIAL PRIMARY KEY,
    consumer TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    delivery TEXT NOT NULL,
    reason TEXT NOT NULL,
    payload BYTEA NOT NULL,
    deliveries INTEGER NOT NULL DEFAULT 1,
    rejected_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (consumer, fingerprint)
);

CREATE TABLE IF NOT EXISTS {hub_counters} (
    consumer TEXT NOT NULL,
    outcome TEXT NOT NULL,
    n BIGINT NOT NULL,
    shard SMALLINT NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, outcome, shard)
);

CREATE TABLE IF NOT EXISTS {hub_control_numbers} (
    partner TEXT PRIMARY KEY,
    n BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS {hub_acknowledgments} (
    id BIGSERIAL PRIMARY KEY,
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    duplicate BOOLEAN NOT NULL,
    partner TEXT NOT NULL,
    control_number TEXT NOT NULL,
    outbox_key TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (partner, control_number),
    UNIQUE (consumer, source, message_id, partner, control_number)
);

CREATE TABLE IF NOT EXISTS {hub_answers} (
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    delivery TEXT NOT NULL,
    answer TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, source, message_id, delivery)
);

CREATE TABLE IF NOT EXISTS {console_audit} (
    id BIGSERIAL PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL DEFAULT now(),
    who TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    result TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS {received_index} ON {table} (consumer, received_at DESC);

CREATE INDEX IF NOT EXISTS {status_index} ON {table} (consumer, status, received_at DESC);

CREATE INDEX IF NOT EXISTS {control_index} ON {table} (consumer, message_id);

CREATE INDEX IF NOT EXISTS {invoice_number_index} ON {invoices} (number);

CREATE INDEX IF NOT EXISTS {invoice_message_index} ON {invoices} (consumer, source, message_id)
