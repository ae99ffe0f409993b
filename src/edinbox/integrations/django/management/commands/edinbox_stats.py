"""`manage.py edinbox_stats`: the journal's rows by status, as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from edinbox.integrations.django import inbox


class Command(BaseCommand):
    """Print this consumer's journal rows by status."""

    help = "Count the journal's rows by status (EDINBOX_CONSUMER), as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        """--database."""
        parser.add_argument("--database", default="default", help="the database alias (default: default)")

    def handle(self, *args: Any, **options: Any) -> None:
        """Print the counts."""
        stats = inbox(options["database"]).stats()
        self.stdout.write(json.dumps(asdict(stats), sort_keys=True))
