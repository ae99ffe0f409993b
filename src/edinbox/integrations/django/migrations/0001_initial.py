"""Create the journal table (EDINBOX_TABLE), its unique key and schema version, with the store's own DDL."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def create_journal(apps: Any, schema_editor: Any) -> None:
    """Run the store's create_schema() on the migration's connection (PostgreSQL, SQLite or MariaDB)."""
    from edinbox.integrations.django import inbox

    inbox(schema_editor.connection.alias).create_schema()


class Migration(migrations.Migration):
    """The journal, as `Inbox.create_schema()` makes it on Django's database."""

    initial = True
    dependencies: list[tuple[str, str]] = []  # noqa: RUF012 - Django's declared shape of a migration
    operations = [migrations.RunPython(create_journal, migrations.RunPython.noop)]  # noqa: RUF012 - idem
