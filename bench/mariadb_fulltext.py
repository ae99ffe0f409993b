"""What MariaDB's FULLTEXT index costs a kept payload's row by itself, and whether larger transactions lessen it.

The search texts of generated interchanges (`search_text`, as the message store writes them) are inserted into a
two-column table (an id and the text), with and without a FULLTEXT index on the text, 20 rows per transaction (the
hub's batch) and 500 (an index batch, were the words written after the settling transaction); each variant in a
fresh table, the variants alternated round by round. InnoDB adds a row's words to its full-text cache at COMMIT; the
difference between the two tables is that work, per row, wall time (the server's work is in it).

Run: PYTHONPATH=$PWD/src:$PWD .venv/bin/python -m bench.mariadb_fulltext [--rows 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid

import pymysql

from edinbox._payloads import search_text
from edinbox.hub.demo._traffic import generate

HOST = os.environ.get("EDINBOX_BENCH_MARIADB_HOST", "127.0.0.1")


def one(cursor: object, texts: list[str], *, per: int, fulltext: bool) -> float:
    """Microseconds per row to insert `texts`, `per` rows a transaction, into a fresh table (FULLTEXT or not)."""
    table = "ft_" + uuid.uuid4().hex[:12]
    index = ", FULLTEXT (text)" if fulltext else ""
    cursor.execute(f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, text MEDIUMTEXT NOT NULL{index}) ENGINE=InnoDB")  # type: ignore[attr-defined]
    started = time.perf_counter()
    for start in range(0, len(texts), per):
        rows = [(start + k, text) for k, text in enumerate(texts[start : start + per])]
        cursor.executemany(f"INSERT INTO {table} (id, text) VALUES (%s, %s)", rows)  # type: ignore[attr-defined]
        cursor.connection.commit()  # type: ignore[attr-defined]
    spent = (time.perf_counter() - started) / len(texts) * 1e6
    cursor.execute(f"DROP TABLE {table}")  # type: ignore[attr-defined]
    return spent


def main() -> int:
    """Print the median microseconds per row of each variant and the FULLTEXT index's share."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    texts = [search_text(payload) for _, payload in generate(args.rows, duplicate_rate=0.0, seed=3).files]
    connection = pymysql.connect(host=HOST, user="root", database="test")
    cursor = connection.cursor()
    spent: dict[tuple[int, bool], list[float]] = {}
    try:
        for _ in range(args.rounds):
            for per in (20, 500):
                for fulltext in (True, False):
                    spent.setdefault((per, fulltext), []).append(one(cursor, texts, per=per, fulltext=fulltext))
    finally:
        connection.close()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    words = statistics.mean(len(text.split()) for text in texts)
    print(f"MariaDB FULLTEXT, {args.rows} search texts ({words:.0f} words each), {args.rounds} rounds (load {load})")
    print("| rows per transaction | with FULLTEXT | without | the index's own work |")
    print("|---|---|---|---|")
    for per in (20, 500):
        on, off = statistics.median(spent[per, True]), statistics.median(spent[per, False])
        print(f"| {per} | {on:.1f} us | {off:.1f} us | {on - off:.1f} us per row |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
