-- The hub's tables beside the journal: invoices, parked payloads, outcome counters. Money is TEXT (exact).

-- name: create_invoices
CREATE TABLE IF NOT EXISTS {invoices} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    seller TEXT NOT NULL,
    number TEXT NOT NULL,
    kind TEXT NOT NULL,
    issue_date TEXT NOT NULL,
    buyer TEXT NOT NULL,
    currency TEXT,
    total TEXT,
    tax_total TEXT,
    lines INTEGER NOT NULL,
    consumer TEXT NOT NULL,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    CONSTRAINT invoices_key UNIQUE (seller, number, kind, issue_date)
)

-- name: create_rejected
CREATE TABLE IF NOT EXISTS {rejected} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    consumer TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    delivery TEXT NOT NULL,
    reason TEXT NOT NULL,
    payload BLOB NOT NULL,
    deliveries INTEGER NOT NULL DEFAULT 1,
    rejected_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (consumer, fingerprint)
)

-- name: create_counters
CREATE TABLE IF NOT EXISTS {counters} (
    consumer TEXT NOT NULL,
    outcome TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (consumer, outcome)
)
