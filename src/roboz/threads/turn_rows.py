"""A durable turn's writes to a PostgreSQL thread store, inside a transaction someone else owns.

Durable runs (``roboz.durable``) commit a turn's messages in the same PostgreSQL transaction as
the record of the workflow step that produced them, so the caller passes the connection of
its open transaction (anything whose ``execute(sql, parameters)`` takes psycopg's ``%s``
placeholders and returns rows, e.g. a psycopg connection) and commits or rolls back itself.
Each write is idempotent: a message goes to a sequence number fixed by the turn (the turn's
first sequence number plus its position), and is inserted only when that row is absent. A
row already there with the same message is the same write done before (a step that ran
again); a row with a different message is another writer's, and refuses the write, since the
turn would otherwise interleave with it.

Writes take the thread's write lock (the advisory lock ``PostgresThreadStore`` takes), so they
serialize with the store's own writers to the thread.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, cast

from roboz.threads._runs import StoredRunMessage
from roboz.threads.errors import ThreadStoreError
from roboz.threads.postgres import _WRITE_LOCK, _key  # pyright: ignore[reportPrivateUsage]
from roboz.threads.record import AgentThreadStatus, utc_now

__all__ = ["TurnConflictError", "begin_turn", "end_turn", "write_rows"]

_SCHEMA = re.compile(r"[a-z_][a-z0-9_]*")


class TurnConflictError(ThreadStoreError):
    """Another writer took a sequence number of the turn; nothing of this write was kept."""


def _q(schema: str) -> str:
    if not _SCHEMA.fullmatch(schema):
        raise ValueError(f"schema must be a plain lower-case SQL name, not {schema!r}")
    return f'"{schema}"'


def _lock(raw: Any, thread_id: str) -> None:
    raw.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_WRITE_LOCK, _key(thread_id) & 0x7FFFFFFF))


def begin_turn(
    raw: Any, schema: str, thread_id: str, *, created_by: str
) -> tuple[list[StoredRunMessage], int]:
    """Create ``thread_id`` when it does not exist, mark it the agent's turn, and return its
    rows and the next sequence number, as they are when the turn begins."""
    s = _q(schema)
    _lock(raw, thread_id)
    meta = {"created_from_agent_id": created_by, "visibility": "private"}
    raw.execute(
        f"INSERT INTO {s}.threads (thread_id, org_id, created_by, created, origin, meta, status) "
        "VALUES (%s, 'local', %s, %s, NULL, %s, %s) ON CONFLICT (thread_id) DO NOTHING",
        (
            thread_id,
            created_by,
            utc_now().isoformat(),
            json.dumps(meta),
            AgentThreadStatus.NOT_STARTED.value,
        ),
    )
    row = raw.execute(
        f"UPDATE {s}.threads SET status = %s, revision = revision + 1, "
        "status_revision = revision + 1 WHERE thread_id = %s RETURNING message_count, origin",
        (AgentThreadStatus.ROBOTO_TURN.value, thread_id),
    ).fetchone()
    next_seq, origin = int(row[0]), row[1]
    if origin not in (None, "api"):
        raise ThreadStoreError(
            f"thread {thread_id!r} is owned by {origin!r} and refuses new messages"
        )
    rows = raw.execute(
        "SELECT seq, extras, thread_id, "
        "CASE WHEN extras IS NULL THEN role END, "
        "CASE WHEN extras IS NULL THEN status END, "
        "CASE WHEN extras IS NULL THEN created END, "
        "CASE WHEN extras IS NULL THEN content END "
        f"FROM {s}.messages WHERE thread_id = %s ORDER BY seq",
        (thread_id,),
    ).fetchall()
    return [StoredRunMessage._make(r) for r in rows], next_seq


def write_rows(
    raw: Any,
    schema: str,
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
    s = _q(schema)
    _lock(raw, thread_id)
    seqs = [row[0] for row in rows]
    # The main query reads the messages as they were before this statement: a row found at
    # one of the numbers is one this statement did not insert, and must be the same message.
    written = raw.execute(
        "WITH r AS (SELECT * FROM unnest(%s::int[], %s::text[], %s::text[], %s::text[]) "
        "AS r(seq, role, content, extras)), "
        f"thread AS (UPDATE {s}.threads SET revision = revision + 1, message_count = "
        "GREATEST(message_count, %s) WHERE thread_id = %s RETURNING revision), "
        f"new AS (INSERT INTO {s}.messages (thread_id, seq, role, status, created, content, "
        "revision, base_revision, extras) SELECT %s, r.seq, r.role, 'completed', %s, r.content, "
        "thread.revision, thread.revision, r.extras FROM thread, r "
        "ON CONFLICT (thread_id, seq) DO NOTHING RETURNING 1) "
        "SELECT (SELECT count(*) FROM new), (SELECT min(r.seq) FROM r "
        f"JOIN {s}.messages m ON m.thread_id = %s AND m.seq = r.seq "
        "WHERE m.extras IS DISTINCT FROM r.extras)",
        (
            seqs,
            [row[1] for row in rows],
            [row[2] for row in rows],
            [row[3] for row in rows],
            max(seqs, default=-1) + 1,
            thread_id,
            thread_id,
            utc_now().isoformat(),
            thread_id,
        ),
    )
    if updated_extras:
        raw.execute(
            f"UPDATE {s}.messages m SET extras = u.extras "
            "FROM unnest(%s::int[], %s::text[]) AS u(seq, extras) "
            "WHERE m.thread_id = %s AND m.seq = u.seq",
            ([u[0] for u in updated_extras], [u[1] for u in updated_extras], thread_id),
        )
    new, foreign = written.fetchone()
    if foreign is not None:
        raise TurnConflictError(
            f"thread {thread_id!r}: sequence number {foreign} of this durable turn holds "
            "another writer's message (something wrote to the thread while the turn ran); "
            "nothing of this step was written"
        )
    return cast(int, new)


def end_turn(raw: Any, schema: str, thread_id: str, status: AgentThreadStatus) -> None:
    """The turn is over: the thread's status says whose turn is next."""
    s = _q(schema)
    _lock(raw, thread_id)
    raw.execute(
        f"UPDATE {s}.threads SET status = %s, revision = revision + 1, "
        "status_revision = revision + 1 WHERE thread_id = %s",
        (status.value, thread_id),
    )
