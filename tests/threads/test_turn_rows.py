"""A durable turn's writes to a PostgreSQL thread store: idempotent at fixed sequence numbers,
refused where another writer took one, and readable through the store like any thread."""

from __future__ import annotations

import psycopg
import pytest

from roboz.agent.rows import thread_row
from roboz.models import Message, Role
from roboz.threads import AgentThreadStatus
from roboz.threads.postgres import PostgresThreadStore, migrate_database
from roboz.threads.turn_rows import (
    TurnConflictError,
    begin_turn,
    connection,
    end_turn,
    write_rows,
)
from tests.postgres import Cluster


def row(seq: int, text: str) -> tuple[int, str, str, str]:
    written = thread_row(Message(role=Role.USER, content=text), seq, None, 0)
    return (seq, written.role.value, written.content, written.extras)


def test_turn_rows_are_written_once_and_read_as_a_thread(postgres_cluster: Cluster) -> None:
    schema = postgres_cluster.new_schema()
    url = postgres_cluster.url
    migrate_database(url, schema=schema)
    with psycopg.connect(url) as raw:
        conn = connection(raw, schema)
        rows, first = begin_turn(conn, "t", created_by="agent")
        assert (rows, first) == ([], 0)
        assert write_rows(conn, "t", [row(0, "hi"), row(1, "there")]) == 2
        assert write_rows(conn, "t", [row(1, "there")]) == 0  # the same write again
        end_turn(conn, "t", AgentThreadStatus.USER_TURN)
    with PostgresThreadStore(url, schema=schema) as store:
        thread = store.get_thread("t")
        assert thread.status is AgentThreadStatus.USER_TURN
        assert [m.content[0].text for m in thread.messages] == ["hi", "there"]  # type: ignore[union-attr]
        store.append_message("t", thread.messages[0])  # the store goes on after the turn
        assert len(store.get_thread("t").messages) == 3
    with psycopg.connect(url) as raw:
        conn = connection(raw, schema)
        rows, first = begin_turn(conn, "t", created_by="agent")
        assert [r.seq for r in rows] == [0, 1, 2] and first == 3
        with pytest.raises(TurnConflictError, match="sequence number 2 of this durable turn"):
            write_rows(conn, "t", [row(2, "not what is there")])
