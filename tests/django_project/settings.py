"""Settings of the test project: the PostgreSQL test database, in a fresh schema (search_path) per test run."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from services import POSTGRES_URL

SCHEMA = "dj" + uuid.uuid4().hex[:12]
"""This run's schema: its tables never meet another run's."""

_URL = urlsplit(POSTGRES_URL)

SECRET_KEY = "edinbox-tests-only"
USE_TZ = True
INSTALLED_APPS = ["edinbox.integrations.django", "django_project.shop"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _URL.path.lstrip("/"),
        "USER": _URL.username or "postgres",
        "PASSWORD": _URL.password or "",
        "HOST": _URL.hostname or "127.0.0.1",
        "PORT": str(_URL.port or 5432),
        "OPTIONS": {"options": f"-c search_path={SCHEMA}"},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
EDINBOX_CONSUMER = "shop"
EDINBOX_TABLE = "edinbox_inbox"
EDINBOX_MAX_ATTEMPTS = 3
