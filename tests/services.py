"""The real servers the tests use, and the rule that CI never skips one silently."""

from __future__ import annotations

import os
import socket

import pytest

__all__ = ["MYSQL_URL", "ON_CI", "POSTGRES_URL", "SERVICES", "drop_database", "mariadb_admin", "require_service"]

ON_CI = os.environ.get("CI", "").lower() == "true"

SERVICES = {
    "postgres": ("127.0.0.1", 5432),
    "mariadb": ("127.0.0.1", 3306),
    "redis": ("127.0.0.1", 6379),
    "rabbitmq": ("127.0.0.1", 5672),
    "nats": ("127.0.0.1", 4222),
}

POSTGRES_URL = os.environ.get("EDINBOX_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")

MYSQL_URL = os.environ.get("EDINBOX_TEST_MARIADB", "mysql://root@127.0.0.1:3306/test")


def require_service(name: str) -> None:
    """Skip when the named server is unreachable, but fail when CI=true (CI must never skip silently)."""
    host, port = SERVICES[name]
    try:
        with socket.create_connection((host, port), timeout=2):
            return
    except OSError as exc:
        message = f"{name} is not reachable on {host}:{port}: {exc}"
        if ON_CI:
            pytest.fail(message)
        pytest.skip(message)


def mariadb_admin(statement: str) -> None:
    """Run one statement as root on the shared MariaDB server, no database selected, autocommit."""
    import pymysql

    connection = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement)
    finally:
        connection.close()


def drop_database(name: str) -> None:
    """Drop a MariaDB test database (a journal qualified as `name.inbox` and the hub's tables beside it)."""
    mariadb_admin(f"DROP DATABASE IF EXISTS `{name}`")
