"""A durable turn's writes to a PostgreSQL thread store, inside a transaction someone else owns.

Durable runs (``roboz.durable``) commit a turn's messages in the same PostgreSQL transaction as
the record of the workflow step that produced them, so the caller passes the connection of
its open transaction (anything whose ``execute(sql, parameters)`` takes psycopg's ``%s``
placeholders and returns rows: a psycopg connection, or a DBOS datasource session's) through
:func:`connection`, and commits or rolls back itself. The rows are written by the thread
store's own writer (``roboz.threads.writer``), so a durable turn's thread is the same rows a
store's run writes.

Each write is idempotent: a message goes to a sequence number fixed by the turn (the turn's
first sequence number plus its position), and is inserted only when that row is absent. A row
already there with the same message is the same write done before (a step that ran again); a
row with a different message is another writer's, and refuses the write, since the turn would
otherwise interleave with it.

Writes take the thread's write lock (the advisory lock ``PostgresThreadStore`` takes), so they
serialize with the store's own writers to the thread.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from roboz.threads import writer
from roboz.threads._runs import NOTICE, RUN_CONTEXT, StoredRunMessage
from roboz.threads._sql import Conn
from roboz.threads.content import encode_blocks
from roboz.threads.errors import ThreadStoreError
from roboz.threads.postgres import (
    _WRITE_LOCK,  # pyright: ignore[reportPrivateUsage]
    _Connection,  # pyright: ignore[reportPrivateUsage]
    _key,  # pyright: ignore[reportPrivateUsage]
    check_schema_name,
)
from roboz.threads.record import AgentMessage, AgentThreadStatus

__all__ = [
    "TURN_MARK",
    "TurnConflictError",
    "begin_turn",
    "connection",
    "end_turn",
    "end_with_notice",
    "holder",
    "mark",
    "run_context",
    "set_run_context",
    "set_snapshot",
    "write_rows",
]

TURN_MARK = "durable_turn"
"""The key of ``threads.meta`` naming the durable turn that holds the thread."""


class TurnConflictError(ThreadStoreError):
    """Another writer took a sequence number of the turn; nothing of this write was kept."""


class _Transaction(_Connection):
    """The thread store's SQL on a connection inside one transaction, which knows the
    thread write locks it took: a lock is held until the transaction ends, so the functions
    here that each take it before they write ask the server for it once."""

    __slots__ = ("locked",)

    def __init__(self, raw: Any) -> None:
        super().__init__(raw)
        self.locked: set[str] = set()


def connection(raw: Any, schema: str | None) -> Conn:
    """The thread store's SQL on ``raw``, a connection inside the caller's open transaction:
    its tables are those of PostgreSQL schema ``schema`` until the transaction ends (None:
    the session's search path already names it). Use it for that one transaction only."""
    if schema is not None:
        check_schema_name(schema)
        raw.execute("SELECT set_config('search_path', %s, true)", (f'"{schema}"',))
    return _Transaction(raw)


def _lock(conn: Conn, thread_id: str) -> None:
    locked = conn.locked if isinstance(conn, _Transaction) else None
    if locked is not None and thread_id in locked:
        return
    conn.execute("SELECT pg_advisory_xact_lock(?, ?)", (_WRITE_LOCK, _key(thread_id) & 0x7FFFFFFF))
    if locked is not None:
        locked.add(thread_id)


def begin_turn(
    conn: Conn, thread_id: str, *, created_by: str
) -> tuple[list[StoredRunMessage], int]:
    """Create ``thread_id`` when it does not exist, mark it the agent's turn, and return its
    rows and the next sequence number, as they are when the turn begins."""
    _lock(conn, thread_id)
    meta = {"created_from_agent_id": created_by, "visibility": "private"}
    writer.insert_thread(conn, thread_id, "local", created_by, None, meta, None, if_absent=True)
    next_seq, origin = conn.execute(
        "SELECT message_count, origin FROM threads WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    if origin not in (None, "api"):
        raise ThreadStoreError(
            f"thread {thread_id!r} is owned by {origin!r} and refuses new messages"
        )
    writer.set_part(conn, thread_id, "status", AgentThreadStatus.ROBOTO_TURN.value)
    rows = conn.execute(
        "SELECT seq, extras, thread_id, "
        "CASE WHEN extras IS NULL THEN role END, "
        "CASE WHEN extras IS NULL THEN status END, "
        "CASE WHEN extras IS NULL THEN created END, "
        "CASE WHEN extras IS NULL THEN content END "
        "FROM messages WHERE thread_id = ? ORDER BY seq",
        (thread_id,),
    ).fetchall()
    return [StoredRunMessage._make(r) for r in rows], int(next_seq)


def write_rows(
    conn: Conn,
    thread_id: str,
    rows: Sequence[tuple[int, str, str, str]],
    updated_extras: Sequence[tuple[int, str]] = (),
) -> int:
    """Insert each ``(seq, role, content, extras)`` row unless the same row is there already;
    returns how many were new. ``updated_extras`` refreshes earlier rows of the turn.

    The lock, then one statement for all the rows (two with ``updated_extras``), whatever
    their number."""
    if not rows and not updated_extras:
        return 0
    _lock(conn, thread_id)
    new, foreign = writer.insert_rows_at(conn, thread_id, rows, updated_extras)
    if foreign is not None:
        raise TurnConflictError(
            f"thread {thread_id!r}: sequence number {foreign} of this durable turn holds "
            "another writer's message (something wrote to the thread while the turn ran); "
            "nothing of this step was written"
        )
    return new


def set_snapshot(conn: Conn, thread_id: str, tasks: str | None, goals: str | None) -> None:
    """Set the thread's task list and goals (JSON as stored); None leaves one as it is."""
    _lock(conn, thread_id)
    for part, value in (("tasks", tasks), ("goals", goals)):
        if value is not None:
            writer.set_part(conn, thread_id, part, value)


def end_turn(conn: Conn, thread_id: str, status: AgentThreadStatus) -> None:
    """The turn is over: the thread's status says whose turn is next, and no turn holds it."""
    _lock(conn, thread_id)
    writer.set_part(conn, thread_id, "status", status.value)
    writer.set_meta(conn, thread_id, TURN_MARK, None)


def mark(conn: Conn, thread_id: str, workflow_id: str) -> None:
    """Note which turn holds the thread (``end_turn`` clears it)."""
    _lock(conn, thread_id)
    writer.set_meta(conn, thread_id, TURN_MARK, workflow_id)


def holder(conn: Conn, thread_id: str) -> str | None:
    """The turn noted as holding the thread (None: none, or no such thread)."""
    _lock(conn, thread_id)
    row = conn.execute("SELECT meta FROM threads WHERE thread_id = ?", (thread_id,)).fetchone()
    return None if row is None else json.loads(row[0]).get(TURN_MARK)


def end_with_notice(conn: Conn, thread_id: str, notice: AgentMessage) -> None:
    """End the turn that holds the thread as a cancelled or failed run ends: ``notice``
    after its last message, the user's turn, no turn holding it."""
    _lock(conn, thread_id)
    writer.insert_row(
        conn,
        thread_id,
        notice.role.value,
        encode_blocks(notice.content),
        NOTICE,
        status=notice.status.value,
    )
    end_turn(conn, thread_id, AgentThreadStatus.USER_TURN)


def run_context(conn: Conn, thread_id: str) -> tuple[str | None, dict[str, Any]]:
    """The thread's status and run context (what ``set_run_context`` kept: client tools,
    the uses the thread waits for); ``(None, {})`` when there is no such thread."""
    _lock(conn, thread_id)
    row = conn.execute(
        "SELECT status, meta FROM threads WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    if row is None:
        return None, {}
    return str(row[0]), dict(json.loads(row[1]).get(RUN_CONTEXT) or {})


def set_run_context(conn: Conn, thread_id: str, context: dict[str, Any]) -> None:
    """Keep the thread's run context (as ``ThreadStore.set_run_context`` does)."""
    _lock(conn, thread_id)
    writer.set_meta(conn, thread_id, RUN_CONTEXT, context)
