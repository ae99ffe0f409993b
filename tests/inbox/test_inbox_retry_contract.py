"""Retries that wait, on every store (PostgreSQL, MariaDB, SQLite on a file and in memory) in both APIs: the shipped
`edinbox.testing.contract.RetryContract`, run on each with the inbox tests' harness."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

import pytest

from edinbox.testing.contract import HarnessFactory, RetryContract


class StoreRetries(RetryContract):
    """The contract on one of edinbox's stores and APIs, with no redelivery horizon."""

    store: ClassVar[str]
    asynchronous: ClassVar[bool]

    @pytest.fixture
    def store_harness(self, harness_factory: Any) -> HarnessFactory:
        """Harnesses on this store and API."""
        return lambda **options: harness_factory(  # type: ignore[no-any-return]
            self.store, asynchronous=self.asynchronous, horizon=timedelta(0), **options
        )


class TestPostgresSync(StoreRetries):
    """PostgreSQL, sync."""

    store = "postgresql"
    asynchronous = False


class TestPostgresAsync(StoreRetries):
    """PostgreSQL, async."""

    store = "postgresql"
    asynchronous = True


class TestMySQLSync(StoreRetries):
    """MariaDB, sync."""

    store = "mysql"
    asynchronous = False


class TestMySQLAsync(StoreRetries):
    """MariaDB, async."""

    store = "mysql"
    asynchronous = True


class TestSQLiteFileSync(StoreRetries):
    """SQLite file, sync."""

    store = "sqlite-file"
    asynchronous = False


class TestSQLiteFileAsync(StoreRetries):
    """SQLite file, async."""

    store = "sqlite-file"
    asynchronous = True


class TestSQLiteMemorySync(StoreRetries):
    """SQLite in memory, sync."""

    store = "sqlite-memory"
    asynchronous = False


class TestSQLiteMemoryAsync(StoreRetries):
    """SQLite in memory, async."""

    store = "sqlite-memory"
    asynchronous = True
