-- The outbox beside the journal: messages published inside an inbox (or the caller's) transaction, sent by a
-- relay after the commit. `{outbox}` is `<journal>_outbox`; a row is unsent until `sent_at` or `parked_at` is set.

-- name: outbox_create
CREATE TABLE IF NOT EXISTS {outbox} (
    id BIGSERIAL PRIMARY KEY,
    destination TEXT NOT NULL,
    key TEXT NOT NULL,
    payload BYTEA NOT NULL,
    headers TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at TIMESTAMPTZ,
    parked_at TIMESTAMPTZ,
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
-- the notification is delivered at commit (never for a rolled-back transaction) and wakes the relays
WITH added AS (
    INSERT INTO {outbox} (destination, key, payload, headers)
    VALUES (%(destination)s, %(key)s, %(payload)s, %(headers)s)
    RETURNING id
)
SELECT pg_notify('edinbox_outbox', {outbox_name}) FROM added

-- name: outbox_claim
-- the oldest unsent rows whose (destination, key) has no older unsent row: order per key holds across relays,
-- since a row another relay holds (locked, still unsent) keeps the next row of its key out of this claim
SELECT id, destination, key, payload, headers FROM {outbox} AS o
WHERE sent_at IS NULL AND parked_at IS NULL
    AND NOT EXISTS (
        SELECT 1 FROM {outbox} AS p
        WHERE p.destination = o.destination AND p.key = o.key AND p.id < o.id
            AND p.sent_at IS NULL AND p.parked_at IS NULL
    )
ORDER BY id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: outbox_mark_sent
-- every row a pass sent, in one statement: the ids as a JSON array
UPDATE {outbox} SET sent_at = now()
WHERE id IN (SELECT jsonb_array_elements_text(%(ids)s::jsonb)::bigint) AND sent_at IS NULL

-- name: outbox_park
UPDATE {outbox} SET parked_at = now(), reason = %(reason)s WHERE id = %(id)s AND sent_at IS NULL

-- name: outbox_stats
SELECT count(*) FILTER (WHERE sent_at IS NULL AND parked_at IS NULL),
    count(*) FILTER (WHERE parked_at IS NOT NULL),
    count(*) FILTER (WHERE sent_at IS NOT NULL),
    extract(epoch FROM now() - min(created_at) FILTER (WHERE sent_at IS NULL AND parked_at IS NULL))::float8
FROM {outbox}

-- name: outbox_rows
SELECT id, destination, key, created_at, sent_at, parked_at, reason FROM {outbox}
WHERE key = %(key)s
ORDER BY id

-- name: outbox_listen
LISTEN edinbox_outbox

-- name: outbox_purge_batch
DELETE FROM {outbox}
WHERE id IN (
    SELECT id FROM {outbox}
    WHERE sent_at < now() - %(older_than)s
    LIMIT %(batch_size)s
    FOR UPDATE SKIP LOCKED
)

-- name: outbox_destinations
-- every destination the outbox names (migration 9 rewrites those that still hold a password)
SELECT DISTINCT destination FROM {outbox}

-- name: outbox_set_destination
UPDATE {outbox} SET destination = %(new)s WHERE destination = %(old)s
