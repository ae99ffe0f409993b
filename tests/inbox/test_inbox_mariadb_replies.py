"""The store's own PyMySQL connections read OK replies by a shorter path: what a caller sees is PyMySQL's own."""

from __future__ import annotations

import importlib
from typing import Any

import pymysql
import pytest

from edinbox import Inbox, Message, Outcome, Tx
from edinbox.stores._pymysql_replies import OkResult, QuickReplies
from services import require_service

OPTIONS: dict[str, Any] = {
    "host": "127.0.0.1",
    "port": 3306,
    "user": "root",
    "database": "test",
    "autocommit": False,
    "client_flag": pymysql.constants.CLIENT.MULTI_STATEMENTS,
}

# each statement on a fresh cursor; whether its first reply is read the short way (an OK packet)
SCRIPT: list[tuple[str, bool]] = [
    ("CREATE TEMPORARY TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10) UNIQUE)", True),
    ("INSERT INTO t (v) VALUES ('a'), ('b')", True),
    ("INSERT IGNORE INTO t (v) VALUES ('a')", True),  # a duplicate ignored: 0 rows and a warning
    ("UPDATE t SET v = CONCAT(v, 'x')", True),
    ("INSERT INTO t (id, v) VALUES (300, 'c')", True),  # insert id 300: a count of 251 or more takes 3 bytes
    ("INSERT INTO t (id, v) VALUES (70000, 'd')", True),  # and one of 65,536 or more 4
    ("INSERT INTO t (v) SELECT CONCAT('n', seq) FROM seq_1_to_300", True),  # 300 rows changed
    ("SELECT id, v FROM t ORDER BY id", False),  # a result set
    ("INSERT INTO t (v) VALUES ('e'); INSERT INTO t (v) VALUES ('f'), ('g'); SELECT COUNT(*) FROM t", True),
    ("DELETE FROM t WHERE v = 'nope'", True),
    ("INSERT INTO t (v) VALUES ('e')", False),  # a duplicate key: an error reply
    ("DO 0", True),
]


def replay(connection: Any) -> tuple[list[Any], list[bool]]:
    """Run SCRIPT on `connection`; return what PyMySQL's API showed after each step (counts, ids, warnings, rows,
    status, errors, further result sets) and whether each statement's first reply was read the short way."""
    seen: list[Any] = []
    quick: list[bool] = []
    for statement, _ in SCRIPT:
        cursor = connection.cursor()
        try:
            cursor.execute(statement)
        except pymysql.MySQLError as exc:
            seen.append(("error", type(exc).__name__, exc.args[0]))
        quick.append(isinstance(connection._result, OkResult))
        while True:
            seen.append(
                (
                    cursor.rowcount,
                    cursor.lastrowid,
                    cursor.warning_count,
                    cursor.description is not None and [d[0] for d in cursor.description],
                    cursor.fetchall() if cursor.description else None,
                    connection.insert_id(),
                    connection.server_status,
                )
            )
            if not cursor.nextset():
                break
        cursor.close()
    connection.commit()
    seen.append(("commit", connection.server_status))
    connection.begin()
    seen.append(("begin", connection.server_status))
    connection.rollback()
    seen.append(("rollback", connection.server_status))
    return seen, quick


def test_replies_read_the_short_way_show_what_pymysqls_readers_show() -> None:
    """The same statements on PyMySQL's connection and on the store's: every count, id, warning, row, status, error
    and further result set is the same; OK replies with one-byte counts are read the short way, others by PyMySQL."""
    require_service("mariadb")
    plain = pymysql.connect(**OPTIONS)
    quick = QuickReplies(**OPTIONS)
    try:
        expected, _ = replay(plain)
        got, short = replay(quick)
    finally:
        plain.close()
        quick.close()
    assert got == expected
    assert short == [way for _, way in SCRIPT]


def test_a_reply_that_times_out_is_a_lost_connection_as_in_pymysql() -> None:
    """A read that times out while the short way waits for the reply: PyMySQL's error (2013), connection closed, of
    PyMySQL's own class even once `MySQLdb.err` is imported through PyMySQL standing in for it (Django's backend):
    that import makes `pymysql.err` another module, with other classes."""
    require_service("mariadb")
    pymysql.install_as_MySQLdb()
    importlib.import_module("MySQLdb.err")
    errors = []
    for connect in (pymysql.connect, QuickReplies):
        connection = connect(**OPTIONS, read_timeout=1)
        try:
            connection.query("DO 0")
            assert isinstance(connection._result, OkResult) is (connect is QuickReplies)
            with pytest.raises(pymysql.OperationalError) as raised:
                connection.query("DO SLEEP(3)")
            errors.append((raised.value.args[0], raised.value.args[1].split(" (")[0], connection.open))
        finally:
            connection.close()
    assert errors[0] == errors[1] == (2013, "Lost connection to MySQL server during query", False)


def test_the_stores_own_connection_reads_replies_the_short_way(unique_name: str) -> None:
    """A delivery on a URL inbox: its journal INSERT, the handler's statement and COMMIT are read the short way."""
    require_service("mariadb")
    results: list[Any] = []

    def handler(tx: Tx, message: Message) -> None:
        results.append(tx.connection._result)  # the journal INSERT's reply
        with tx.connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {unique_name}_business VALUES (%s)", (message.message_id,))
            assert cursor.rowcount == 1
        results.append(tx.connection._result)

    admin = pymysql.connect(**{**OPTIONS, "autocommit": True})
    admin.query(f"CREATE TABLE {unique_name}_business (id VARCHAR(10))")
    try:
        with Inbox("mysql://root@127.0.0.1:3306/test", consumer="c", table=unique_name) as inbox:
            inbox.create_schema()
            assert inbox.process(Message("1", "s"), handler) is Outcome.PROCESSED
            assert inbox.process(Message("1", "s"), handler) is Outcome.DUPLICATE
    finally:
        suffixes = ("", "_version", "_outbox", "_payloads", "_business")
        admin.query(f"DROP TABLE IF EXISTS {', '.join(unique_name + suffix for suffix in suffixes)}")
        admin.close()
    assert [type(result) for result in results] == [OkResult, OkResult]
    assert [result.affected_rows for result in results] == [1, 1]
