"""The thread store's behaviour, written once for every backend.

A backend (:class:`~roboz.threads.store.SQLiteThreadStore`,
:class:`~roboz.threads.postgres.PostgresThreadStore`) supplies transactions, names itself in
errors and answers whether a run's owner is alive; everything else (sequence numbers,
revisions, deltas, forks, regenerated turns, compressed variants, the run lease) lives here so
the backends cannot drift apart.

Every write to a thread raises that thread's revision; continuation tokens carry the revision a
client has seen, and :meth:`ThreadStoreBase.delta_since` returns exactly what changed after it.
A write transaction is opened for one thread (``_write(thread_id)``) so a backend can serialize
writers per thread; all statements are portable SQL with ``?`` placeholders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from roboz.threads import writer
from roboz.threads._rows import (
    CHANGED_MESSAGES_SQL,
    MESSAGE_COLUMNS,
    THREAD_COLUMNS,
    current,
    dump_list,
    message_from_row,
    read_compressed_view,
    read_delta,
    record_from_row,
    thread_row,
)
from roboz.threads._runs import RunStoreMixin
from roboz.threads._sql import Conn
from roboz.threads.compression import (
    CompressionTier,
    ensure_verbatim,
    validate_variant,
)
from roboz.threads.content import AgentTextContent, decode_pairs, encode_blocks, storable
from roboz.threads.errors import (
    MessageGeneratingError,
    MessageNotFoundError,
    ThreadNotFoundError,
)
from roboz.threads.record import (
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentThreadDelta,
    AgentThreadRecord,
    AgentThreadStatus,
    ThreadOrigin,
    ThreadVisibility,
    new_thread_id,
)
from roboz.threads.task import AgentTask, AgentThreadGoalRecord


class ThreadStoreBase(RunStoreMixin):
    """Threads, messages, tasks, goals and compressed variants, on whatever the backend's
    connections reach."""

    read_only: bool
    _where: str
    """How errors name the store: a file path or a server."""
    _read: Callable[[], AbstractContextManager[Conn]]
    _write: Callable[[str], AbstractContextManager[Conn]]
    _duplicate_key: tuple[type[Exception], ...]
    """What the driver raises when an insert hits an existing primary key."""
    _changed_messages_sql = CHANGED_MESSAGES_SQL
    """How a delta finds the messages written after a revision (``_rows``; the schema's
    indexes decide)."""

    # -- threads ------------------------------------------------------------------------------

    def create_thread(
        self,
        *,
        org_id: str,
        created_by: str,
        thread_id: str | None = None,
        title: str | None = None,
        visibility: ThreadVisibility = ThreadVisibility.PRIVATE,
        origin: ThreadOrigin | None = ThreadOrigin.API,
        created_by_principal: str | None = None,
        model_profile: str | None = None,
        created_from_agent_id: str | None = None,
        created_from_trigger_id: str | None = None,
        parent_thread_id: str | None = None,
        parent_tool_use_id: str | None = None,
        messages: Sequence[AgentMessage] = (),
    ) -> AgentThreadRecord:
        """Create a thread (optionally with first messages) and return its record.

        ``parent_thread_id`` and ``parent_tool_use_id`` link the thread of a nested agent to
        the thread and tool call of the agent that ran it.
        """
        meta: dict[str, Any] = {
            "visibility": ThreadVisibility(visibility).value,
            "created_by_principal": created_by_principal,
            "model_profile": model_profile,
            "created_from_agent_id": created_from_agent_id,
            "created_from_trigger_id": created_from_trigger_id,
            "parent_thread_id": parent_thread_id,
            "parent_tool_use_id": parent_tool_use_id,
        }
        return self._create(org_id, created_by, thread_id, title, origin, meta, messages)

    def _create(
        self,
        org_id: str,
        created_by: str,
        thread_id: str | None,
        title: str | None,
        origin: ThreadOrigin | None,
        meta: dict[str, Any],
        messages: Sequence[AgentMessage],
    ) -> AgentThreadRecord:
        status = AgentThreadStatus.USER_TURN if messages else AgentThreadStatus.NOT_STARTED
        thread_id = thread_id or new_thread_id()
        named = {"thread_id": thread_id, "org_id": org_id, "created_by": created_by}
        for field, value in [*named.items(), ("title", title or "")]:
            storable(value, field)
        for message in messages:
            ensure_verbatim(message)
        with self._write(thread_id) as conn:
            self._insert_thread(conn, thread_id, org_id, created_by, title, meta, origin, status)
            for message in messages:
                writer.insert_message(conn, thread_id, message)
        return self.get_thread(thread_id)

    def _insert_thread(
        self,
        conn: Conn,
        thread_id: str,
        org_id: str,
        created_by: str,
        title: str | None,
        meta: dict[str, Any],
        origin: ThreadOrigin | None = ThreadOrigin.API,
        status: AgentThreadStatus = AgentThreadStatus.NOT_STARTED,
    ) -> None:
        try:
            writer.insert_thread(conn, thread_id, org_id, created_by, title, meta, origin, status)
        except self._duplicate_key:
            raise ValueError(f"a thread {thread_id!r} already exists") from None

    def get_thread(self, thread_id: str, *, with_tasks_and_goals: bool = True) -> AgentThreadRecord:
        """The whole thread: metadata, every message, and (by default) tasks and goals.

        A run whose process died is marked interrupted first, so no thread reads as
        "running" forever."""
        self.recover_interrupted(thread_id)
        with self._read() as conn:
            row = thread_row(conn, thread_id)
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE thread_id = ? ORDER BY seq",
                (thread_id,),
            ).fetchall()
        record = record_from_row(row, with_tasks_and_goals=with_tasks_and_goals)
        record.messages = [message_from_row(thread_id, r) for r in rows]
        return record

    def list_threads(
        self, *, org_id: str | None = None, created_by: str | None = None, limit: int = 100
    ) -> list[AgentThreadRecord]:
        """Newest first; records carry metadata only (no messages, tasks or goals loaded)."""
        clauses: list[str] = []
        params: list[str] = []
        for column, value in (("org_id", org_id), ("created_by", created_by)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {THREAD_COLUMNS} FROM threads {where} "
                "ORDER BY created DESC, thread_id LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [record_from_row(row, with_tasks_and_goals=False) for row in rows]

    def fork_thread(
        self,
        source_thread_id: str,
        up_to_sequence_num: int,
        *,
        created_by: str,
        created_by_principal: str | None = None,
        title: str | None = None,
        visibility: ThreadVisibility = ThreadVisibility.PRIVATE,
    ) -> AgentThreadRecord:
        """A new, writable thread holding copies of messages 0..``up_to_sequence_num``.

        The fork belongs to ``created_by`` (private unless ``visibility`` says otherwise) and
        keeps the source's org, model profile and, unless given, title. It does not inherit
        origin, tasks, goals or the created_from_* fields: a fork is its own thread.
        """
        source = self.get_thread(source_thread_id, with_tasks_and_goals=False)
        if not 0 <= up_to_sequence_num < len(source.messages):
            raise MessageNotFoundError(
                f"thread {source_thread_id!r} has no message {up_to_sequence_num} to fork from"
            )
        copied = source.messages[: up_to_sequence_num + 1]
        unfinished = [i for i, m in enumerate(copied) if not m.status.is_terminal()]
        if unfinished:
            raise MessageGeneratingError(
                f"cannot fork through message(s) {unfinished} still being generated"
            )
        meta: dict[str, Any] = {
            "visibility": ThreadVisibility(visibility).value,
            "created_by_principal": created_by_principal,
            "model_profile": source.model_profile,
            "forked_from_thread_id": source_thread_id,
            "forked_from_message_sequence_num": up_to_sequence_num,
        }
        title = title if title is not None else source.title
        return self._create(source.org_id, created_by, None, title, ThreadOrigin.API, meta, copied)

    def set_status(self, thread_id: str, status: AgentThreadStatus) -> None:
        value = AgentThreadStatus(status).value
        with self._write(thread_id) as conn:
            writer.set_part(conn, thread_id, "status", value)

    def set_title(self, thread_id: str, title: str) -> None:
        storable(title, "title")
        with self._write(thread_id) as conn:
            writer.set_part(conn, thread_id, "title", title)

    def set_tasks(self, thread_id: str, tasks: Sequence[AgentTask]) -> None:
        """Replace the task list (stored ordered by position)."""
        ordered = sorted(tasks, key=lambda task: task.position)
        encoded = dump_list(ordered, "tasks")
        with self._write(thread_id) as conn:
            writer.set_part(conn, thread_id, "tasks", encoded)

    def set_goals(self, thread_id: str, goals: Sequence[AgentThreadGoalRecord]) -> None:
        """Replace the declared goals (stored ordered by the turn that declared them)."""
        ordered = sorted(goals, key=lambda goal: (goal.message_sequence_num, goal.created))
        encoded = dump_list(ordered, "goals")
        with self._write(thread_id) as conn:
            writer.set_part(conn, thread_id, "goals", encoded)

    # -- messages -----------------------------------------------------------------------------

    def append_message(
        self, thread_id: str, message: AgentMessage, *, allow_read_only: bool = False
    ) -> int:
        """Append ``message`` and return its sequence number.

        Threads owned by an outside surface refuse this (ThreadReadOnlyError) unless the
        owner writes with ``allow_read_only=True``.
        """
        ensure_verbatim(message)
        content = encode_blocks(message.content)  # fail before the transaction, not inside
        with self._write(thread_id) as conn:
            return writer.insert_message(
                conn, thread_id, message, content, allow_read_only=allow_read_only
            )

    def append_blocks(
        self,
        thread_id: str,
        sequence_num: int,
        blocks: Sequence[Any],
        status: AgentMessageStatus | None = None,
    ) -> None:
        """Append ``blocks`` to a message still being generated, optionally setting its status.

        This is how a message grows (streamed text arrives as one text block per fragment):
        a client that already holds the message is sent only the new blocks.
        """
        message = AgentMessage(
            role=AgentRole.ASSISTANT, content=list(blocks), status=AgentMessageStatus.GENERATING
        )
        ensure_verbatim(message)
        with self._write(thread_id) as conn:
            row, held = writer.growing_row(conn, thread_id, sequence_num)
            writer.grow_message(
                conn, thread_id, sequence_num, row, held, list(blocks), status or row[1]
            )

    def update_message(self, thread_id: str, sequence_num: int, message: AgentMessage) -> None:
        """Set the content and status of a message that is still being generated.

        Blocks are what clients hold, so growth is stored as appended blocks: new blocks after
        the held ones are appended, and a last text block that grew keeps its held text and
        gets the added text as a new block after it. Content that does not extend what is
        stored rewinds the thread to this message (the next delta resets clients there).
        A message already in a terminal status cannot change (MessageFinalizedError); to
        redo it, use :meth:`regenerate_turn`. Compressed variants of it are dropped.
        """
        ensure_verbatim(message)
        encode_blocks(message.content)  # fail before the transaction, not inside
        with self._write(thread_id) as conn:
            row, held = writer.generating_row(conn, thread_id, sequence_num, message.role)
            added = extension(held, list(message.content))
            if added is not None:
                status = message.status.value
                pairs = decode_pairs(row[2])  # decoded once already: well formed
                writer.grow_message(conn, thread_id, sequence_num, row, pairs, added, status)
                return
            writer.rewrite_message(conn, thread_id, sequence_num, message)

    def regenerate_turn(
        self, thread_id: str, sequence_num: int, replacement: AgentMessage | None = None
    ) -> None:
        """Abandon messages from ``sequence_num`` on, optionally putting ``replacement`` there.

        The next delta for a client that saw any of the abandoned messages carries
        ``reset_from_message_sequence_num`` so the client drops them before applying it.
        """
        if replacement is not None:
            ensure_verbatim(replacement)
        with self._write(thread_id) as conn:
            row = conn.execute(
                f"SELECT {current('message_count')} FROM threads WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
            if row is None:
                raise ThreadNotFoundError(f"no thread {thread_id!r}")
            if not 0 <= sequence_num < row[0]:
                raise MessageNotFoundError(f"thread {thread_id!r} has no message {sequence_num}")
            writer.regenerate(conn, thread_id, sequence_num)
            if replacement is not None:
                writer.insert_message(conn, thread_id, replacement)

    # -- deltas -------------------------------------------------------------------------------

    def delta_since(self, thread_id: str, continuation_token: str | None) -> AgentThreadDelta:
        """Everything that changed after ``continuation_token`` (None: the whole thread)."""
        self.recover_interrupted(thread_id)
        with self._read() as conn:
            return read_delta(conn, thread_id, continuation_token, self._changed_messages_sql)

    # -- compression --------------------------------------------------------------------------

    def put_compressed(
        self, thread_id: str, sequence_num: int, tier: CompressionTier, variant: AgentMessage
    ) -> None:
        """Store ``variant`` as message ``sequence_num`` at ``tier``; the original stays."""
        tier = CompressionTier(tier)
        content = encode_blocks(variant.content)
        with self._write(thread_id) as conn:
            row = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE thread_id = ? AND seq = ?",
                (thread_id, sequence_num),
            ).fetchone()
            if row is None:
                raise MessageNotFoundError(f"thread {thread_id!r} has no message {sequence_num}")
            validate_variant(message_from_row(thread_id, row), variant, tier)
            writer.put_compressed(conn, thread_id, sequence_num, tier.value, content)

    def get_compressed_thread(self, thread_id: str, tier: CompressionTier) -> list[AgentMessage]:
        """The thread's messages as seen at ``tier`` (originals where no variant exists)."""
        with self._read() as conn:
            return read_compressed_view(conn, thread_id, CompressionTier(tier))


def extension(held: list[Any], new: list[Any]) -> list[Any] | None:
    """The blocks to append to ``held`` so that it reads as ``new``, or None when ``new`` does
    not extend ``held``. A last text block that grew becomes a new block with the added text."""
    count = len(held)
    if new[:count] == held:
        return new[count:]
    if not count or len(new) < count or new[: count - 1] != held[: count - 1]:
        return None
    last, grown = held[-1], new[count - 1]
    if (
        isinstance(last, AgentTextContent)
        and isinstance(grown, AgentTextContent)
        and grown.text.startswith(last.text)
    ):
        return [AgentTextContent(text=grown.text[len(last.text) :]), *new[count:]]
    return None
