"""Journal stores, one module pair per database: PostgreSQL (psycopg 3), SQLite (sqlite3 / aiosqlite) and MariaDB /
MySQL (PyMySQL / asyncmy), whose own connection and unit have module pairs of their own (`_async_mysql_connection`,
`_async_mysql_unit`).

Each async store is written by hand (`_async_<db>.py`); its sync twin (`_sync_<db>.py`) is generated.
Driver errors are mapped to `edinbox.StoreError` in one place per driver (`_<db>_sql.py`). How each database binds a
set of values (arrays, an executemany, JSON) is `run_rows`, `fetch_rows`, `texts`, `stored_time` and `bindable`.
"""

from edinbox.stores._sets import Bound, bindable, fetch_rows, run_rows, stored_time, texts

__all__ = ["Bound", "bindable", "fetch_rows", "run_rows", "stored_time", "texts"]
