"""Run every benchmark in turn, each in its own process: `make bench` or `.venv/bin/python -m bench`.

Each prints its own side-by-side ratios; record the run with its command in bench/log/ (one file per benchmark)
and, when it supersedes the figures there, in bench/RESULTS.md's table.
"""

from __future__ import annotations

import subprocess
import sys

BENCHMARKS = [
    "bench.inbox_pg",
    "bench.inbox_mariadb",
    "bench.mysql_batch",
    "bench.edi_parse",
    "bench.brokers",
    "bench.kafka",
    "bench.spool",
    "bench.hub_memory",
    "bench.console",
    "bench.hubs",
    "bench.outbox",
]
# bench.journal_scale is run by hand: it fills journals of 10M rows (gigabytes, minutes) and keeps them.
# bench.effect_cost (a private cluster with fsync on, consumers killed; minutes) and bench.journal_row are run by hand.


def main() -> int:
    """Run each benchmark module and return the worst exit status."""
    worst = 0
    for module in BENCHMARKS:
        print(f"\n$ {sys.executable} -m {module}", flush=True)
        worst = max(worst, subprocess.run([sys.executable, "-m", module], check=False).returncode)
    return worst


if __name__ == "__main__":
    sys.exit(main())
