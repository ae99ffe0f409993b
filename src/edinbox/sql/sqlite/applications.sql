-- The applications' versions (`edinbox.Application`): one row per application, keyed by its name, in a table beside
-- the journal that the first application's `create_schema()` makes (a journal with no application has none).

-- name: applications_create
CREATE TABLE IF NOT EXISTS {edinbox_applications} (name TEXT PRIMARY KEY, version INTEGER NOT NULL)

-- name: applications_seed
INSERT INTO {edinbox_applications} (name, version) VALUES (:name, :version) ON CONFLICT (name) DO NOTHING

-- name: applications_version
SELECT version FROM {edinbox_applications} WHERE name = :name

-- name: applications_set
UPDATE {edinbox_applications} SET version = :version WHERE name = :name
