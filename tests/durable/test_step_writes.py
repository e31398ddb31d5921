"""``roboz.durable.step_writes``: the writes a tool step makes run as one transaction on a
connection of their own, survive a lost connection, and report a failing statement once."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from roboz.durable.step_writes import StepWrites
from tests.durable.workers_support import fresh_database, rows, wait_until

pytest.importorskip("dbos")


@pytest.fixture
def url(postgres_cluster: Any) -> str:
    database = fresh_database(postgres_cluster.url)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, pid INTEGER)")
    return database


def _insert(raw: Any, key: int) -> int:
    """Two statements of one transaction, as a write body makes."""
    added = raw.execute("INSERT INTO t VALUES (%s, pg_backend_pid()) RETURNING pid", (key,))
    raw.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
    (pid,) = added.fetchone()
    return int(pid)


def test_a_write_commits_once_and_survives_its_connection_ending(url: str) -> None:
    writes = StepWrites(url)
    try:
        first = writes.run(_insert, 1)
        assert rows(url, "SELECT k, pid FROM t") == [(1, first)]
        # Its connection is kept for the next write, and dies meanwhile (a server restart,
        # an administrator): the next write is retried on a new one.
        assert rows(url, "SELECT pg_terminate_backend(%s)", first) == [(True,)]
        second = writes.run(_insert, 2)
        assert second != first
        assert rows(url, "SELECT k, pid FROM t ORDER BY k") == [(1, first), (2, second)]
    finally:
        writes.close()


def test_a_failing_statement_is_raised_once_and_leaves_nothing(url: str) -> None:
    writes = StepWrites(url)
    try:
        writes.run(_insert, 1)
        attempts: list[int] = []

        def twice(raw: Any) -> int:
            attempts.append(1)
            _insert(raw, 2)
            return _insert(raw, 1)  # the key is taken: the whole transaction goes

        with pytest.raises(psycopg.errors.UniqueViolation):
            writes.run(twice)
        assert attempts == [1]  # not an outage: not retried
        assert rows(url, "SELECT k FROM t") == [(1,)]
        writes.run(_insert, 3)  # the connection is usable again
        assert rows(url, "SELECT k FROM t ORDER BY k") == [(1,), (3,)]
    finally:
        writes.close()
    # Closed: none of its connections is left.
    others = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    gone = others + " AND pid <> pg_backend_pid()"
    wait_until(lambda: rows(url, gone) == [(0,)], 10, "its connections to end")
