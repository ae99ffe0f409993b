"""`edinbox demo`: real hub processes killed between commit and acknowledgment, duplicates sent, and every count
still adds up, on SQLite, PostgreSQL and MariaDB; the demo's own schema or database dropped unless kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli.test_cli import edinbox, stats_json
from services import MYSQL_URL, drop_database, require_service


def check_counts(report: dict[str, Any], stats: dict[str, Any]) -> None:
    """The database's counts agree with what the demo published, and the settled outcomes sum to the deliveries."""
    for name in ("processed", "duplicate", "conflict", "dead", "rejected", "invoices"):
        assert isinstance(stats[name], int), name
    assert stats["invoices"] == report["expected_invoices"]
    assert stats["processed"] + stats["resent"] == report["unique_interchanges"]
    assert stats["resent"] == report["resends"]
    assert stats["rejected_payloads"] == report["malformed"]
    assert stats["rejected"] >= stats["rejected_payloads"]  # a parked file redelivered after a crash counts again
    settled = ("processed", "resent", "duplicate", "conflict", "dead", "rejected", "bypassed")
    assert sum(stats[name] for name in settled) == stats["received"] == report["deliveries"]
    assert stats["dead"] == 0
    # a conflict is counted beside its processed row: the journal's processed keys include the conflicts
    assert stats["journal"]["processed"] == report["unique_interchanges"]
    assert stats["journal"]["conflict"] == report["conflicts_injected"]
    # every producer copy is suppressed (as a conflict when it meets the other version of a reused control
    # number first), and so is every redelivery after a crash
    assert stats["duplicate"] + stats["conflict"] >= report["producer_duplicates"] + report["conflicts_injected"]
    assert stats["conflict"] >= report["conflicts_injected"]
    assert stats["received"] >= report["files"]
    # acknowledgments: one per interchange that asked, a 997 / 999 per X12 interchange (those parked without
    # their trailer included: their rejections, once each), one notice per partner duplicate (never for the
    # redeliveries after a crash), each key in the partners' outbound folders
    acks = stats["acknowledgments"]
    written = sum(acks[k] for k in ("TA1", "997", "999", "CONTRL", "duplicate_notices")) - acks["together"]
    assert acks["TA1"] + acks["CONTRL"] == report["asked"] + report["broken_asked"]
    assert acks["997"] + acks["999"] == report["x12"] + report["broken_x12"]
    assert acks["rejections"] == report["rejections"]
    assert acks["duplicate_notices"] == report["producer_duplicates"] + report["conflicts_injected"]
    assert acks["keys"] == written == report["outbound_keys"]
    assert report["outbound_files"] >= written
    assert stats["outbox"]["backlog"] == 0


def crashing_demo(tmp_path: Path, *args: str, messages: int = 120) -> dict[str, Any]:
    """`edinbox demo --json` on `messages` interchanges with duplicates and crashes: its report, check held, crashes
    seen."""
    out = edinbox(
        "demo", "--messages", str(messages), "--duplicate-rate", "0.4", "--crash-rate", "0.3",
        "--dir", str(tmp_path), "--json", *args,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert isinstance(report, dict)
    assert report["ok"]
    assert report["crashes"] >= 1
    return report


def test_demo_on_sqlite_with_crashes_and_duplicates(tmp_path: Path) -> None:
    """`edinbox demo` kills real hub processes between commit and ack, and every count still adds up."""
    report = crashing_demo(tmp_path, "--seed", "11")
    assert report["left_in_spool"] == 0
    check_counts(report, stats_json("--db", f"sqlite:///{tmp_path / 'demo.db'}"))


def test_demo_counts_a_nacked_delivery_once_and_a_killed_commit_by_its_last_words(tmp_path: Path) -> None:
    """The demo's deliveries from the hub's log: a file nacked after a transient failure (no line, then settled with
    delivery count 2) counts once; a file whose commit was killed before its ack (its `killed` line, then settled as
    delivery 2) counts twice; the spool's delivery count is not taken for settled deliveries."""
    from edinbox.hub.demo._demo import _logged_deliveries
    from edinbox.loop import EventFormatter
    from logfmt import event_record

    events: list[tuple[str, dict[str, Any]]] = [
        ("hub-down", {"dependency": "database", "error": "(1213, 'Deadlock found')"}),
        ("killed", {"delivery": "dir:b", "settled": 1}),
        ("settled", {"key": "A", "outcome": "processed", "delivery": "dir:a", "delivery_count": 2}),
        ("settled", {"key": "B", "outcome": "duplicate", "delivery": "dir:b", "delivery_count": 2}),
        ("settled", {"key": "C", "outcome": "not-settled", "delivery": "dir:c"}),
    ]
    records = [event_record(*event) for event in events]
    log = tmp_path / "hub.log"
    log.write_text("".join(f"{EventFormatter(json=True).format(r)}\n" for r in records), encoding="utf-8")
    assert _logged_deliveries(log) == 3


def test_demo_counts_are_the_same_for_a_seed(tmp_path: Path) -> None:
    """Two demos with one seed (one worker, crashes included) report the same counts, and a used --dir is refused."""
    first = crashing_demo(tmp_path / "a", "--seed", "3", messages=50)
    second = crashing_demo(tmp_path / "b", "--seed", "3", messages=50)
    # outbound_files: a kill between a relay's send and its mark sends a file again, wherever the kill falls
    timing = {"seconds", "oldest_row_age_seconds", "table_bytes", "db", "workdir", "outbound_files"}

    def counts(report: dict[str, Any]) -> dict[str, Any]:
        stats = {k: v for k, v in report["stats"].items() if k not in timing}
        return {**{k: v for k, v in report.items() if k not in timing}, "stats": stats}

    assert counts(first) == counts(second)
    again = edinbox("demo", "--messages", "10", "--dir", str(tmp_path / "a"))
    assert again.returncode == 1
    assert "is not empty" in again.stderr


def test_demo_prints_the_report_and_its_check(tmp_path: Path) -> None:
    """The human report names every count and ends with its two checks (invoices, then acknowledgments), and the
    exit status says they held."""
    out = edinbox("demo", "--messages", "30", "--crash-rate", "0.5", "--workers", "1", "--dir", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    labels = ("deliveries", "processed", "resent", "duplicate", "conflict", "dead", "rejected", "bypassed", "journal")
    for label in (*labels, "invoices", "hub runs"):
        assert f"  {label}" in out.stdout
    for label in ("acknowledged", "outbound"):
        assert f"  {label}" in out.stdout
    invoices, acknowledgments = out.stdout.rstrip().splitlines()[-2:]
    assert invoices.startswith("check: invoices")
    assert invoices.endswith("OK")
    assert acknowledgments.startswith("check: acknowledgments")
    assert acknowledgments.endswith("OK")


def test_demo_on_postgresql_with_crashes_and_duplicates(tmp_path: Path, postgres_url: str, pg_table: str) -> None:
    """The same demo against PostgreSQL, two hub processes sharing the spool, and the counts add up."""
    report = crashing_demo(tmp_path, "--seed", "5", "--db", postgres_url, "--table", pg_table, "--workers", "2")
    check_counts(report, stats_json("--db", postgres_url, "--table", pg_table))


def test_demo_on_mariadb_with_crashes_and_duplicates(tmp_path: Path, unique_name: str) -> None:
    """The same demo against MariaDB (a mariadb:// URL, the journal and the hub's tables in a fresh database), two
    hub processes sharing the spool, and the counts add up."""
    require_service("mariadb")
    url, table = MYSQL_URL.replace("mysql://", "mariadb://"), f"{unique_name}.inbox"
    try:
        report = crashing_demo(tmp_path, "--seed", "7", "--db", url, "--table", table, "--workers", "2")
        check_counts(report, stats_json("--db", url, "--table", table))
    finally:
        drop_database(unique_name)


def test_demo_drops_its_postgresql_schema_unless_kept(tmp_path: Path, postgres_url: str) -> None:
    """The schema a PostgreSQL demo creates for itself is gone after the report, and stays with --keep."""
    import psycopg

    def schema_of(report: dict[str, Any]) -> bool:
        schema = report["table"].split(".")[0]
        with psycopg.connect(postgres_url) as conn:
            found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchall()
        return bool(found)

    args = ("demo", "--messages", "20", "--crash-rate", "0", "--db", postgres_url, "--json")
    dropped = edinbox(*args, "--dir", str(tmp_path / "a"))
    assert dropped.returncode == 0, dropped.stderr
    report = json.loads(dropped.stdout)
    assert report["dropped"]
    assert not schema_of(report)
    kept = edinbox(*args, "--dir", str(tmp_path / "b"), "--keep")
    report = json.loads(kept.stdout)
    assert not report["dropped"]
    assert schema_of(report)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{report["table"].split(".")[0]}" CASCADE'.encode())


def test_demo_drops_its_mariadb_database_unless_kept(tmp_path: Path) -> None:
    """On MariaDB the demo's own database (its schema there) is gone after the report, and stays with --keep."""
    import pymysql

    require_service("mariadb")

    def database_of(report: dict[str, Any]) -> bool:
        connection = pymysql.connect(host="127.0.0.1", port=3306, user="root")
        with connection, connection.cursor() as cursor:
            cursor.execute("SHOW DATABASES LIKE %s", (report["table"].split(".")[0],))
            return bool(cursor.fetchall())

    args = ("demo", "--messages", "20", "--crash-rate", "0", "--db", MYSQL_URL, "--json")
    dropped = edinbox(*args, "--dir", str(tmp_path / "a"))
    assert dropped.returncode == 0, dropped.stderr
    report = json.loads(dropped.stdout)
    assert report["dropped"]
    assert report["table"].startswith("edinbox_demo_")
    assert not database_of(report)
    kept = edinbox(*args, "--dir", str(tmp_path / "b"), "--keep")
    report = json.loads(kept.stdout)
    try:
        assert not report["dropped"]
        assert database_of(report)
    finally:
        drop_database(report["table"].split(".")[0])
