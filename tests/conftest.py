"""Shared fixtures: the real servers this machine runs, and a fail-don't-skip rule on CI."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from services import POSTGRES_URL, require_service


@pytest.fixture
def postgres_url() -> str:
    """URL of the real PostgreSQL test database."""
    require_service("postgres")
    return POSTGRES_URL


@pytest.fixture
def unique_name() -> Iterator[str]:
    """A fresh identifier for tables, queues, streams and schemas, so parallel runs never collide."""
    return "t" + uuid.uuid4().hex[:12]
