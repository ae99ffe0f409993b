-- The two inserts that start a delivery are server-side prepared once per connection (PREPARE ... AS, with
-- positional parameters) and run as "BEGIN; EXECUTE name(...)" in one round trip.

-- name: insert_processed
INSERT INTO {table} AS t (consumer, source, message_id, fingerprint, status, attempts, received_at, settled_at,
    trace)
VALUES ($1, $2, $3, $4, 'processed', 1, now(), now(), $5::text)
ON CONFLICT DO NOTHING

-- name: insert_claimed
INSERT INTO {table} AS t (consumer, source, message_id, fingerprint, status, attempts, lease_until, received_at)
VALUES ($1, $2, $3, $4, 'in_progress', 1, now() + $5::interval, now())
ON CONFLICT DO NOTHING

-- name: find_for_update
-- clock_timestamp(), not now(): a row another transaction committed while this one waited for it (a failure with an
-- immediate retry) must not look early to a clock that stopped when this transaction began
SELECT status, fingerprint, attempts, lease_until, retry_at, trace, clock_timestamp()
FROM {table}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
FOR UPDATE

-- name: retry
UPDATE {table}
SET status = 'processed', fingerprint = %(fingerprint)s, attempts = attempts + 1, lease_until = NULL,
    settled_at = now(), payload = NULL, retry_at = NULL, trace = %(trace)s
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: reclaim
UPDATE {table}
SET status = 'in_progress', fingerprint = %(fingerprint)s, attempts = attempts + 1,
    lease_until = now() + %(lease)s, settled_at = NULL, payload = NULL, retry_at = NULL
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
RETURNING attempts, conflict_fingerprint

-- The claim's own statements (extend, release_claim, complete, fail_claim) change the row only while it is still
-- that claim: in progress with the attempt and the fingerprint it took. The attempt alone is no identity: a
-- requeue resets it, and the requeued copy of a conflict is claimed again at attempt 1, with its own fingerprint.
-- name: extend
UPDATE {table}
SET lease_until = now() + %(lease)s
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
    AND status = 'in_progress' AND attempts = %(attempts)s AND fingerprint = %(fingerprint)s

-- name: release_claim
UPDATE {table}
SET status = 'failed', attempts = attempts - 1, lease_until = NULL
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
    AND status = 'in_progress' AND attempts = %(attempts)s AND fingerprint = %(fingerprint)s

-- name: complete
UPDATE {table}
SET status = 'processed', settled_at = now(), lease_until = NULL, trace = %(trace)s
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
    AND status = 'in_progress' AND attempts = %(attempts)s AND fingerprint = %(fingerprint)s

-- name: fail_claim
UPDATE {table}
SET status = CASE WHEN attempts >= %(max_attempts)s THEN 'dead' ELSE 'failed' END,
    payload = CASE WHEN attempts >= %(max_attempts)s THEN %(payload)s END,
    last_error = %(error)s, lease_until = NULL, retry_at = now() + %(delay)s::interval
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
    AND status = 'in_progress' AND attempts = %(attempts)s AND fingerprint = %(fingerprint)s

-- name: record_failure
-- %(delay)s: how long the row waits before its next attempt (`Retry`), NULL when this failure parks it
INSERT INTO {table} AS t (consumer, source, message_id, fingerprint, status, attempts, last_error, payload, retry_at)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(fingerprint)s, %(first_status)s::text, 1, %(error)s,
    CASE WHEN %(first_status)s::text = 'dead' THEN %(payload)s::bytea END, now() + %(delay)s::interval)
ON CONFLICT (consumer, source, message_id) DO UPDATE
SET attempts = t.attempts + 1,
    status = CASE WHEN t.attempts + 1 >= %(max_attempts)s THEN 'dead' ELSE 'failed' END,
    payload = CASE WHEN t.attempts + 1 >= %(max_attempts)s THEN %(payload)s::bytea END,
    fingerprint = excluded.fingerprint, last_error = excluded.last_error, lease_until = NULL,
    retry_at = excluded.retry_at
WHERE t.status IN ('failed', 'requeued')

-- name: park
UPDATE {table}
SET status = 'dead', last_error = %(error)s, payload = %(payload)s, lease_until = NULL, settled_at = NULL,
    retry_at = NULL
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: record_conflict
UPDATE {table}
SET status = 'conflict', conflicts = conflicts + 1, conflict_fingerprint = %(fingerprint)s,
    conflict_payload = %(payload)s, last_conflict_at = now()
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: insert_batch
INSERT INTO {table} AS t (consumer, source, message_id, fingerprint, status, attempts, received_at, settled_at,
    trace)
SELECT %(consumer)s, u.s, u.m, u.f, 'processed', 1, now(), now(), u.t
FROM unnest(%(sources)b::text[], %(message_ids)b::text[], %(fingerprints)b::text[], %(traces)b::text[]) AS u (s, m, f, t)
ON CONFLICT DO NOTHING
RETURNING source, message_id

-- name: insert_fresh_batch
-- insert_batch as a plain INSERT (one search of the unique index per key); a unique violation falls back to it
INSERT INTO {table} (consumer, source, message_id, fingerprint, status, attempts, received_at, settled_at, trace)
SELECT %(consumer)s, u.s, u.m, u.f, 'processed', 1, now(), now(), u.t
FROM unnest(%(sources)b::text[], %(message_ids)b::text[], %(fingerprints)b::text[], %(traces)b::text[]) AS u (s, m, f, t)

-- name: find_batch_for_update
SELECT t.source, t.message_id, t.status, t.fingerprint, t.attempts, t.lease_until, t.retry_at, t.trace, clock_timestamp()
FROM {table} AS t
JOIN unnest(%(sources)b::text[], %(message_ids)b::text[]) AS u (s, m) ON t.source = u.s AND t.message_id = u.m
WHERE t.consumer = %(consumer)s
FOR UPDATE OF t

-- name: get
SELECT consumer, source, message_id, fingerprint, status, attempts, last_error, lease_until, received_at,
    settled_at, payload, conflicts, conflict_fingerprint, conflict_payload, last_conflict_at, retry_at, trace
FROM {table}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: records
SELECT consumer, source, message_id, fingerprint, status, attempts, last_error, lease_until, received_at,
    settled_at, payload, conflicts, conflict_fingerprint, conflict_payload, last_conflict_at, retry_at, trace
FROM {table}
WHERE consumer = %(consumer)s AND (%(status)s::text IS NULL OR status = %(status)s::text)
ORDER BY received_at DESC, source, message_id
LIMIT %(limit)s

-- name: stats
SELECT status, count(*) FROM {table} WHERE consumer = %(consumer)s GROUP BY status

-- name: oldest
SELECT status, min(received_at) FROM {table} WHERE consumer = %(consumer)s GROUP BY status

-- name: requeue
UPDATE {table}
SET status = 'requeued', attempts = 0, lease_until = NULL, settled_at = NULL, retry_at = NULL,
    fingerprint = CASE WHEN status = 'conflict' THEN conflict_fingerprint ELSE fingerprint END
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
    AND status IN ('dead', 'conflict')

-- name: forget
DELETE FROM {table} WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: purge_lock
SELECT pg_try_advisory_lock(hashtextextended(%(lock)s, 0))

-- name: purge_unlock
SELECT pg_advisory_unlock(hashtextextended(%(lock)s, 0))

-- name: purge_batch
DELETE FROM {table}
WHERE ctid IN (
    SELECT ctid FROM {table}
    WHERE consumer = %(consumer)s AND status = 'processed' AND settled_at < now() - %(older_than)s
    LIMIT %(batch_size)s
    FOR UPDATE SKIP LOCKED
)

-- name: journal_totals
-- what `edinbox stats` says of the journal itself: this consumer's oldest row, and the rows of every consumer
SELECT (SELECT min(received_at) FROM {table} WHERE consumer = %(consumer)s), (SELECT count(*) FROM {table})

-- name: table_bytes
SELECT pg_total_relation_size({table_name}::regclass)

-- name: purgeable
SELECT count(*) FROM {table}
WHERE consumer = %(consumer)s AND status = 'processed' AND settled_at < now() - %(older_than)s
