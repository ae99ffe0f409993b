"""The message store on each database: payloads kept in the settling transaction, cut at the cap, found by a value
inside them, and purged with their journal rows."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from edinbox import Inbox, Message, SchemaError
from services import MYSQL_URL, POSTGRES_URL, drop_database, mariadb_admin, require_service

EDI = b"UNB+UNOC:3+5790000000005:14+5013546107732:14+261201:0930+4711'UNH+1+ORDERS:D:96A:UN'BGM+220+PO-77123+9'"


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def store(request: pytest.FixtureRequest, unique_name: str, tmp_path: object) -> Iterator[tuple[str, str]]:
    """A database URL and a journal table of its own on each store, dropped after."""
    dialect = request.param
    if dialect == "sqlite":
        yield f"sqlite:///{tmp_path}/journal.db", "inbox"
        return
    require_service("postgres" if dialect == "postgresql" else "mariadb")
    if dialect == "postgresql":
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{unique_name}"')
        yield POSTGRES_URL, f"{unique_name}.inbox"
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{unique_name}" CASCADE')
        return
    mariadb_admin(f"CREATE DATABASE `{unique_name}`")
    yield MYSQL_URL, f"{unique_name}.inbox"
    drop_database(unique_name)


def _inbox(store: tuple[str, str], **options: object) -> Inbox:
    """An inbox on `store` whose schema exists."""
    inbox = Inbox(store[0], table=store[1], consumer="orders", **options)  # type: ignore[arg-type]
    inbox.create_schema()
    return inbox


def _age(inbox: Inbox, days: int) -> None:
    """Move every journal row's settling and every kept payload `days` into the past."""
    statements = {
        "sqlite": ("UPDATE {t} SET settled_at = settled_at - :s", "UPDATE {t}_payloads SET kept_at = kept_at - :s"),
        "postgresql": (
            "UPDATE {t} SET settled_at = settled_at - make_interval(secs => %(s)s)",
            "UPDATE {t}_payloads SET kept_at = kept_at - make_interval(secs => %(s)s)",
        ),
        "mysql": (
            "UPDATE {t} SET settled_at = settled_at - INTERVAL %(s)s SECOND",
            "UPDATE {t}_payloads SET kept_at = kept_at - INTERVAL %(s)s SECOND",
        ),
    }[inbox.dialect]

    def run(tx: object) -> None:
        for statement in statements:
            cursor = tx.connection.cursor()  # type: ignore[attr-defined]
            cursor.execute(statement.format(t=inbox._table), {"s": days * 86400})

    inbox.transaction(run)


def test_payloads_are_kept_on_settle_cut_at_the_cap_and_found_by_a_value(store: tuple[str, str]) -> None:
    """A processed message's payload is kept whole with its digest and content type (alone, in a batch, or in lease
    mode with its completion), a longer one only up to the cap and marked truncated, and a search by a PO number
    inside it finds it: words past the cap are not searched."""
    with _inbox(store, keep_payloads=True, payload_cap=200) as inbox:
        order = Message("4711", "orders", EDI, headers={"Content-Type": "application/EDIFACT"})
        inbox.process(order, lambda tx, m: None)
        big = Message("4712", "orders", b"NAD+BY+0614141000005::9'" + b"FTX+AAI+++" + b"x" * 300 + b" LATE42'")
        inbox.process_batch([big, Message("4713", "orders", b"other")], lambda tx, ms: None)

        kept = inbox.payload("orders", "4711")
        assert kept is not None
        assert (kept.payload, kept.size, kept.truncated, kept.content_type) == (
            EDI,
            len(EDI),
            False,
            "application/EDIFACT",
        )
        assert kept.sha256 == kept.fingerprint == order.fingerprint  # the default fingerprint is the payload's SHA-256
        cut = inbox.payload("orders", "4712")
        assert cut is not None
        assert cut.truncated
        assert cut.size == len(big.payload)
        assert cut.payload == big.payload[:200]
        assert cut.sha256 == big.fingerprint

        assert [f.message_id for f in inbox.search("PO-77123")] == ["4711"]
        assert [f.message_id for f in inbox.search("0614141000005")] == ["4712"]
        assert inbox.search("LATE42") == []  # after the cap
        leased = Message("4714", "orders", b"BGM+220+PO-88001+9'")
        inbox.process(leased, lambda tx, m: None, lease=timedelta(minutes=1))  # kept with the completion
        assert [f.message_id for f in inbox.search("PO-88001")] == ["4714"]


def test_nothing_is_kept_when_keep_payloads_is_off(store: tuple[str, str]) -> None:
    """A library inbox keeps no payload unless asked: the journal row settles, the store stays empty."""
    with _inbox(store) as inbox:
        inbox.process(Message("1", "orders", EDI), lambda tx, m: None)
        assert inbox.get("orders", "1") is not None
        assert inbox.payload("orders", "1") is None
        assert inbox.search("PO-77123") == []


def test_purge_removes_kept_payloads_with_their_journal_rows(store: tuple[str, str]) -> None:
    """The purge deletes the kept payloads older than the retention with their journal rows; younger ones stay."""
    with _inbox(store, keep_payloads=True) as inbox:
        inbox.process(Message("old", "orders", EDI), lambda tx, m: None)
        _age(inbox, 40)
        inbox.process(Message("new", "orders", EDI + b"2"), lambda tx, m: None)
        assert inbox.purge(timedelta(days=30)) == 2  # the journal row and its payload
        assert inbox.get("orders", "old") is None
        assert inbox.payload("orders", "old") is None
        assert inbox.payload("orders", "new") is not None
        assert [f.message_id for f in inbox.search("PO-77123")] == ["new"]


def test_a_payload_kept_after_the_purge_took_the_newest_is_found(store: tuple[str, str]) -> None:
    """A purge that deletes the newest kept payloads (past the retention, one of them forgotten) leaves the next one
    kept findable: on SQLite it takes a rowid the purge freed, below the index's mark, so the purge lowers the mark."""
    with _inbox(store, keep_payloads=True) as inbox:
        inbox.process(Message("first", "orders", b"BGM+220+PO-66001+9'"), lambda tx, m: None)
        inbox.process(Message("second", "orders", b"BGM+220+PO-66002+9'"), lambda tx, m: None)
        assert [f.message_id for f in inbox.search("PO-66002")] == ["second"]
        assert inbox.forget("orders", "second")
        _age(inbox, 40)
        assert inbox.purge(timedelta(days=30)) == 3  # the first's journal row, then both payloads
        inbox.process(Message("third", "orders", b"BGM+220+PO-66003+9'"), lambda tx, m: None)
        assert [f.message_id for f in inbox.search("PO-66003")] == ["third"]
        assert inbox.search("PO-66002") == inbox.search("PO-66001") == []


def _body(inbox: Inbox, message_id: str) -> bytes:
    """The body column of a kept payload as stored."""
    mark = "?" if inbox.dialect == "sqlite" else "%s"
    quote = "`" if inbox.dialect == "mysql" else '"'
    name = ".".join(f"{quote}{part}{quote}" for part in f"{inbox._table}_payloads".split("."))

    def run(tx: object) -> bytes:
        cursor = tx.connection.cursor()  # type: ignore[attr-defined]
        cursor.execute(f"SELECT body FROM {name} WHERE message_id = {mark}", (message_id,))
        return bytes(cursor.fetchone()[0])

    return inbox.transaction(run)


def test_a_payload_is_kept_compressed_and_its_words_indexed_later_on_sqlite(store: tuple[str, str]) -> None:
    """Every store keeps the bytes compressed as they settle (1,100 bytes: over `COMPRESS_MIN`); on SQLite the words
    wait for `index_payloads`, which indexes each payload once (PostgreSQL and MariaDB index at once); `payload()`
    gives the same bytes before and after, and a search finds the message without being told to index."""
    with _inbox(store, keep_payloads=True) as inbox:
        inbox.process(Message("4711", "orders", EDI * 10), lambda tx, m: None)
        later = inbox.dialect == "sqlite"
        assert zlib.decompress(_body(inbox, "4711")) == EDI * 10
        kept = inbox.payload("orders", "4711")
        assert kept is not None
        assert kept.payload == EDI * 10
        assert inbox.index_payloads() == (1 if later else 0)
        assert inbox.index_payloads() == 0
        kept = inbox.payload("orders", "4711")
        assert kept is not None
        assert kept.payload == EDI * 10
        inbox.process(Message("4712", "orders", b"BGM+220+PO-99001+9'"), lambda tx, m: None)
        assert [f.message_id for f in inbox.search("PO-99001")] == ["4712"]  # indexed by the search first


def test_a_payload_kept_again_after_forget_is_found_by_its_new_words_only(store: tuple[str, str]) -> None:
    """A message processed again after `forget` replaces its kept payload: the old words leave the index, the new ones
    are found (on SQLite the full-text index stays consistent with its table)."""
    with _inbox(store, keep_payloads=True) as inbox:
        inbox.process(Message("4711", "orders", b"BGM+220+PO-55001+9'"), lambda tx, m: None)
        assert [f.message_id for f in inbox.search("PO-55001")] == ["4711"]
        assert inbox.forget("orders", "4711")
        inbox.process(Message("4711", "orders", b"BGM+220+PO-55002+9'"), lambda tx, m: None)
        assert inbox.search("PO-55001") == []
        assert [f.message_id for f in inbox.search("PO-55002")] == ["4711"]
        if inbox.dialect == "sqlite":

            def check(tx: object) -> None:
                fts = f'"{inbox._table}_payloads_fts"'
                tx.connection.execute(f"INSERT INTO {fts} ({fts}) VALUES ('integrity-check')")  # type: ignore[attr-defined]
                stale = tx.connection.execute(f"SELECT rowid FROM {fts} WHERE {fts} MATCH '55001'")  # type: ignore[attr-defined]
                assert stale.fetchall() == []  # the old words left the index itself

            inbox.transaction(check)


def test_kept_body_is_compressed_from_a_kilobyte() -> None:
    """The body column holds the zlib-compressed bytes of a payload of `COMPRESS_MIN` bytes or more (what the storage
    figures in bench/RESULTS.md assume), a shorter one as it is behind the `STORED` mark; `unpack` gives each back,
    a short payload that looks like a zlib stream or starts with the mark included."""
    from edinbox._payloads import COMPRESS_MIN, STORED, keep_params, unpack

    row = keep_params("c", Message("1", "s", EDI * 20), cap=1 << 20)
    assert zlib.decompress(row["body"]) == EDI * 20
    assert len(row["body"]) < len(EDI * 20) / 4
    assert unpack(row["body"], indexed=True) == EDI * 20
    for short in (EDI, zlib.compress(EDI), STORED + EDI, b"", (EDI * 20)[: COMPRESS_MIN - 1]):
        body = keep_params("c", Message("1", "s", short), cap=1 << 20)["body"]
        assert body == STORED + short
        assert unpack(body, indexed=True) == short
        assert unpack(short, indexed=False) == short  # a row not indexed yet: the bytes as received


def test_the_documented_example_runs() -> None:
    """The Python example of docs/message-store.md runs as written (its asserts hold)."""
    doc = Path(__file__).resolve().parents[2] / "docs" / "message-store.md"
    match = re.search(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.DOTALL)
    assert match is not None
    exec(compile(match.group(1), str(doc), "exec"), {})  # noqa: S102 - our own documentation


def test_a_journal_older_than_the_store_says_run_migrate(tmp_path: Path) -> None:
    """On a journal older than the message store (version 10: no kept payloads' table), reading a kept payload,
    searching, and `edinbox show` each say in one line to run `edinbox migrate` (not "create the schema")."""
    import sqlite3

    from click.testing import CliRunner

    from edinbox.cli import main

    url = f"sqlite:///{tmp_path}/journal.db"
    with Inbox(url, consumer="orders") as inbox:
        inbox.create_schema()
        inbox.process(Message("1", "acme", EDI), lambda tx, m: None)
    with sqlite3.connect(tmp_path / "journal.db") as admin:
        admin.execute("DROP TABLE inbox_payloads")
        admin.execute("DROP TABLE inbox_payloads_fts")
        admin.execute("UPDATE inbox_version SET version = 10")
    with Inbox(url, consumer="orders") as inbox:
        for read in (lambda: inbox.payload("acme", "1"), lambda: inbox.search("PO-77123")):
            with pytest.raises(SchemaError, match="run `edinbox migrate`"):
                read()
    result = CliRunner().invoke(main, ["show", "acme/1", "--db", url, "--consumer", "orders"])
    assert result.exit_code == 1
    assert "run `edinbox migrate`" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_word_every_payload_holds_lists_the_newest_first(store: tuple[str, str]) -> None:
    """A search for a word all the kept payloads hold lists the newest `limit` of them, newest first."""
    with _inbox(store, keep_payloads=True) as inbox:
        for number in range(1, 5):
            inbox.process(Message(f"m{number}", "orders", EDI + b"RFF+ON:%d'" % number), lambda tx, m: None)
        assert [f.message_id for f in inbox.search("UNOC", limit=2)] == ["m4", "m3"]


def test_postgresql_searches_a_word_in_thousands_of_payloads_from_the_newest(unique_name: str) -> None:
    """On PostgreSQL a word more than 5,000 kept payloads hold is searched newest first along the kept_at index (the
    full-text index's hits are capped there): the newest come back, in order."""
    require_service("postgres")
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{unique_name}"')
    try:
        with _inbox((POSTGRES_URL, f"{unique_name}.inbox"), keep_payloads=True) as inbox:
            inbox.transaction(
                lambda tx: tx.connection.execute(
                    f'INSERT INTO "{unique_name}".inbox_payloads (consumer, source, message_id, fingerprint, sha256, '
                    "size, content_type, truncated, body, words, kept_at) SELECT 'orders', 'acme', i::text, 'f', 'd', "
                    "1, 'x', false, '\\x00', array_to_tsvector(ARRAY['unb', 'po' || i]), "
                    "now() - make_interval(secs => 6000 - i) FROM generate_series(1, 6000) AS i"
                )
            )
            assert [f.message_id for f in inbox.search("UNB", limit=3)] == ["6000", "5999", "5998"]
            assert [f.message_id for f in inbox.search("PO17")] == ["17"]
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{unique_name}" CASCADE')


def test_mariadb_searches_a_common_word_among_the_newest_first(unique_name: str) -> None:
    """On MariaDB the newest `WALK` kept payloads are matched row by row first: a word (or words) most of them hold
    comes back from there, newest first, case-insensitive and as whole words; a word they hold fewer than `limit`
    times is answered by FULLTEXT, older rows included."""
    require_service("mariadb")
    mariadb_admin(f"CREATE DATABASE `{unique_name}`")
    try:
        with _inbox((MYSQL_URL, f"{unique_name}.inbox"), keep_payloads=True) as inbox:

            def fill(tx: Any) -> None:
                cursor = tx.connection.cursor()
                cursor.execute(
                    f"INSERT INTO `{unique_name}`.inbox_payloads (consumer, source, message_id, fingerprint, sha256, "
                    "size, content_type, truncated, body, text, kept_at) SELECT 'orders', 'acme', seq, 'f', 'd', 1, "
                    "'x', false, 'b', CONCAT('UNB PO', seq, IF(seq % 2 = 0, ' EVEN', ''), IF(seq < 50, ' OLD', '')), "
                    "UTC_TIMESTAMP(6) - INTERVAL (3000 - seq) SECOND FROM seq_1_to_3000"
                )

            inbox.transaction(fill)
            assert [f.message_id for f in inbox.search("UNB", limit=3)] == ["3000", "2999", "2998"]
            assert [f.message_id for f in inbox.search("even unb", limit=3)] == ["3000", "2998", "2996"]
            assert [f.message_id for f in inbox.search("PO299", limit=1)] == ["299"]  # not PO2999, newer
            assert [f.message_id for f in inbox.search("PO17")] == ["17"]  # older than the newest WALK
            assert [f.message_id for f in inbox.search("old even", limit=3)] == ["48", "46", "44"]
    finally:
        drop_database(unique_name)


def test_postgresql_indexes_a_row_an_earlier_release_left_waiting(unique_name: str) -> None:
    """On PostgreSQL a payload is indexed in its settling transaction; a row an earlier release (journal version 13)
    kept waiting for its index (no words, the bytes as received) is read as it is, then indexed by `index_payloads`
    (the hub's and the consumer loop's idle batches, or a search) and found."""
    require_service("postgres")
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{unique_name}"')
    try:
        with _inbox((POSTGRES_URL, f"{unique_name}.inbox"), keep_payloads=True) as inbox:
            inbox.process(Message("new", "acme", EDI), lambda tx, m: None)
            assert inbox.index_payloads() == 0  # indexed when it was settled
            inbox.transaction(
                lambda tx: tx.connection.execute(
                    f'INSERT INTO "{unique_name}".inbox_payloads (consumer, source, message_id, fingerprint, sha256, '
                    "size, content_type, truncated, body, words) VALUES ('orders', 'acme', 'old', 'f', 'd', %s, "
                    "'x', false, %s, NULL)",
                    (len(EDI), EDI),
                )
            )
            kept = inbox.payload("acme", "old")
            assert kept is not None
            assert kept.payload == EDI
            assert inbox.index_payloads() == 1
            kept = inbox.payload("acme", "old")
            assert kept is not None
            assert kept.payload == EDI
            assert [f.message_id for f in inbox.search("PO-77123", limit=5)] == ["old", "new"]
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{unique_name}" CASCADE')


def test_sqlite_writers_and_indexers_side_by_side_index_each_payload_once(tmp_path: Path) -> None:
    """Three processes' worth of inboxes (two consumers) keep payloads on one SQLite file while two more index and
    search, some messages forgotten and kept again: afterwards every payload is found by its own value, once, and
    the full-text index holds exactly one entry per kept row (none lost, none twice, none stale)."""
    import sqlite3
    import threading

    url = f"sqlite:///{tmp_path}/journal.db"
    with Inbox(url, consumer="a") as first:
        first.create_schema()
    failures: list[BaseException] = []
    done = threading.Event()

    def keep(consumer: str) -> None:
        with Inbox(url, consumer=consumer, keep_payloads=True) as inbox:
            for i in range(60):
                inbox.process(Message(f"m{i}", "acme", b"BGM+220+PO%s%03d+9'" % (consumer.encode(), i)), _noop)
                if i % 10 == 9:  # found, forgotten, kept again with a new value: the old one leaves the index
                    assert [hit.message_id for hit in inbox.search(f"PO{consumer}{i:03d}")] == [f"m{i}"]
                    assert inbox.forget("acme", f"m{i}")
                    inbox.process(Message(f"m{i}", "acme", b"BGM+220+NEW%s%03d+9'" % (consumer.encode(), i)), _noop)

    def index(consumer: str) -> None:
        with Inbox(url, consumer=consumer, keep_payloads=True) as inbox:
            while not done.is_set():
                inbox.index_payloads(limit=7)
                inbox.search("PO" + consumer + "001")

    def guarded(work: Any, consumer: str) -> None:
        try:
            work(consumer)
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    writers = [threading.Thread(target=guarded, args=(keep, c)) for c in ("a", "b")]
    indexers = [threading.Thread(target=guarded, args=(index, c)) for c in ("a", "b")]
    for thread in writers + indexers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    for thread in indexers:
        thread.join()
    assert failures == []
    for consumer in ("a", "b"):
        with Inbox(url, consumer=consumer, keep_payloads=True) as inbox:
            for i in range(60):
                value = f"{'NEW' if i % 10 == 9 else 'PO'}{consumer}{i:03d}"
                assert [hit.message_id for hit in inbox.search(value)] == [f"m{i}"], value
            assert inbox.search(f"PO{consumer}009") == []
    with sqlite3.connect(tmp_path / "journal.db") as db:
        db.execute("INSERT INTO inbox_payloads_fts (inbox_payloads_fts) VALUES ('integrity-check')")
        entries = db.execute("SELECT count(*) FROM inbox_payloads_fts WHERE inbox_payloads_fts MATCH 'BGM'").fetchone()
        assert entries == db.execute("SELECT count(*) FROM inbox_payloads").fetchone() == (120,)


def _noop(tx: object, message: Message) -> None:
    """A handler with no effect."""


def test_a_batch_of_the_sqlite_index_takes_a_bounded_number_of_bytes() -> None:
    """`fts_upto` ends a batch of SQLite's full-text index at the row whose text reaches the budget (each row counted
    at most `MAX_SCAN`), takes at least one row, and none when none waits."""
    from edinbox._payloads import MAX_SCAN, fts_upto

    assert fts_upto([(1, 10), (2, 10), (3, 10)], budget=15) == 2
    assert fts_upto([(1, 10), (2, 10), (3, 10)], budget=100) == 3
    assert fts_upto([(7, 10**9), (8, 10)], budget=5) == 7
    assert fts_upto([(1, 10**9), (2, 10**9), (3, 10)], budget=2 * MAX_SCAN + 1) == 3
    assert fts_upto([], budget=5) == 0


def test_sqlite_indexes_big_payloads_a_few_at_a_time_and_a_search_finds_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a batch's text bounded (here 1,000 bytes), `index_payloads` indexes three payloads of 400 bytes a batch,
    not all ten, and a search, which indexes whatever waits first, still finds the last one kept."""
    import edinbox._payloads

    monkeypatch.setattr(edinbox._payloads, "FTS_BATCH_BYTES", 1000)
    with Inbox(f"sqlite:///{tmp_path}/journal.db", consumer="orders", keep_payloads=True) as inbox:
        inbox.create_schema()
        for n in range(10):
            payload = (b"BGM+220+PO-%05d+9'" % n).ljust(400, b"x")
            inbox.process(Message(f"m{n}", "acme", payload), lambda tx, m: None)
        assert inbox.index_payloads() == 3
        assert [hit.message_id for hit in inbox.search("PO-00009")] == ["m9"]
        assert inbox.index_payloads() == 0
