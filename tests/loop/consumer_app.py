"""A library user's consumer, as a process of its own: `edinbox.consume` over a source into PostgreSQL, each new
message adding one row to a business table (`<table>_effects`, no unique key of its own: only the inbox keeps a copy
from adding a second row).

python tests/loop/consumer_app.py SOURCE_URL DATABASE_URL TABLE [HANDLER_SECONDS]
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from psycopg import sql

import edinbox


def main() -> None:
    """Consume until SIGTERM; print `stopped` and the totals on the way out."""
    source, db, table = sys.argv[1:4]
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    effects = sql.Identifier(f"{table}_effects")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    def handler(tx: Any, message: edinbox.Message) -> None:
        """The business effect: one row per message, in the inbox's transaction."""
        if pause:
            time.sleep(pause)
        tx.connection.execute(sql.SQL("INSERT INTO {} (message_id) VALUES (%s)").format(effects), [message.message_id])

    print("started", flush=True)
    totals = edinbox.consume(source, handler, db=db, consumer="app", table=table, batch_size=10, poll_timeout=0.2)
    print("stopped", dict(totals), flush=True)


if __name__ == "__main__":
    main()
