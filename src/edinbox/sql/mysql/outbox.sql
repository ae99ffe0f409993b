-- The outbox beside the journal: messages published inside an inbox (or the caller's) transaction, sent by a
-- relay after the commit. `{outbox}` is `<journal>_outbox`; a row is unsent until `sent_at` or `parked_at` is set.
-- MariaDB has no LISTEN: relays poll. destination and key are VARCHAR(255) (utf8mb4_bin, byte-exact) so that the
-- pending index fits InnoDB's 3,072-byte limit; a longer one is a DataError. Times are DATETIME(6) in UTC.

-- name: outbox_create
CREATE TABLE IF NOT EXISTS {outbox} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    destination VARCHAR(255) COLLATE utf8mb4_bin NOT NULL,
    `key` VARCHAR(255) COLLATE utf8mb4_bin NOT NULL,
    payload LONGBLOB NOT NULL,
    headers LONGTEXT,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    sent_at DATETIME(6),
    parked_at DATETIME(6),
    reason LONGTEXT
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: outbox_create_pending
CREATE INDEX {outbox_pending} ON {outbox} (destination, `key`, id)

-- name: outbox_create_unsent
-- the unsent rows in id order (no partial index on MariaDB: a seek on sent_at and parked_at both NULL): the claim
-- reads them alone, never the sent rows kept until the purge
CREATE INDEX {outbox_unsent} ON {outbox} (sent_at, parked_at, id)

-- name: outbox_insert
INSERT INTO {outbox} (destination, `key`, payload, headers)
VALUES (%(destination)s, %(key)s, %(payload)s, %(headers)s)

-- name: outbox_claim
-- the first step of a claim, a plain read that locks nothing: the oldest unsent rows after id `after` whose
-- (destination, key) has no older unsent row (the next row of each key, in id order). One locking read through the
-- unsent rows' index kept every row it passed over locked until the claim's send ended, even at READ COMMITTED
-- (MariaDB 10.11 releases a row that fails the WHERE only when it was read on the primary key): the next rows of the
-- keys another relay held, which no relay could claim once that relay had marked the rows before them; and at
-- REPEATABLE READ the gap after the last unsent row, where every publish inserts: the publishers waited for the send
SELECT id FROM {outbox} AS o
WHERE sent_at IS NULL AND parked_at IS NULL AND id > %(after)s
    AND NOT EXISTS (
        SELECT 1 FROM {outbox} AS p
        WHERE p.destination = o.destination AND p.`key` = o.`key` AND p.id < o.id
            AND p.sent_at IS NULL AND p.parked_at IS NULL
    )
ORDER BY id
LIMIT %(limit)s

-- name: outbox_lock
-- the second step: those rows locked on the primary key alone (`IN (%(ids)s)`, one bound parameter per id), passing
-- over the ones another relay holds; a row sent or parked since the first step is left out (the locking read sees
-- the latest committed row), and its lock is released at once at READ COMMITTED. Order per key holds: a row is a
-- candidate only once every older row of its key is sent or parked, and a candidate another relay holds is passed
-- over, so the next row of its key is no candidate until that relay has marked it
SELECT id, destination, `key`, payload, headers FROM {outbox} FORCE INDEX (PRIMARY)
WHERE id IN (%(ids)s) AND sent_at IS NULL AND parked_at IS NULL
ORDER BY id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: outbox_mark_sent
-- every row a pass sent, in one statement: `IN (%(ids)s)` is a list, one bound parameter per id (`Statements.bind`),
-- each sought on the primary key, so the UPDATE reads the relay's own rows alone. Ids in a JSON_TABLE subquery gave
-- no range to seek: the UPDATE scanned the whole outbox, or (few rows unsent) read the unsent rows' index in a first
-- pass with locks and no semi-consistent read, waiting for each row another relay held (two relays marking at once
-- deadlocked); FORCE INDEX keeps the planner off that index, whatever its estimates. As a join (`UPDATE ... JOIN`)
-- it would lose semi-consistent read altogether.
UPDATE {outbox} FORCE INDEX (PRIMARY) SET sent_at = UTC_TIMESTAMP(6) WHERE id IN (%(ids)s) AND sent_at IS NULL

-- name: outbox_park
UPDATE {outbox} SET parked_at = UTC_TIMESTAMP(6), reason = %(reason)s WHERE id = %(id)s AND sent_at IS NULL

-- name: outbox_stats
SELECT COALESCE(SUM(sent_at IS NULL AND parked_at IS NULL), 0),
    COALESCE(SUM(parked_at IS NOT NULL), 0),
    COALESCE(SUM(sent_at IS NOT NULL), 0),
    TIMESTAMPDIFF(MICROSECOND, MIN(IF(sent_at IS NULL AND parked_at IS NULL, created_at, NULL)),
        UTC_TIMESTAMP(6)) / 1000000e0
FROM {outbox}

-- name: outbox_rows
SELECT id, destination, `key`, created_at, sent_at, parked_at, reason FROM {outbox}
WHERE `key` = %(key)s
ORDER BY id

-- name: outbox_purge_batch
DELETE FROM {outbox}
WHERE sent_at < UTC_TIMESTAMP(6) - INTERVAL %(older_than)s MICROSECOND
LIMIT %(batch_size)s

-- name: outbox_destinations
-- every destination the outbox names (migration 9 rewrites those that still hold a password)
SELECT DISTINCT destination FROM {outbox}

-- name: outbox_set_destination
UPDATE {outbox} SET destination = %(new)s WHERE destination = %(old)s
