"""The Django app of edinbox: the journal table's migration and the operator's commands."""

from __future__ import annotations

from django.apps import AppConfig


class EdinboxConfig(AppConfig):
    """`edinbox.integrations.django` in INSTALLED_APPS."""

    name = "edinbox.integrations.django"
    label = "edinbox"
    verbose_name = "edinbox"
