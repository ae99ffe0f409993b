"""`manage.py edinbox_purge --older-than-days N`: delete processed rows older than the retention."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from edinbox._errors import ConfigurationError
from edinbox.integrations.django import inbox


class Command(BaseCommand):
    """Purge processed rows settled more than --older-than-days ago, in bounded batches."""

    help = "Delete processed journal rows older than the retention (never younger than EDINBOX_HORIZON)."

    def add_arguments(self, parser: CommandParser) -> None:
        """--older-than-days, --batch-size, --max-rate, --database."""
        parser.add_argument("--older-than-days", type=float, required=True, help="the retention, in days")
        parser.add_argument("--batch-size", type=int, default=1000, help="rows per transaction (default 1000)")
        parser.add_argument(
            "--max-rate", type=float, default=None, help="at most this many rows per second (default: no limit)"
        )
        parser.add_argument("--database", default="default", help="the database alias (default: default)")

    def handle(self, *args: Any, **options: Any) -> None:
        """Purge and print how many rows went."""
        try:
            deleted = inbox(options["database"]).purge(
                timedelta(days=options["older_than_days"]),
                batch_size=options["batch_size"],
                max_rate=options["max_rate"],
            )
        except ConfigurationError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"purged {deleted} rows")
