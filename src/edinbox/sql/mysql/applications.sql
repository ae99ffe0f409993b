-- The applications' versions (`edinbox.Application`): one row per application, keyed by its name, in a table beside
-- the journal that the first application's `create_schema()` makes (a journal with no application has none).

-- name: applications_create
CREATE TABLE IF NOT EXISTS {edinbox_applications} (
    name VARCHAR(63) NOT NULL PRIMARY KEY,
    version INTEGER NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4

-- name: applications_seed
INSERT IGNORE INTO {edinbox_applications} (name, version) VALUES (%(name)s, %(version)s)

-- name: applications_version
SELECT version FROM {edinbox_applications} WHERE name = %(name)s

-- name: applications_set
UPDATE {edinbox_applications} SET version = %(version)s WHERE name = %(name)s
