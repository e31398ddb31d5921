"""Reading rows of the thread store into models; errors name the row that is broken."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from roboz.threads._sql import Conn
from roboz.threads.compression import CompressionTier, compressed_view
from roboz.threads.content import decode_block, decode_blocks, decode_pairs, storable
from roboz.threads.errors import (
    ContinuationTokenError,
    CorruptRecordError,
    ThreadNotFoundError,
    UnencodableTextError,
)
from roboz.threads.record import AgentMessage, AgentRole, AgentThreadDelta, AgentThreadRecord
from roboz.threads.tokens import decode_token, encode_token

META_FIELDS = (
    "visibility",
    "created_by_principal",
    "model_profile",
    "created_from_agent_id",
    "created_from_trigger_id",
    "forked_from_thread_id",
    "forked_from_message_sequence_num",
    "parent_thread_id",
    "parent_tool_use_id",
)
"""Thread metadata kept in one JSON column; what queries filter or deltas track has its own."""


def current(column: str, table: str = "threads") -> str:
    """SQL for the thread's ``revision`` or ``message_count`` as it is now (``table``: how
    the query names the threads table).

    A run appending to a thread it holds on SQLite writes the message row only (see
    ``writer.insert_row``): the row's own revision and sequence number then run ahead of the
    thread row's, and the thread's are those of its last row. Every other write brings the
    thread row up to date first (``writer.allocate``, ``writer.bump_revision``), so the
    larger of the two is always current; read through this, never the column alone.
    """
    tail = "m.revision" if column == "revision" else "m.seq + 1"
    if column not in ("revision", "message_count"):
        raise ValueError(f"not a counter of a thread: {column!r}")
    return (
        f"coalesce((SELECT CASE WHEN {tail} > {table}.{column} THEN {tail} "
        f"ELSE {table}.{column} END FROM messages m WHERE m.thread_id = {table}.thread_id "
        f"ORDER BY m.seq DESC LIMIT 1), {table}.{column})"
    )


_THREAD_FIELDS = (
    "thread_id",
    "org_id",
    "created_by",
    "created",
    "origin",
    "meta",
    "status",
    "title",
    "tasks",
    "goals",
)


def thread_columns(table: str = "threads") -> str:
    """The columns ``record_from_row`` reads, of the threads table named ``table``."""
    fields = ", ".join(f"{table}.{field}" for field in _THREAD_FIELDS)
    return f"{fields}, {current('revision', table)}"


THREAD_COLUMNS = thread_columns()
REVISION = 10
"""Position of ``revision`` in THREAD_COLUMNS."""
MESSAGE_COLUMNS = "seq, role, status, created, content"
CHANGED_MESSAGES_SQL = (
    f"SELECT {MESSAGE_COLUMNS}, base_revision, block_revisions FROM messages "
    "WHERE thread_id = ? AND revision > ?"
)
"""Messages written after a revision, through the (thread_id, revision) index of every
message (PostgreSQL's schema)."""

_SINCE = f"SELECT {MESSAGE_COLUMNS}, base_revision, block_revisions FROM messages "
TAIL_AND_CHANGED_SQL = (
    f"{_SINCE}WHERE thread_id = ?1 AND seq > coalesce((SELECT seq FROM messages "
    "WHERE thread_id = ?1 AND base_revision <= ?2 ORDER BY seq DESC LIMIT 1), -1) "
    f"UNION ALL {_SINCE}WHERE thread_id = ?1 AND revision > ?2 AND revision > base_revision"
)
"""Messages written after a revision, without an index entry per message (SQLite's schema
from version 6, where only messages changed after they were written are indexed by
revision, ``messages_changed``): every write that creates or re-creates rows gives them the
thread's next revision as ``base_revision`` at the end of the thread (appends, a rewrite from
a message on, which re-marks all after it, a regeneration, which deletes them), so
``base_revision`` never falls along ``seq``, and the rows created after a revision are those
after the last row created before it: found walking back from the thread's end, as many rows
as are new. Rows changed since in place (a reply growing, marked failed) are the indexed
ones. A row can be both; the caller keeps one."""


def dump_list(items: Sequence[BaseModel], field: str = "tasks or goals") -> str:
    try:
        dumped = [item.model_dump(mode="json") for item in items]
    except PydanticSerializationError as error:
        raise UnencodableTextError(
            f"{field} cannot be stored: {error}; send valid Unicode text only; nothing was written"
        ) from None
    return storable(json.dumps(dumped, ensure_ascii=False), field)


def thread_row(conn: Conn, thread_id: str) -> tuple[Any, ...]:
    row = conn.execute(
        f"SELECT {THREAD_COLUMNS} FROM threads WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    if row is None:
        raise ThreadNotFoundError(f"no thread {thread_id!r}")
    return tuple(row)


DECODE_ERRORS = (ValidationError, ValueError, TypeError, RecursionError)
"""What decoding a stored value can raise: a read reports each as CorruptRecordError, the
one error a store documents for a row it cannot decode (RecursionError: JSON nested deeper
than the parser's stack, which ``json.loads`` does not bound)."""


def decode_content(thread_id: str, seq: int, content: str) -> list[Any]:
    try:
        return decode_blocks(content)
    except DECODE_ERRORS as error:
        raise CorruptRecordError(
            f"message {seq} of thread {thread_id!r} cannot be decoded: {error}"
        ) from error


def stored_pairs(thread_id: str, seq: int, content: str) -> list[list[str]]:
    """The ``[content_type, payload]`` pairs of a stored content column, not decoded."""
    try:
        return decode_pairs(content)
    except DECODE_ERRORS as error:
        raise CorruptRecordError(
            f"message {seq} of thread {thread_id!r} cannot be decoded: {error}"
        ) from error


def message_from_row(
    thread_id: str, row: Sequence[Any], *, unseen_after: int | None = None
) -> AgentMessage:
    """The message in ``row``; with ``unseen_after``, only blocks appended after that revision
    (``row`` then also carries base_revision and block_revisions)."""
    seq, role, status, created, content = row[:5]
    try:
        if unseen_after is None:
            blocks = decode_content(thread_id, seq, content)
        else:  # only the unseen blocks are decoded: a reply streaming in grows by the block
            blocks = unseen_blocks(thread_id, seq, content, row[5], row[6], unseen_after)
        return AgentMessage(
            role=AgentRole(role),
            status=status,
            created=datetime.fromisoformat(created),
            content=blocks,
        )
    except DECODE_ERRORS as error:
        if isinstance(error, CorruptRecordError):
            raise
        raise CorruptRecordError(
            f"message {seq} of thread {thread_id!r} cannot be decoded: {error}"
        ) from error


def unseen_blocks(
    thread_id: str,
    seq: int,
    content: str,
    base_revision: int | None,
    block_revisions: str | None,
    seen: int,
) -> list[Any]:
    """The blocks of a message (stored ``content``) a client at revision ``seen`` does not
    hold yet, decoded.

    A message created after ``seen`` is unseen whole; otherwise only blocks appended after it.
    """
    if base_revision is None or base_revision > seen:
        return decode_content(thread_id, seq, content)
    # NULL: no block was appended after the message was created.
    if not block_revisions:
        return []
    revisions = json.loads(block_revisions)
    try:
        pairs = decode_pairs(content)
    except DECODE_ERRORS as error:
        raise CorruptRecordError(
            f"message {seq} of thread {thread_id!r} cannot be decoded: {error}"
        ) from error
    if len(pairs) != len(revisions):
        raise CorruptRecordError(
            f"message {seq} of thread {thread_id!r} has {len(pairs)} blocks but "
            f"{len(revisions)} block revisions"
        )
    unseen = [pair for pair, revision in zip(pairs, revisions, strict=True) if revision > seen]
    try:
        return [decode_block(content_type, payload) for content_type, payload in unseen]
    except DECODE_ERRORS as error:
        raise CorruptRecordError(
            f"message {seq} of thread {thread_id!r} cannot be decoded: {error}"
        ) from error


def record_from_row(row: Sequence[Any], *, with_tasks_and_goals: bool) -> AgentThreadRecord:
    thread_id, org_id, created_by, created, origin, meta, status, title = row[:8]
    tasks, goals, revision = row[8:11]
    try:
        data: dict[str, Any] = {k: v for k, v in json.loads(meta).items() if k in META_FIELDS}
        if with_tasks_and_goals:
            data["tasks"] = json.loads(tasks) if tasks else []
            data["goals"] = json.loads(goals) if goals else []
        data.update(
            thread_id=thread_id,
            org_id=org_id,
            created_by=created_by,
            created=created,
            origin=origin,
            status=status,
            title=title,
            continuation_token=encode_token(thread_id, int(revision)),
        )
        return AgentThreadRecord.model_validate(data)
    except DECODE_ERRORS as error:
        raise CorruptRecordError(f"thread {thread_id!r} cannot be decoded: {error}") from error


def read_delta(
    conn: Conn,
    thread_id: str,
    continuation_token: str | None,
    changed_sql: str = CHANGED_MESSAGES_SQL,
) -> AgentThreadDelta:
    """What changed in ``thread_id`` after the token's revision, read in the caller's snapshot
    (``changed_sql``: how the backend's schema finds the messages written after it)."""
    row = thread_row(conn, thread_id)
    current = int(row[REVISION])
    seen = -1 if continuation_token is None else decode_token(continuation_token, thread_id)
    if seen > current:
        raise ContinuationTokenError(
            f"continuation token is at revision {seen} but thread {thread_id!r} is at "
            f"{current}; it was not issued by this store"
        )
    (reset,) = conn.execute(
        "SELECT min(from_seq) FROM resets WHERE thread_id = ? AND revision > ?",
        (thread_id, seen),
    ).fetchone()
    # A rewind re-marks every message from its index on (or deletes it), so whatever sits
    # there now carries a later revision and is selected by revision alone; the client
    # dropped those messages, so they go out whole.
    found = conn.execute(changed_sql, (thread_id, seen)).fetchall()
    rows = sorted({int(r[0]): r for r in found}.values(), key=lambda r: int(r[0]))
    changed = conn.execute(
        "SELECT status_revision > ?1, title_revision > ?1, tasks_revision > ?1, "
        "goals_revision > ?1 FROM threads WHERE thread_id = ?2",
        (seen, thread_id),
    ).fetchone()
    full = continuation_token is None
    record = record_from_row(row, with_tasks_and_goals=True)
    return AgentThreadDelta(
        continuation_token=record.continuation_token,
        messages_by_idx={
            int(r[0]): message_from_row(
                thread_id,
                r,
                unseen_after=None if full or (reset is not None and r[0] >= reset) else seen,
            )
            for r in rows
        },
        reset_from_message_sequence_num=None if full else reset,
        status=record.status if full or changed[0] else None,
        title=record.title if full or changed[1] else None,
        tasks=record.tasks if full or changed[2] else None,
        goals=record.goals if full or changed[3] else None,
    )


def read_compressed_view(conn: Conn, thread_id: str, tier: CompressionTier) -> list[AgentMessage]:
    """The thread at ``tier``, from the originals and stored variants in one snapshot."""
    thread_row(conn, thread_id)
    message_rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE thread_id = ? ORDER BY seq", (thread_id,)
    ).fetchall()
    variant_rows: list[tuple[int, str, str]] = conn.execute(
        "SELECT seq, tier, content FROM compressed WHERE thread_id = ?", (thread_id,)
    ).fetchall()
    originals = [message_from_row(thread_id, row) for row in message_rows]
    variants: dict[int, dict[CompressionTier, AgentMessage]] = {}
    for seq, tier_value, content in variant_rows:
        blocks = decode_content(thread_id, seq, content)
        variant = originals[seq].model_copy(update={"content": blocks})
        variants.setdefault(seq, {})[CompressionTier(tier_value)] = variant
    return compressed_view(originals, variants, tier)
