"""An invoice row, created by handlers through the ORM (no unique key: only the inbox keeps it single)."""

from __future__ import annotations

from django.db import models


class Invoice(models.Model):
    """One invoice created by a handler."""

    number = models.CharField(max_length=35)

    class Meta:
        app_label = "shop"
