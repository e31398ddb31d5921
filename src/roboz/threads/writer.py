"""The one writer of the thread tables.

Every ``INSERT``, ``UPDATE`` and ``DELETE`` on ``threads``, ``messages``, ``resets`` and
``compressed`` is a function here, over a connection inside a transaction its caller opened
and will commit: a thread store's own transaction (``ThreadStoreBase``, SQLite or
PostgreSQL), or a transaction someone else owns, such as a durable turn's DBOS datasource
transaction (``roboz.threads.turn_rows``). The SQL is the shared, portable kind (``?``
placeholders, unqualified table names; see ``_sql``), so both stores and the durable turns
write the same rows the same way.

Every write to a thread raises its revision (``bump_revision``, or the allocation of a
sequence number, which raises it in the same statement); continuation tokens and deltas rely
on that. A function that refuses (a thread that is gone, a lease another run holds) raises
inside the caller's transaction, which the caller rolls back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from roboz.threads._rows import current, decode_content, stored_pairs, thread_row
from roboz.threads._sql import Conn
from roboz.threads.content import encode_blocks
from roboz.threads.errors import (
    MessageFinalizedError,
    MessageNotFoundError,
    ThreadBusyError,
    ThreadNotFoundError,
    ThreadReadOnlyError,
)
from roboz.threads.record import (
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentThreadStatus,
    ThreadOrigin,
    utc_now,
)

__all__ = [
    "allocate",
    "bump_revision",
    "delete_thread",
    "fail_generating",
    "generating_row",
    "grow_message",
    "growing_row",
    "insert_message",
    "insert_row",
    "insert_rows_at",
    "insert_thread",
    "put_compressed",
    "regenerate",
    "release_lease",
    "rewrite_message",
    "set_extras",
    "set_meta",
    "set_part",
    "take_lease",
]

_PARTS = ("status", "title", "tasks", "goals")

_NEXT = f"{current('revision')} + 1"
_COUNT = current("message_count")
# Every write but a run's own append sets the thread row from the thread as it is now (its
# last row may be ahead: see ``insert_row``), so the row is current again after it.


def insert_thread(
    conn: Conn,
    thread_id: str,
    org_id: str,
    created_by: str,
    title: str | None,
    meta: Mapping[str, Any],
    origin: ThreadOrigin | None = ThreadOrigin.API,
    status: AgentThreadStatus = AgentThreadStatus.NOT_STARTED,
    *,
    if_absent: bool = False,
) -> bool:
    """Create the thread row; True when created. An existing thread raises the driver's
    duplicate-key error, or with ``if_absent`` is left as it is (False)."""
    conflict = "ON CONFLICT (thread_id) DO NOTHING " if if_absent else ""
    created = conn.execute(
        "INSERT INTO threads (thread_id, org_id, created_by, created, origin, meta, status, "
        f"title) VALUES (?, ?, ?, ?, ?, ?, ?, ?) {conflict}RETURNING 1",
        (
            thread_id,
            org_id,
            created_by,
            utc_now().isoformat(),
            None if origin is None else ThreadOrigin(origin).value,
            json.dumps(dict(meta)),
            AgentThreadStatus(status).value,
            title,
        ),
    ).fetchone()
    return created is not None


def delete_thread(conn: Conn, thread_id: str) -> None:
    """Delete the thread with its messages (the tables below it cascade)."""
    conn.execute("DELETE FROM threads WHERE thread_id = ?", (thread_id,))


def bump_revision(conn: Conn, thread_id: str, *tracked: str) -> int:
    """Raise the thread's revision by one and return it; ``tracked`` names parts
    (status, title, tasks, goals) whose own change marker moves with it."""
    sets = "".join(f", {name}_revision = {_NEXT}" for name in tracked)
    row = conn.execute(
        f"UPDATE threads SET revision = {_NEXT}, message_count = {_COUNT}{sets} "
        "WHERE thread_id = ? RETURNING revision",
        (thread_id,),
    ).fetchone()
    if row is None:
        raise ThreadNotFoundError(f"no thread {thread_id!r}")
    return int(row[0])


def set_part(conn: Conn, thread_id: str, part: str, value: str | None) -> None:
    """Set the thread's ``status``, ``title``, ``tasks`` or ``goals`` (already encoded),
    moving that part's own change marker with the revision."""
    if part not in _PARTS:
        raise ValueError(f"not a tracked part of a thread: {part!r}")
    # One statement, as bump_revision's with the value set alongside: a round trip fewer.
    # Like every write but a run's own append, it brings the counters up to date first.
    row = conn.execute(
        f"UPDATE threads SET revision = {_NEXT}, message_count = {_COUNT}, "
        f"{part}_revision = {_NEXT}, {part} = ? WHERE thread_id = ? RETURNING revision",
        (value, thread_id),
    ).fetchone()
    if row is None:
        raise ThreadNotFoundError(f"no thread {thread_id!r}")


def set_meta(conn: Conn, thread_id: str, key: str, value: Any, where: str = "") -> None:
    """Set one key of the thread's metadata (None removes it). Read, changed and written in
    the caller's write transaction, whose per-thread write lock keeps two writers from
    losing each other's change."""
    row = conn.execute("SELECT meta FROM threads WHERE thread_id = ?", (thread_id,)).fetchone()
    if row is None:
        raise ThreadNotFoundError(f"no thread {thread_id!r}{f' in {where}' if where else ''}")
    meta = json.loads(row[0])
    if value is None:
        meta.pop(key, None)
    else:
        meta[key] = value
    conn.execute("UPDATE threads SET meta = ? WHERE thread_id = ?", (json.dumps(meta), thread_id))


# -- messages ---------------------------------------------------------------------------------


def allocate(
    conn: Conn, thread_id: str, lease_owner: str | None = None, where: str = ""
) -> tuple[int, int, str | None]:
    """Next sequence number, new revision and origin of ``thread_id``, in one statement.

    With ``lease_owner`` (a persisted run's write) the run must still hold the thread.
    """
    row = conn.execute(
        f"UPDATE threads SET revision = {_NEXT}, message_count = {_COUNT} + 1 "
        "WHERE thread_id = ? RETURNING message_count - 1, revision, origin, lease_owner",
        (thread_id,),
    ).fetchone()
    if row is None:
        raise ThreadNotFoundError(f"no thread {thread_id!r}")
    if lease_owner is not None and row[3] != lease_owner:
        raise ThreadBusyError(
            f"this run no longer holds thread {thread_id!r} in {where} (another run took it "
            "over after this one was presumed dead); nothing was written"
        )
    return int(row[0]), int(row[1]), row[2]


def insert_message(
    conn: Conn,
    thread_id: str,
    message: AgentMessage,
    content: str | None = None,
    *,
    allow_read_only: bool = True,
    extras: str | None = None,
) -> int:
    """Append a seed-001 message (``content``: its blocks, already encoded) and return its
    sequence number. A thread owned by an outside surface refuses it unless
    ``allow_read_only``."""
    seq, revision, origin = allocate(conn, thread_id)
    if origin not in (None, ThreadOrigin.API.value) and not allow_read_only:
        raise ThreadReadOnlyError(
            f"thread {thread_id!r} is owned by {origin!r} and refuses new messages"
        )
    conn.execute(
        "INSERT INTO messages (thread_id, seq, role, status, created, content, revision, "
        "base_revision, extras) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            thread_id,
            seq,
            message.role.value,
            message.status.value,
            message.created.isoformat(),
            encode_blocks(message.content) if content is None else content,
            revision,
            revision,
            extras,
        ),
    )
    return seq


def insert_row(
    conn: Conn,
    thread_id: str,
    role: str,
    content: str,
    extras: str,
    *,
    status: str = "completed",
    lease_owner: str | None = None,
    where: str = "",
    expected: tuple[int, int] | None = None,
    row_only: bool = False,
) -> tuple[int, int]:
    """Append a run's message row (blocks encoded, RoboZ ``extras``) at the next sequence
    number; with ``lease_owner``, only while that run holds the thread. Returns the row's
    sequence number and revision.

    ``expected`` is the thread's ``(message_count, revision)`` as the run's last write left
    it: the run holds the lease, so unless another writer touched the thread since, those are
    still current, and the thread row is moved on by one UPDATE that checks them (and the
    lease) instead of one that reads the row back. With ``row_only`` the thread row is not
    written at all: the row is inserted only if the thread row shows the lease and no later
    revision, and the thread's count and revision are then read from its last row
    (``_rows.current``), which saves a page written per message. When the check matches no
    row, the thread did move: allocated as usual.
    """
    if expected is not None and lease_owner is not None:
        seq, revision = expected
        allocated = seq, revision + 1
        now = utc_now().isoformat()
        if row_only:
            # Any other write raised the thread row's revision past the run's last one.
            moved = conn.execute(
                "INSERT INTO messages (thread_id, seq, role, status, created, content, "
                "revision, base_revision, extras) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? "
                "FROM threads WHERE thread_id = ? AND lease_owner = ? AND revision <= ?",
                (
                    thread_id,
                    seq,
                    role,
                    status,
                    now,
                    content,
                    revision + 1,
                    revision + 1,
                    extras,
                    thread_id,
                    lease_owner,
                    revision,
                ),
            )
            if moved.rowcount == 1:
                return allocated
        else:
            moved = conn.execute(
                "UPDATE threads SET revision = ?, message_count = ? WHERE thread_id = ? "
                "AND revision = ? AND message_count = ? AND lease_owner = ?",
                (revision + 1, seq + 1, thread_id, revision, seq, lease_owner),
            )
            if moved.rowcount == 1:
                _insert(conn, thread_id, seq, role, status, content, revision + 1, extras)
                return allocated
    seq, revision, _ = allocate(conn, thread_id, lease_owner, where)
    _insert(conn, thread_id, seq, role, status, content, revision, extras)
    return seq, revision


def _insert(
    conn: Conn,
    thread_id: str,
    seq: int,
    role: str,
    status: str,
    content: str,
    revision: int,
    extras: str,
) -> None:
    conn.execute(
        "INSERT INTO messages (thread_id, seq, role, status, created, content, revision, "
        "base_revision, extras) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (thread_id, seq, role, status, utc_now().isoformat(), content, revision, revision, extras),
    )


def generating_row(
    conn: Conn, thread_id: str, sequence_num: int, role: AgentRole | None
) -> tuple[tuple[Any, ...], list[Any]]:
    """The stored row (``role, status, content, base_revision, block_revisions``) and blocks
    of a message still being generated; a finished one raises MessageFinalizedError."""
    row = _generating(conn, thread_id, sequence_num, role)
    return row, decode_content(thread_id, sequence_num, row[2])


def growing_row(
    conn: Conn, thread_id: str, sequence_num: int
) -> tuple[tuple[Any, ...], list[list[str]]]:
    """As :func:`generating_row`, with the blocks as their stored ``[content_type, payload]``
    pairs: a message that only grows keeps them as they are, so none is decoded (a reply
    streaming in grows by a block per piece)."""
    row = _generating(conn, thread_id, sequence_num, None)
    return row, stored_pairs(thread_id, sequence_num, row[2])


def _generating(
    conn: Conn, thread_id: str, sequence_num: int, role: AgentRole | None
) -> tuple[Any, ...]:
    row = conn.execute(
        "SELECT role, status, content, base_revision, block_revisions FROM messages "
        "WHERE thread_id = ? AND seq = ?",
        (thread_id, sequence_num),
    ).fetchone()
    if row is None:
        thread_row(conn, thread_id)
        raise MessageNotFoundError(f"thread {thread_id!r} has no message {sequence_num}")
    if AgentMessageStatus(row[1]).is_terminal():
        raise MessageFinalizedError(
            f"message {sequence_num} of thread {thread_id!r} is {row[1]}; it can no "
            "longer change in place"
        )
    if role is not None and row[0] != role.value:
        raise ValueError(f"message {sequence_num} is {row[0]}; its role cannot change")
    return tuple(row)


def insert_rows_at(
    conn: Conn,
    thread_id: str,
    rows: Sequence[tuple[int, str, str, str]],
    updated_extras: Sequence[tuple[int, str]] = (),
) -> tuple[int, int | None]:
    """(PostgreSQL: a durable turn's rows.) Insert ``(seq, role, content, extras)`` rows at
    sequence numbers their writer fixed, each only where that number is free, and refresh
    ``updated_extras``: one statement for the rows whatever their number (two with
    extras), results read once at the end, so a pipelined transaction waits once. Returns
    how many rows were new and the first number held by a different message (None: every
    number was free or held the same message, a write done before)."""
    written = None
    if rows:
        seqs = [row[0] for row in rows]
        # The main query reads the messages as they were before this statement: a row found
        # at one of the numbers is one this statement did not insert, and must be the same.
        written = conn.execute(
            "WITH r AS (SELECT * FROM unnest(?::int[], ?::text[], ?::text[], ?::text[]) "
            "AS r(seq, role, content, extras)), "
            "thread AS (UPDATE threads SET revision = revision + 1, message_count = "
            "GREATEST(message_count, ?) WHERE thread_id = ? RETURNING revision), "
            "new AS (INSERT INTO messages (thread_id, seq, role, status, created, content, "
            "revision, base_revision, extras) SELECT ?, r.seq, r.role, 'completed', ?, "
            "r.content, thread.revision, thread.revision, r.extras FROM thread, r "
            "ON CONFLICT (thread_id, seq) DO NOTHING RETURNING 1) "
            "SELECT (SELECT count(*) FROM new), (SELECT min(r.seq) FROM r "
            "JOIN messages m ON m.thread_id = ? AND m.seq = r.seq "
            "WHERE m.extras IS DISTINCT FROM r.extras)",
            (
                seqs,
                [row[1] for row in rows],
                [row[2] for row in rows],
                [row[3] for row in rows],
                max(seqs) + 1,
                thread_id,
                thread_id,
                utc_now().isoformat(),
                thread_id,
            ),
        )
    if updated_extras:
        conn.execute(
            "UPDATE messages m SET extras = u.extras "
            "FROM unnest(?::int[], ?::text[]) AS u(seq, extras) "
            "WHERE m.thread_id = ? AND m.seq = u.seq",
            ([u[0] for u in updated_extras], [u[1] for u in updated_extras], thread_id),
        )
    if written is None:
        return 0, None
    new, foreign = written.fetchone()
    return int(new), None if foreign is None else int(foreign)


def set_extras(conn: Conn, thread_id: str, updates: Sequence[tuple[int, str]]) -> None:
    """Replace the RoboZ ``extras`` of earlier rows (e.g. how often a message was shown).
    What a user interface reads (the blocks) does not change, so no revision moves."""
    for seq, extras in updates:
        conn.execute(
            "UPDATE messages SET extras = ? WHERE thread_id = ? AND seq = ?",
            (extras, thread_id, seq),
        )


def grow_message(
    conn: Conn,
    thread_id: str,
    sequence_num: int,
    row: tuple[Any, ...],
    held: list[list[str]],
    added: list[Any],
    status: str,
) -> int:
    """Append blocks ``added`` to a message still being generated (``row``: its stored
    ``role, status, content, base_revision, block_revisions``; ``held``: its stored blocks,
    :func:`growing_row`) and set its status; each new block records the revision it came
    with, which is returned."""
    encoded: list[list[str]] = json.loads(encode_blocks(added)) if added else []
    revision = bump_revision(conn, thread_id)
    base = row[3] if row[3] is not None else revision
    revisions = json.loads(row[4]) if row[4] else [base] * len(held)
    revisions += [revision] * len(added)
    conn.execute(
        "UPDATE messages SET status = ?, content = ?, revision = ?, block_revisions = ? "
        "WHERE thread_id = ? AND seq = ?",
        (
            status,
            json.dumps([*held, *encoded], ensure_ascii=False),
            revision,
            json.dumps(revisions),
            thread_id,
            sequence_num,
        ),
    )
    if added:
        conn.execute(
            "DELETE FROM compressed WHERE thread_id = ? AND seq = ?", (thread_id, sequence_num)
        )
    return revision


def rewrite_message(conn: Conn, thread_id: str, sequence_num: int, message: AgentMessage) -> None:
    """Replace a generating message's content in place: clients drop every message from
    ``sequence_num`` on and are resent them whole."""
    revision = bump_revision(conn, thread_id)
    conn.execute(
        "UPDATE messages SET status = ?1, content = ?2, revision = ?3, "
        "base_revision = ?3, block_revisions = NULL WHERE thread_id = ?4 AND seq = ?5",
        (message.status.value, encode_blocks(message.content), revision, thread_id, sequence_num),
    )
    conn.execute(
        "UPDATE messages SET revision = ?1, base_revision = ?1 WHERE thread_id = ?2 AND seq > ?3",
        (revision, thread_id, sequence_num),
    )
    conn.execute(
        "DELETE FROM compressed WHERE thread_id = ? AND seq = ?", (thread_id, sequence_num)
    )
    _reset(conn, thread_id, revision, sequence_num)


def _reset(conn: Conn, thread_id: str, revision: int, from_seq: int) -> None:
    conn.execute(
        "INSERT INTO resets (thread_id, revision, from_seq) VALUES (?, ?, ?)",
        (thread_id, revision, from_seq),
    )


def regenerate(conn: Conn, thread_id: str, sequence_num: int) -> None:
    """Abandon the messages from ``sequence_num`` on (the caller checked it exists): the
    next delta of a client that saw any of them resets from there."""
    revision = bump_revision(conn, thread_id)
    for table in ("messages", "compressed"):
        conn.execute(
            f"DELETE FROM {table} WHERE thread_id = ? AND seq >= ?", (thread_id, sequence_num)
        )
    conn.execute(
        "UPDATE threads SET message_count = ? WHERE thread_id = ?", (sequence_num, thread_id)
    )
    _reset(conn, thread_id, revision, sequence_num)


def put_compressed(conn: Conn, thread_id: str, sequence_num: int, tier: str, content: str) -> None:
    """Store (or replace) the compressed variant of a message at ``tier``."""
    conn.execute(
        "INSERT INTO compressed (thread_id, seq, tier, content) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (thread_id, seq, tier) DO UPDATE SET content = excluded.content",
        (thread_id, sequence_num, tier, content),
    )


def fail_generating(conn: Conn, thread_id: str) -> None:
    """Mark the messages still being generated failed (their writer is gone)."""
    revision = bump_revision(conn, thread_id)
    conn.execute(
        "UPDATE messages SET status = 'failed', revision = ? "
        "WHERE thread_id = ? AND status = 'generating'",
        (revision, thread_id),
    )


# -- the run lease ----------------------------------------------------------------------------


def take_lease(conn: Conn, thread_id: str, owner: str, pid: int | None, start: str | None) -> None:
    """``owner``'s run holds the thread now; it is the agent's turn."""
    conn.execute(
        "UPDATE threads SET lease_owner = ?, lease_pid = ?, lease_start = ?, "
        f"status = ?, revision = {_NEXT}, status_revision = {_NEXT}, message_count = {_COUNT} "
        "WHERE thread_id = ?",
        (owner, pid, start, AgentThreadStatus.ROBOTO_TURN.value, thread_id),
    )


def release_lease(conn: Conn, thread_id: str, status: AgentThreadStatus) -> None:
    """No run holds the thread any more; its status says whose turn is next."""
    conn.execute(
        "UPDATE threads SET lease_owner = NULL, lease_pid = NULL, lease_start = NULL, "
        f"status = ?, revision = {_NEXT}, status_revision = {_NEXT}, message_count = {_COUNT} "
        "WHERE thread_id = ?",
        (AgentThreadStatus(status).value, thread_id),
    )
