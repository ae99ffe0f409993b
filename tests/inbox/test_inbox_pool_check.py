"""The PostgreSQL store's pool check: a round trip only for a connection not given back in good order just now."""

from __future__ import annotations

from time import monotonic

import psycopg
import pytest

from edinbox._core import TableName
from edinbox.stores import _sync_postgres
from edinbox.stores._sync_postgres import PostgresStore


def test_a_connection_given_back_just_now_goes_out_unchecked_an_older_one_is_checked(
    postgres_url: str, unique_name: str
) -> None:
    """Freshly given back: no round trip (its broken backend goes unseen); given back earlier than CHECK_AFTER,
    or never: the check's round trip finds the broken backend and the pool replaces the connection."""
    store = PostgresStore(postgres_url, table=TableName(None, unique_name))
    with psycopg.connect(postgres_url, autocommit=True) as admin, psycopg.connect(postgres_url) as connection:
        admin.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
        store._returned[connection] = monotonic()
        store._check(connection)  # skipped: nothing sent, nothing raised
        store._returned[connection] = monotonic() - _sync_postgres.CHECK_AFTER - 1
        with pytest.raises(psycopg.OperationalError):
            store._check(connection)
    store.close()
