"""Settings of the test project: the PostgreSQL test database in a fresh schema (search_path) per test run, and the
MariaDB test server in a fresh database of the same name (alias `mariadb`)."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

import pymysql

from services import MYSQL_URL, POSTGRES_URL

# Django's MySQL backend imports MySQLdb; PyMySQL stands in for it, so the connection under Django's is the PyMySQL
# connection edinbox's MariaDB store joins (mysqlclient's would not be)
pymysql.install_as_MySQLdb()

SCHEMA = "dj" + uuid.uuid4().hex[:12]
"""This run's schema (PostgreSQL) and database (MariaDB): its tables never meet another run's."""

_URL = urlsplit(POSTGRES_URL)
_MARIADB = urlsplit(MYSQL_URL)

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
    },
    "mariadb": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": SCHEMA,
        "USER": _MARIADB.username or "root",
        "PASSWORD": _MARIADB.password or "",
        "HOST": _MARIADB.hostname or "127.0.0.1",
        "PORT": str(_MARIADB.port or 3306),
        "OPTIONS": {"charset": "utf8mb4"},
    },
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
EDINBOX_CONSUMER = "shop"
EDINBOX_TABLE = "edinbox_inbox"
EDINBOX_MAX_ATTEMPTS = 3
