-- name: insert_processed
INSERT INTO {table} (consumer, source, message_id, fingerprint, status, attempts, received_at, settled_at, trace)
VALUES (:consumer, :source, :message_id, :fingerprint, 'processed', 1, :now, :now, :trace)
ON CONFLICT DO NOTHING
RETURNING 1

-- name: insert_claimed
INSERT INTO {table} (consumer, source, message_id, fingerprint, status, attempts, lease_until, received_at)
VALUES (:consumer, :source, :message_id, :fingerprint, 'in_progress', 1, :now + :lease, :now)
ON CONFLICT DO NOTHING
RETURNING 1

-- name: find_for_update
SELECT status, fingerprint, attempts, lease_until, retry_at, trace, :now
FROM {table}
WHERE consumer = :consumer AND source = :source AND message_id = :message_id

-- name: retry
UPDATE {table}
SET status = 'processed', fingerprint = :fingerprint, attempts = attempts + 1, lease_until = NULL,
    settled_at = :now, payload = NULL, retry_at = NULL, trace = :trace
WHERE consumer = :consumer AND source = :source AND message_id = :message_id

-- name: reclaim
UPDATE {table}
SET status = 'in_progress', fingerprint = :fingerprint, attempts = attempts + 1,
    lease_until = :now + :lease, settled_at = NULL, payload = NULL, retry_at = NULL
WHERE consumer = :consumer AND source = :source AND message_id = :message_id
RETURNING attempts, conflict_fingerprint

-- The claim's own statements (extend, release_claim, complete, fail_claim) change the row only while it is still
-- that claim: in progress with the attempt and the fingerprint it took. The attempt alone is no identity: a
-- requeue resets it, and the requeued copy of a conflict is claimed again at attempt 1, with its own fingerprint.
-- name: extend
UPDATE {table}
SET lease_until = :now + :lease
WHERE consumer = :consumer AND source = :source AND message_id = :message_id
    AND status = 'in_progress' AND attempts = :attempts AND fingerprint = :fingerprint

-- name: release_claim
UPDATE {table}
SET status = 'failed', attempts = attempts - 1, lease_until = NULL
WHERE consumer = :consumer AND source = :source AND message_id = :message_id
    AND status = 'in_progress' AND attempts = :attempts AND fingerprint = :fingerprint

-- name: complete
UPDATE {table}
SET status = 'processed', settled_at = :now, lease_until = NULL, trace = :trace
WHERE consumer = :consumer AND source = :source AND message_id = :message_id
    AND status = 'in_progress' AND attempts = :attempts AND fingerprint = :fingerprint

-- name: fail_claim
UPDATE {table}
SET status = CASE WHEN attempts >= :max_attempts THEN 'dead' ELSE 'failed' END,
    payload = CASE WHEN attempts >= :max_attempts THEN :payload END,
    last_error = :error, lease_until = NULL, retry_at = :now + :delay
WHERE consumer = :consumer AND source = :source AND message_id = :message_id
    AND status = 'in_progress' AND attempts = :attempts AND fingerprint = :fingerprint

-- name: record_failure
-- :delay: how long the row waits before its next attempt (`Retry`), NULL when this failure parks it
INSERT INTO {table} AS t (consumer, source, message_id, fingerprint, status, attempts, last_error, payload,
    received_at, retry_at)
VALUES (:consumer, :source, :message_id, :fingerprint, :first_status, 1, :error,
    CASE WHEN :first_status = 'dead' THEN :payload END, :now, :now + :delay)
ON CONFLICT (consumer, source, message_id) DO UPDATE
SET attempts = t.attempts + 1,
    status = CASE WHEN t.attempts + 1 >= :max_attempts THEN 'dead' ELSE 'failed' END,
    payload = CASE WHEN t.attempts + 1 >= :max_attempts THEN :payload END,
    fingerprint = excluded.fingerprint, last_error = excluded.last_error, lease_until = NULL,
    retry_at = excluded.retry_at
WHERE t.status IN ('failed', 'requeued')

-- name: park
UPDATE {table}
SET status = 'dead', last_error = :error, payload = :payload, lease_until = NULL, settled_at = NULL, retry_at = NULL
WHERE consumer = :consumer AND source = :source AND message_id = :message_id

-- name: record_conflict
UPDATE {table}
SET status = 'conflict', conflicts = conflicts + 1, conflict_fingerprint = :fingerprint,
    conflict_payload = :payload, last_conflict_at = :now
WHERE consumer = :consumer AND source = :source AND message_id = :message_id

-- name: insert_batch
INSERT INTO {table} (consumer, source, message_id, fingerprint, status, attempts, received_at, settled_at, trace)
SELECT :consumer, j.value ->> 0, j.value ->> 1, j.value ->> 2, 'processed', 1, :now, :now, j.value ->> 3
FROM json_each(:batch) AS j
WHERE true
ON CONFLICT DO NOTHING
RETURNING source, message_id

-- name: find_batch_for_update
-- CROSS JOIN keeps the batch's keys as the outer loop, so each is one search of the unique index; with a plain
-- JOIN SQLite scans every row of the consumer and reads the JSON for each (a cost that grows with the journal).
-- The batch's [source, message_id, fingerprint, trace] arrays, as insert_batch reads them: the first two are the key.
SELECT t.source, t.message_id, t.status, t.fingerprint, t.attempts, t.lease_until, t.retry_at, t.trace, :now
FROM json_each(:batch) AS j
CROSS JOIN {table} AS t
WHERE t.consumer = :consumer AND t.source = j.value ->> 0 AND t.message_id = j.value ->> 1

-- name: get
SELECT consumer, source, message_id, fingerprint, status, attempts, last_error, lease_until, received_at,
    settled_at, payload, conflicts, conflict_fingerprint, conflict_payload, last_conflict_at, retry_at, trace
FROM {table}
WHERE consumer = :consumer AND source = :source AND message_id = :message_id

-- name: records
SELECT consumer, source, message_id, fingerprint, status, attempts, last_error, lease_until, received_at,
    settled_at, payload, conflicts, conflict_fingerprint, conflict_payload, last_conflict_at, retry_at, trace
FROM {table}
WHERE consumer = :consumer AND (:status IS NULL OR status = :status)
ORDER BY received_at DESC, source, message_id
LIMIT :limit

-- name: stats
SELECT status, count(*) FROM {table} WHERE consumer = :consumer GROUP BY status

-- name: oldest
SELECT status, min(received_at) FROM {table} WHERE consumer = :consumer GROUP BY status

-- name: requeue
UPDATE {table}
SET status = 'requeued', attempts = 0, lease_until = NULL, settled_at = NULL, retry_at = NULL,
    fingerprint = CASE WHEN status = 'conflict' THEN conflict_fingerprint ELSE fingerprint END
WHERE consumer = :consumer AND source = :source AND message_id = :message_id
    AND status IN ('dead', 'conflict')

-- name: forget
DELETE FROM {table} WHERE consumer = :consumer AND source = :source AND message_id = :message_id

-- name: purge_batch
DELETE FROM {table}
WHERE rowid IN (
    SELECT rowid FROM {table}
    WHERE consumer = :consumer AND status = 'processed' AND settled_at < :now - :older_than
    LIMIT :batch_size
)

-- name: journal_totals
-- what `edinbox stats` says of the journal itself: this consumer's oldest row, and the rows of every consumer
SELECT (SELECT min(received_at) FROM {table} WHERE consumer = :consumer), (SELECT count(*) FROM {table})

-- name: table_bytes
SELECT sum(pgsize) FROM dbstat WHERE name = {table_name}

-- name: purgeable
SELECT count(*) FROM {table}
WHERE consumer = :consumer AND status = 'processed' AND settled_at < :now - :older_than
