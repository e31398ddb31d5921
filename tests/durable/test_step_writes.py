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


def _turn(url: str, workflow_id: str, status: str) -> None:
    """A DBOS workflow row for ``workflow_id`` (what the write's cancel guard reads)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO dbos.workflow_status (workflow_uuid, status, name) VALUES (%s, %s, %s)",
            (workflow_id, status, "roboz.turn"),
        )


def _message(seq: int, text: str) -> tuple[int, str, str, str]:
    from roboz.agent.rows import thread_row
    from roboz.models import Message, Role

    written = thread_row(Message(role=Role.USER, content=text), seq, None, 0)
    return (seq, written.role.value, written.content, written.extras)


def test_progress_is_written_once_and_never_for_a_cancelled_turn(durable_url: str) -> None:
    from roboz.durable.cancel import cancelled
    from roboz.durable.step_writes import write_progress
    from roboz.threads import turn_rows

    with psycopg.connect(durable_url) as raw:  # the thread, as a turn's begin leaves it
        turn_rows.begin_turn(turn_rows.connection(raw, "roboz"), "p", created_by="agent")
    _turn(durable_url, "p/1", "PENDING")
    _turn(durable_url, "p/2", "CANCELLED")
    writes = StepWrites(durable_url, schema="roboz")
    stored = "SELECT seq, content FROM roboz.messages WHERE thread_id = 'p' ORDER BY seq"
    try:
        batch = [_message(0, "hi"), _message(1, "there")]
        assert writes.run(write_progress, "roboz", "p/1", "p", batch) == 2
        assert writes.run(write_progress, "roboz", "p/1", "p", batch) == 0  # a step run again
        written = rows(durable_url, stored)
        assert [seq for seq, _ in written] == [0, 1]
        # A cancelled turn's write leaves nothing, and says it was cancelled: also when its
        # rows would clash with what the canceller wrote (here: another message at seq 1).
        error = type(cancelled("p/2"))
        for attempt in ([_message(2, "more")], [_message(1, "clash"), _message(2, "more")]):
            with pytest.raises(error, match="'p/2' was cancelled"):
                writes.run(write_progress, "roboz", "p/2", "p", attempt)
            assert rows(durable_url, stored) == written
        # Not cancelled, the clash is refused as another writer's, and nothing is kept.
        with pytest.raises(turn_rows.TurnConflictError, match="sequence number 1"):
            writes.run(write_progress, "roboz", "p/1", "p", [_message(1, "clash")])
        assert rows(durable_url, stored) == written
        count = "SELECT message_count FROM roboz.threads WHERE thread_id = 'p'"
        assert rows(durable_url, count) == [(2,)]  # the refused writes moved nothing
    finally:
        writes.close()
