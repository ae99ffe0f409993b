-- Migrations of the journal: the queries of version N are named `v<N>_<what>` and run in file order, under the
-- schema's named lock (GET_LOCK), when `migrate()` takes a journal from version N-1 to N. MariaDB commits each
-- DDL statement on its own: a step's DDL is applied before the version row changes, so a step must hold when it
-- runs again after a failure (MODIFY to the same definition does).
-- `_core.MIGRATIONS` lists the versions; DEVELOPERS.md says how to add one. Never edit a released step.

-- name: v2_status_check
-- version 1 declared the status CHECK on the column (MariaDB names it after the column): MODIFY replaces it
ALTER TABLE {table} MODIFY status VARCHAR(16) NOT NULL
    CHECK (status IN ('processed', 'in_progress', 'failed', 'dead', 'conflict', 'requeued'))
