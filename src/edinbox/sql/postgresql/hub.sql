-- The hub's tables beside the journal (same schema): invoices, parked payloads, outcome counters.

-- name: create_invoices
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
)

-- name: create_rejected
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
)

-- name: create_counters
CREATE TABLE IF NOT EXISTS {counters} (
    consumer TEXT NOT NULL,
    outcome TEXT NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (consumer, outcome)
)
