"""The PostgreSQL store's pool check: a round trip only for a connection not given back in good order just now."""

from __future__ import annotations

import select
from time import monotonic

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from edinbox._core import TableName
from edinbox.stores import _sync_postgres
from edinbox.stores._sync_postgres import PostgresStore


def test_a_connection_given_back_just_now_goes_out_unchecked_an_older_one_is_checked(
    postgres_url: str, unique_name: str
) -> None:
    """Given back just now with a quiet socket: no round trip; with the server's goodbye on its socket (a terminated
    backend, as after a restart), or given back longer ago than CHECK_AFTER: the pool's check runs."""
    store = PostgresStore(postgres_url, table=TableName(None, unique_name))
    with psycopg.connect(postgres_url, autocommit=True) as admin, psycopg.connect(postgres_url) as connection:
        store._returned[connection] = monotonic()
        store._check(connection)  # given back just now, nothing on its socket: skipped
        assert connection.pgconn.transaction_status == TransactionStatus.IDLE  # no query sent (psycopg would BEGIN)
        admin.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
        select.select([connection.pgconn.socket], [], [], 5)  # the backend's goodbye arrives (asynchronously)
        store._returned[connection] = monotonic()
        with pytest.raises(psycopg.OperationalError):  # just now, but the server's goodbye waits on the socket
            store._check(connection)
    with psycopg.connect(postgres_url) as connection:
        store._returned[connection] = monotonic() - _sync_postgres.CHECK_AFTER - 1
        store._check(connection)  # given back long ago: checked (a round trip), and it works
    store.close()
