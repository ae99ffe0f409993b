"""The applications' schemas on the journal's store (`edinbox.Application`): created, migrated and verified after the
journal's, in the same transaction, each at the version its row in `edinbox_applications` records (async; the sync
twin is generated from this module)."""
# sync-doc: The applications' schemas on the journal's store (`edinbox.Application`): created, migrated and
# sync-doc: verified after the journal's, in the same transaction, each at the version its row in
# sync-doc: `edinbox_applications` records.

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from edinbox._application import Application
from edinbox._errors import SchemaError
from edinbox.stores._queries import application_steps

__all__ = ["VERSIONS", "create_applications", "migrate_applications", "verify_applications"]

Params = Mapping[str, Any]
Where = Callable[[str], Params]
"""The parameters of the store's `relation` query for a table beside the journal, by its name."""

VERSIONS = "edinbox_applications"
"""The table beside the journal that keeps each application's version, one row per application."""

_MIGRATE = "run `edinbox migrate` (Inbox.migrate()) to upgrade it"


async def _found(unit: Any, relation: Params) -> bool:
    """Whether the `relation` query finds the table (no row, or a NULL where the database looks a name up)."""
    rows = await unit.fetch("relation", relation)
    return bool(rows) and rows[0][0] is not None


async def installed(unit: Any, application: Application, *, where: Where) -> tuple[int | None, bool]:
    """The version of `application`'s schema beside the journal (None: it has none) and whether it has a version row
    (False for tables made before it kept one, taken as version 1)."""
    if await _found(unit, where(VERSIONS)):
        rows = await unit.fetch("applications_version", {"name": application.name})
        if rows:
            return int(rows[0][0]), True
    if application.legacy and await _found(unit, where(application.legacy)):
        return 1, False
    return None, False


def _check(application: Application, found: int) -> None:
    """SchemaError unless `found` is the application's version (older: migrate; newer: a later edinbox made it)."""
    if found < application.version:
        raise SchemaError(
            f"application {application.name!r} is at schema version {found}, this edinbox needs "
            f"{application.version}: {_MIGRATE}"
        )
    if found > application.version:
        raise SchemaError(
            f"application {application.name!r} is at schema version {found}, newer than this edinbox's "
            f"{application.version}: upgrade edinbox"
        )


async def create_applications(unit: Any, applications: Sequence[Application], *, where: Where) -> None:
    """In the caller's transaction: each application's tables at its version (its `create` statements, run again on
    a complete one: they repair what is missing) and its version row; SchemaError before any of its statements runs
    when its schema is older or newer than this code's."""
    applications = [application for application in applications if application.tables]
    if not applications:
        return
    await unit.run("applications_create", {})
    for application in applications:
        found, _ = await installed(unit, application, where=where)
        if found is not None:
            _check(application, found)
        for name in application.create:
            await unit.run(name, {})
        await unit.run("applications_seed", {"name": application.name, "version": application.version})


async def migrate_applications(
    unit: Any, applications: Sequence[Application], *, dialect: str, where: Where
) -> dict[str, list[int]]:
    """In the caller's transaction: take each application found beside the journal to its version, step by step
    (its `v<N>_*` statements, then its version row); return the versions applied by application. An application
    that has no tables here is left alone: `migrate()` creates nothing of it."""
    applied: dict[str, list[int]] = {}
    for application in (application for application in applications if application.tables):
        found, recorded = await installed(unit, application, where=where)
        if found is None:
            continue
        if found > application.version:
            _check(application, found)
        if not recorded:  # tables made before the application kept a version: they are version 1
            await unit.run("applications_create", {})
            await unit.run("applications_seed", {"name": application.name, "version": found})
        steps = application_steps(dialect, application)
        later = [step for step in sorted(application.migrations) if found < step <= application.version]
        for step in later:
            if step not in steps:
                raise SchemaError(f"application {application.name!r} has no migration to version {step} for {dialect}")
            for name in steps[step]:
                await unit.run(name, {})
            await unit.run("applications_set", {"name": application.name, "version": step})
        applied[application.name] = later
    return applied


async def verify_applications(unit: Any, applications: Sequence[Application], *, where: Where) -> None:
    """SchemaError unless each application's schema is beside the journal at its version."""
    for application in (application for application in applications if application.tables):
        found, _ = await installed(unit, application, where=where)
        if found is None:
            raise SchemaError(
                f"application {application.name!r} has no tables beside this journal: run create_schema()"
            )
        _check(application, found)
