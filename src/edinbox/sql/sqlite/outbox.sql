-- The outbox beside the journal: messages published inside an inbox (or the caller's) transaction, sent by a
-- relay after the commit. `{outbox}` is `<journal>_outbox`; a row is unsent until `sent_at` or `parked_at` is set.

-- name: outbox_create
CREATE TABLE IF NOT EXISTS {outbox} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    destination TEXT NOT NULL,
    key TEXT NOT NULL,
    payload BLOB NOT NULL,
    headers TEXT,
    created_at REAL NOT NULL,
    sent_at REAL,
    parked_at REAL,
    reason TEXT
)

-- name: outbox_create_pending
CREATE INDEX IF NOT EXISTS {outbox_pending} ON {outbox} (destination, key, id)
WHERE sent_at IS NULL AND parked_at IS NULL

-- name: outbox_create_unsent
-- the unsent rows in id order: the claim reads them alone, never the sent rows kept until the purge
CREATE INDEX IF NOT EXISTS {outbox_unsent} ON {outbox} (id)
WHERE sent_at IS NULL AND parked_at IS NULL

-- name: outbox_insert
INSERT INTO {outbox} (destination, key, payload, headers, created_at)
VALUES (:destination, :key, :payload, :headers, :now)

-- name: outbox_claim
-- the oldest unsent rows whose (destination, key) has no older unsent row (one relay at a time on SQLite)
SELECT id, destination, key, payload, headers FROM {outbox} AS o
WHERE sent_at IS NULL AND parked_at IS NULL
    AND NOT EXISTS (
        SELECT 1 FROM {outbox} AS p
        WHERE p.destination = o.destination AND p.key = o.key AND p.id < o.id
            AND p.sent_at IS NULL AND p.parked_at IS NULL
    )
ORDER BY id
LIMIT :limit

-- name: outbox_mark_sent
-- every row a pass sent, in one statement: the ids as a JSON array
UPDATE {outbox} SET sent_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND sent_at IS NULL

-- name: outbox_park
UPDATE {outbox} SET parked_at = :now, reason = :reason WHERE id = :id AND sent_at IS NULL

-- name: outbox_stats
SELECT count(*) FILTER (WHERE sent_at IS NULL AND parked_at IS NULL),
    count(*) FILTER (WHERE parked_at IS NOT NULL),
    count(*) FILTER (WHERE sent_at IS NOT NULL),
    :now - min(created_at) FILTER (WHERE sent_at IS NULL AND parked_at IS NULL)
FROM {outbox}

-- name: outbox_rows
SELECT id, destination, key, created_at, sent_at, parked_at, reason FROM {outbox}
WHERE key = :key
ORDER BY id

-- name: outbox_purge_batch
DELETE FROM {outbox}
WHERE id IN (
    SELECT id FROM {outbox}
    WHERE sent_at < :now - :older_than
    LIMIT :batch_size
)

-- name: outbox_destinations
-- every destination the outbox names (migration 9 rewrites those that still hold a password)
SELECT DISTINCT destination FROM {outbox}

-- name: outbox_set_destination
UPDATE {outbox} SET destination = :new WHERE destination = :old
