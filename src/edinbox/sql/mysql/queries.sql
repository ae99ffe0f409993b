-- The journal's statements on MariaDB. Key columns are VARBINARY: reads convert them back to text. Durations are
-- bound as microseconds. A section may hold several statements separated by ";" at the end of a line: they run in
-- order on one connection and the rows (or the row count) are those of the last one.

-- name: insert_processed
-- INSERT IGNORE: 1 affected row when inserted, 0 for a duplicate, whatever the connection's flags (ON DUPLICATE
-- KEY UPDATE with a no-op reports 1 for a duplicate on a CLIENT_FOUND_ROWS connection, as SQLAlchemy's). IGNORE
-- would turn a data error into a warning, but every value here is a validated key part (at most 512 bytes, in
-- VARBINARY(512)) or a fingerprint (LONGTEXT): the only error it can meet is the duplicate key itself.
-- The other columns take their defaults (`schema.sql`): status 'processed', attempts 1, received_at and settled_at
-- the statement's UTC_TIMESTAMP(6); trace is the settling attempt's traceparent (NULL when nothing is traced).
INSERT IGNORE INTO {table} (consumer, source, message_id, fingerprint, trace)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(fingerprint)s, %(trace)s)

-- name: insert_claimed
INSERT IGNORE INTO {table} (consumer, source, message_id, fingerprint, status, attempts, lease_until, received_at,
    settled_at)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(fingerprint)s, 'in_progress', 1,
    UTC_TIMESTAMP(6) + INTERVAL %(lease)s MICROSECOND, UTC_TIMESTAMP(6), NULL)

-- name: find_for_update
-- A duplicate insert leaves a shared lock on the row; a shared lock here too lets concurrent duplicates all read
-- it and settle as DUPLICATE without waiting on each other. Only a retry or a conflict writes the row: of two
-- such deliveries at once, MariaDB rolls one back (deadlock, a StoreError: not settled, redelivered).
SELECT status, fingerprint, attempts, lease_until, retry_at, trace, UTC_TIMESTAMP(6)
FROM {table}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
LOCK IN SHARE MODE

-- name: retry
UPDATE {table}
SET status = 'processed', fingerprint = %(fingerprint)s, attempts = attempts + 1, lease_until = NULL,
    settled_at = UTC_TIMESTAMP(6), payload = NULL, retry_at = NULL, trace = %(trace)s
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: reclaim
UPDATE {table}
SET status = 'in_progress', fingerprint = %(fingerprint)s, attempts = attempts + 1,
    lease_until = UTC_TIMESTAMP(6) + INTERVAL %(lease)s MICROSECOND, settled_at = NULL, payload = NULL,
    retry_at = NULL
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s;
SELECT attempts, conflict_fingerprint
FROM {table}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- The claim's own statements (extend, release_claim, complete, fail_claim) change the row only while it is still
-- that claim: in progress with the attempt and the fingerprint it took. The attempt alone is no identity: a
-- requeue resets it, and the requeued copy of a conflict is claimed again at attempt 1, with its own fingerprint.
-- name: extend
UPDATE {table}
SET lease_until = UTC_TIMESTAMP(6) + INTERVAL %(lease)s MICROSECOND
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
    AND status = 'in_progress' AND attempts = %(attempts)s AND fingerprint = %(fingerprint)s

-- name: release_claim
UPDATE {table}
SET status = 'failed', attempts = attempts - 1, lease_until = NULL
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
    AND status = 'in_progress' AND attempts = %(attempts)s AND fingerprint = %(fingerprint)s

-- name: complete
UPDATE {table}
SET status = 'processed', settled_at = UTC_TIMESTAMP(6), lease_until = NULL, trace = %(trace)s
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
    AND status = 'in_progress' AND attempts = %(attempts)s AND fingerprint = %(fingerprint)s

-- name: fail_claim
-- MariaDB assigns left to right and later assignments see earlier ones: payload is set before status changes.
UPDATE {table}
SET payload = CASE WHEN attempts >= %(max_attempts)s THEN %(payload)s END,
    status = CASE WHEN attempts >= %(max_attempts)s THEN 'dead' ELSE 'failed' END,
    last_error = %(error)s, lease_until = NULL, retry_at = UTC_TIMESTAMP(6) + INTERVAL %(delay)s MICROSECOND
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
    AND status = 'in_progress' AND attempts = %(attempts)s AND fingerprint = %(fingerprint)s

-- name: record_failure
-- Only a 'failed' or 'requeued' row counts another attempt (as PostgreSQL's ON CONFLICT ... WHERE): every
-- assignment keeps the old value otherwise. The attempts assignment comes before the status one (which reads the
-- new count and the old status), after the others (which read the old count). VALUES(column), not MariaDB's
-- VALUE(): both servers read it in ON DUPLICATE KEY UPDATE (MySQL 8 has no VALUE()).
-- %(delay)s: how long the row waits before its next attempt (`Retry`), NULL when this failure parks it.
INSERT INTO {table} (consumer, source, message_id, fingerprint, status, attempts, last_error, payload, received_at,
    settled_at, retry_at)
VALUES (%(consumer)s, %(source)s, %(message_id)s, %(fingerprint)s, %(first_status)s, 1, %(error)s,
    CASE WHEN %(first_status)s = 'dead' THEN %(payload)s END, UTC_TIMESTAMP(6), NULL,
    UTC_TIMESTAMP(6) + INTERVAL %(delay)s MICROSECOND)
ON DUPLICATE KEY UPDATE
    payload = IF(status IN ('failed', 'requeued'), IF(attempts + 1 >= %(max_attempts)s, %(payload)s, NULL), payload),
    fingerprint = IF(status IN ('failed', 'requeued'), VALUES(fingerprint), fingerprint),
    last_error = IF(status IN ('failed', 'requeued'), VALUES(last_error), last_error),
    lease_until = IF(status IN ('failed', 'requeued'), NULL, lease_until),
    retry_at = IF(status IN ('failed', 'requeued'), VALUES(retry_at), retry_at),
    attempts = IF(status IN ('failed', 'requeued'), attempts + 1, attempts),
    status = IF(status IN ('failed', 'requeued'), IF(attempts >= %(max_attempts)s, 'dead', 'failed'), status)

-- name: park
UPDATE {table}
SET status = 'dead', last_error = %(error)s, payload = %(payload)s, lease_until = NULL, settled_at = NULL,
    retry_at = NULL
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: record_conflict
UPDATE {table}
SET status = 'conflict', conflicts = conflicts + 1, conflict_fingerprint = %(fingerprint)s,
    conflict_payload = %(payload)s, last_conflict_at = UTC_TIMESTAMP(6)
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: insert_batch
-- INSERT IGNORE ... RETURNING (MariaDB 10.5+) returns exactly the rows it inserted. MySQL has no RETURNING: there
-- the store runs insert_processed once per message instead (the store's `returning`, detected at connect).
-- IGNORE is safe here: every value is a validated key (at most 512 bytes, no NUL) or a fingerprint in a LONGTEXT
-- column, so the only error it can turn into a warning is the duplicate key itself.
-- status, attempts and the timestamps take their defaults, as in insert_processed.
-- %(rows)s: the batch's rows written out by the store, "(consumer, source, message_id, fingerprint, trace), ...", each
-- value escaped by the driver (the server parses them faster than it reads them out of one JSON parameter); trace is
-- the traceparent of the span settling that message (NULL when nothing is traced)
INSERT IGNORE INTO {table} (consumer, source, message_id, fingerprint, trace) VALUES %(rows)s
RETURNING CONVERT(source USING utf8mb4), CONVERT(message_id USING utf8mb4)

-- name: find_batch_for_update
-- shared, as find_for_update; the batch's [source, message_id, fingerprint, trace] arrays, as insert_batch reads them
SELECT CONVERT(t.source USING utf8mb4), CONVERT(t.message_id USING utf8mb4), t.status, t.fingerprint, t.attempts,
    t.lease_until, t.retry_at, t.trace, UTC_TIMESTAMP(6)
FROM {table} AS t
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
    s VARCHAR(512) CHARACTER SET utf8mb4 PATH '$[0]',
    m VARCHAR(512) CHARACTER SET utf8mb4 PATH '$[1]'
)) AS j ON t.source = CONVERT(j.s USING binary) AND t.message_id = CONVERT(j.m USING binary)
WHERE t.consumer = %(consumer)s
LOCK IN SHARE MODE

-- name: get
SELECT CONVERT(consumer USING utf8mb4), CONVERT(source USING utf8mb4), CONVERT(message_id USING utf8mb4),
    fingerprint, status, attempts, last_error, lease_until, received_at, settled_at, payload, conflicts,
    conflict_fingerprint, conflict_payload, last_conflict_at, retry_at, trace
FROM {table}
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: records
SELECT CONVERT(consumer USING utf8mb4), CONVERT(source USING utf8mb4), CONVERT(message_id USING utf8mb4),
    fingerprint, status, attempts, last_error, lease_until, received_at, settled_at, payload, conflicts,
    conflict_fingerprint, conflict_payload, last_conflict_at, retry_at, trace
FROM {table}
WHERE consumer = %(consumer)s AND (%(status)s IS NULL OR status = %(status)s)
ORDER BY received_at DESC, source, message_id
LIMIT %(limit)s

-- name: stats
SELECT status, count(*) FROM {table} WHERE consumer = %(consumer)s GROUP BY status

-- name: oldest
SELECT status, min(received_at) FROM {table} WHERE consumer = %(consumer)s GROUP BY status

-- name: requeue
UPDATE {table}
SET fingerprint = CASE WHEN status = 'conflict' THEN conflict_fingerprint ELSE fingerprint END,
    status = 'requeued', attempts = 0, lease_until = NULL, settled_at = NULL, retry_at = NULL
WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s
    AND status IN ('dead', 'conflict')

-- name: forget
DELETE FROM {table} WHERE consumer = %(consumer)s AND source = %(source)s AND message_id = %(message_id)s

-- name: purge_lock
SELECT GET_LOCK(%(lock)s, 0)

-- name: purge_unlock
SELECT RELEASE_LOCK(%(lock)s)

-- name: purge_batch
-- One purger at a time (purge_lock); the rows it deletes are settled long ago, so nothing else holds them.
DELETE FROM {table}
WHERE consumer = %(consumer)s AND status = 'processed'
    AND settled_at < UTC_TIMESTAMP(6) - INTERVAL %(older_than)s MICROSECOND
LIMIT %(batch_size)s

-- name: savepoint
SAVEPOINT edinbox

-- name: release
RELEASE SAVEPOINT edinbox

-- name: rollback_savepoint
ROLLBACK TO SAVEPOINT edinbox

-- name: session
-- Run on every connection the store opens. Strict mode, whatever the server's default: a value too long, out of
-- range or not a date is an error (DataError: the message is parked), never truncated or zeroed with a warning.
-- READ COMMITTED: no gap locks from the purge's range delete or the handlers' own range reads; the journal's own
-- decisions rest on locking reads, right at any level (see the README on REPEATABLE READ). No notes: "already
-- exists" from the idempotent DDL would cost asyncmy a SHOW WARNINGS round trip and a log line each.
SET SESSION sql_notes = 0;
SET SESSION sql_mode = 'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ZERO_DATE,NO_ZERO_IN_DATE,NO_ENGINE_SUBSTITUTION';
SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED

-- name: max_packet
-- The most the server reads in one packet (a statement and its values): a longer statement is refused (1153) and
-- the connection closed, so the store measures a statement binding big values first and refuses it itself.
SELECT @@max_allowed_packet

-- name: journal_totals
-- what `edinbox stats` says of the journal itself: this consumer's oldest row, and the rows of every consumer
SELECT (SELECT min(received_at) FROM {table} WHERE consumer = %(consumer)s), (SELECT count(*) FROM {table})

-- name: table_bytes
SELECT data_length + index_length FROM information_schema.tables
WHERE table_schema = {schema_name} AND table_name = {table_name}

-- name: purgeable
SELECT count(*) FROM {table}
WHERE consumer = %(consumer)s AND status = 'processed'
    AND settled_at < UTC_TIMESTAMP(6) - INTERVAL %(older_than)s MICROSECOND
