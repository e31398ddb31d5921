"""Agent runs persisted in the thread store: the run lease and one row per message.

A persisted run writes each finalized message of the agent's conversation as one message row:
the seed-001 blocks (what user interfaces read through ``get_thread`` and ``delta_since``) and,
in ``extras``, the RoboZ message it was written from, losslessly. Both live in the same row, so
the agent's conversation and the thread view cannot drift apart.

One run at a time may write a thread. The lease is a column of the thread row, taken and
checked inside the same transactions that write messages, so the database enforces it. Its
owner names a process (host, pid, start time); a lease whose process is gone belongs to a run
that was killed, and whoever opens the thread next marks that run interrupted.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Generator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from roboz.threads import writer
from roboz.threads._rows import current
from roboz.threads.content import AgentErrorContent
from roboz.threads.errors import CorruptRecordError, ThreadBusyError, ThreadNotFoundError
from roboz.threads.record import (
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentThreadStatus,
    ThreadOrigin,
)
from roboz.threads.task import AgentTask, AgentThreadGoalRecord

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from roboz.threads._sql import Conn

NOTICE = '{"notice": true}'
"""``extras`` of a row the store wrote about a run (e.g. "interrupted"): shown to user
interfaces, never part of the agent's conversation."""

DRAFT = '{"draft": true}'
"""``extras`` of a reply still streaming in: user interfaces watch it grow; a resumed run
skips it (the finished reply replaces it with its own extras)."""

INTERRUPTED = "interrupted"

RUN_CONTEXT = "run_context"
"""The key of ``threads.meta`` keeping what a run was started with (``set_run_context``)."""

CANCELLED = "cancelled"
"""``error_code`` of the notice ending a cancelled run."""


def cancelled_notice(text: str) -> AgentMessage:
    """The row that ends a cancelled run, in-process or durable alike: the seed's CANCELLED
    status ("cancelled by the user", not a failure), an error block saying so."""
    return AgentMessage(
        role=AgentRole.ROBOTO,
        content=[AgentErrorContent(error_message=text, error_code=CANCELLED)],
        status=AgentMessageStatus.CANCELLED,
    )


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (tells a live process from a reused pid)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


_HOST = socket.gethostname()


@dataclass(frozen=True)
class RunLease:
    """Proof that this process runs ``thread_id``: every write names ``owner``."""

    thread_id: str
    owner: str


@dataclass(frozen=True)
class RunRow:
    """A message of a run as written: its role, its blocks already encoded (the format of
    ``encode_blocks``) and the RoboZ message as JSON."""

    role: AgentRole
    content: str
    extras: str


class StoredRunMessage(NamedTuple):
    """One row of a persisted run: the RoboZ ``extras`` (None when the row was written
    through the thread API, e.g. a user message from a client) and, for such rows only, what
    is needed to decode the seed-001 message (a resumed run needs ``extras`` alone, so the
    blocks of the others are not even read)."""

    seq: int
    extras: str | None
    thread_id: str
    role: str | None
    status: str | None
    created: str | None
    content: str | None

    @property
    def message(self) -> AgentMessage:
        from roboz.threads._rows import message_from_row

        if self.content is None:
            raise ValueError(f"message {self.seq} was read without its blocks")
        return message_from_row(
            self.thread_id, (self.seq, self.role, self.status, self.created, self.content)
        )


def on_this_host(owner: str) -> bool:
    return owner.split("|", 1)[0] == _HOST


_own: list[tuple[int, str | None]] = []
"""This process's pid and start time (a forked child has another pid, so reads again)."""


def owner_is_alive(owner: str, pid: int | None, start: str | None) -> bool:
    if not on_this_host(owner) or pid is None:
        return True  # another host's process cannot be checked from here: assume it runs
    if not _own or _own[0][0] != os.getpid():
        _own[:] = [(os.getpid(), _start_time(os.getpid()))]
    if pid == _own[0][0]:  # a run of this process (e.g. a server reading its own turn's thread)
        return start == _own[0][1]
    if _start_time(pid) != start:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunStoreMixin:
    """The persisted-run half of the thread store (:class:`~roboz.threads._base.ThreadStoreBase`).

    Who holds a lease, and whether that holder still lives, is the backend's to say
    (``_take_lease``, ``_owner_alive``, ``_lease_ended``); by default the holder is this
    process, alive while its pid runs with the same start time on this host.
    """

    _row_only_appends = False
    """Whether a run's own appends write the message row only, not the thread row (see
    ``writer.insert_row``); the backend says so when every reader of the thread's counters
    reads them through ``_rows.current``."""

    if TYPE_CHECKING:
        _where: str
        read_only: bool
        _read: Callable[[], AbstractContextManager[Conn]]
        _write: Callable[[str], AbstractContextManager[Conn]]

    def _take_lease(self, owner: str) -> tuple[int | None, str | None]:
        """What the lease records so others can tell whether ``owner`` still lives."""
        del owner
        return os.getpid(), _start_time(os.getpid())

    def _owner_alive(self, conn: Conn, owner: str, pid: int | None, start: str | None) -> bool:
        """Whether ``owner`` (with what ``_take_lease`` recorded) still runs; ``conn`` is the
        caller's open transaction."""
        del conn
        return owner_is_alive(owner, pid, start)

    def _lease_ended(self, owner: str) -> None:
        """``owner``'s lease is released (or was never taken): drop what held it."""
        del owner

    def _recover(self, conn: Conn, thread_id: str) -> bool:
        """Inside a write: if a dead process holds the lease, mark its run interrupted and
        free the thread. True when the thread is free now."""
        row = conn.execute(
            "SELECT lease_owner, lease_pid, lease_start FROM threads WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        if row is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r} in {self._where}")
        owner, pid, start = row
        if owner is None:
            return True
        if self._owner_alive(conn, owner, pid, start):
            return False
        notice = AgentMessage(
            role=AgentRole.ROBOTO,
            content=[
                AgentErrorContent(
                    error_message=f"the run was interrupted: its process {pid} ended before "
                    "the run finished; continue it with invoke(thread_id=...)",
                    error_code=INTERRUPTED,
                )
            ],
            status=AgentMessageStatus.FAILED,
        )
        # A reply that was streaming when the process died will never finish.
        writer.fail_generating(conn, thread_id)
        writer.insert_message(conn, thread_id, notice, extras=NOTICE)
        writer.release_lease(conn, thread_id, AgentThreadStatus.USER_TURN)
        return True

    def recover_interrupted(self, thread_id: str) -> None:
        """Mark the run of ``thread_id`` interrupted if its process died (no-op otherwise)."""
        if self.read_only:
            return
        with self._read() as conn:
            row = conn.execute(
                "SELECT lease_owner, lease_pid, lease_start FROM threads WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
            if row is None or row[0] is None or self._owner_alive(conn, *row):
                return
        with self._write(thread_id) as conn:
            self._recover(conn, thread_id)

    def open_run(
        self,
        thread_id: str,
        *,
        org_id: str,
        created_by: str,
        created_from_agent_id: str | None,
        initial: Sequence[RunRow] = (),
    ) -> tuple[RunLease, list[StoredRunMessage], bool]:
        """Take the run lease of ``thread_id``, creating the thread (with ``initial`` rows)
        if it does not exist. Returns the lease, the stored rows and whether it was created.

        A live run holding the thread raises ThreadBusyError; a dead one is marked
        interrupted first.
        """
        owner = f"{_HOST}|{os.getpid()}|{uuid.uuid4().hex}"
        pid, start = self._take_lease(owner)
        try:
            with self._write(thread_id) as conn:
                exists = conn.execute(
                    "SELECT origin FROM threads WHERE thread_id = ?", (thread_id,)
                ).fetchone()
                created = exists is None
                if created:
                    meta = {"created_from_agent_id": created_from_agent_id, "visibility": "private"}
                    writer.insert_thread(conn, thread_id, org_id, created_by, None, meta)
                    for row in initial:
                        writer.insert_row(conn, thread_id, row.role.value, row.content, row.extras)
                else:
                    if exists[0] not in (None, ThreadOrigin.API.value):
                        from roboz.threads.errors import ThreadReadOnlyError

                        raise ThreadReadOnlyError(
                            f"thread {thread_id!r} in {self._where} is owned by {exists[0]!r} and "
                            "refuses new messages"
                        )
                    if not self._recover(conn, thread_id):
                        (holder,) = conn.execute(
                            "SELECT lease_owner FROM threads WHERE thread_id = ?", (thread_id,)
                        ).fetchone()
                        host, holder_pid, _ = holder.split("|", 2)
                        raise ThreadBusyError(
                            f"thread {thread_id!r} in {self._where} is already being run (by pid "
                            f"{holder_pid} on {host}); wait for that run to finish"
                        )
                writer.take_lease(conn, thread_id, owner, pid, start)
                rows = conn.execute(
                    "SELECT seq, extras, thread_id, "
                    "CASE WHEN extras IS NULL THEN role END, "
                    "CASE WHEN extras IS NULL THEN status END, "
                    "CASE WHEN extras IS NULL THEN created END, "
                    "CASE WHEN extras IS NULL THEN content END "
                    "FROM messages WHERE thread_id = ? ORDER BY seq",
                    (thread_id,),
                ).fetchall()
        except BaseException:
            self._lease_ended(owner)
            raise
        return RunLease(thread_id, owner), list(map(StoredRunMessage._make, rows)), created

    def append_run_message(
        self,
        lease: RunLease,
        row: RunRow,
        updated_extras: Sequence[tuple[int, str]] = (),
    ) -> int:
        """Commit one finalized message of the run (and refreshed extras of earlier ones,
        e.g. how often a truncated message was shown) in one transaction."""
        thread_id, owner = lease.thread_id, lease.owner
        positions = self._positions
        with self._write(thread_id) as conn:
            if updated_extras:
                writer.set_extras(conn, thread_id, updated_extras)
            seq, revision = writer.insert_row(
                conn,
                thread_id,
                row.role.value,
                row.content,
                row.extras,
                lease_owner=owner,
                where=self._where,
                expected=positions.get(owner),
                row_only=self._row_only_appends,
            )
        positions[owner] = seq + 1, revision
        return seq

    @cached_property
    def _positions(self) -> dict[str, tuple[int, int]]:
        """Per run lease, the thread's ``(message_count, revision)`` as that run's last write
        left them (see ``writer.insert_row``); dropped when the run ends."""
        return {}

    def open_draft(self, lease: RunLease) -> int:
        """Start the row of a reply that streams in (grow it with ``append_blocks``)."""
        with self._write(lease.thread_id) as conn:
            seq, _ = writer.insert_row(
                conn,
                lease.thread_id,
                AgentRole.ASSISTANT.value,
                "[]",
                DRAFT,
                status=AgentMessageStatus.GENERATING.value,
                lease_owner=lease.owner,
                where=self._where,
                expected=self._positions.get(lease.owner),
                row_only=self._row_only_appends,
            )
        # Growing it moves the revision on outside the lease's writes: allocated again next.
        self._positions.pop(lease.owner, None)
        return seq

    def finish_draft(
        self,
        lease: RunLease,
        sequence_num: int,
        row: RunRow,
        added: Sequence[Any],
        updated_extras: Sequence[tuple[int, str]] = (),
    ) -> None:
        """Complete a streamed reply: append ``added`` blocks (the tool use) after the
        streamed text and store the RoboZ message, in one transaction."""
        thread_id = lease.thread_id
        with self._write(thread_id) as conn:
            count = self._check_lease(conn, lease)
            held_row, held = writer.growing_row(conn, thread_id, sequence_num)
            revision = writer.grow_message(
                conn, thread_id, sequence_num, held_row, held, list(added), "completed"
            )
            writer.set_extras(conn, thread_id, [*updated_extras, (sequence_num, row.extras)])
        self._positions[lease.owner] = count, revision

    def _check_lease(self, conn: Conn, lease: RunLease) -> int:
        """Refuse a run that no longer holds its thread; the thread's message count."""
        owner, count = conn.execute(
            f"SELECT lease_owner, {current('message_count')} FROM threads WHERE thread_id = ?",
            (lease.thread_id,),
        ).fetchone()
        if owner != lease.owner:
            raise ThreadBusyError(
                f"this run no longer holds thread {lease.thread_id!r} in {self._where}; "
                "nothing was written"
            )
        return int(count)

    def close_run(
        self,
        lease: RunLease,
        status: AgentThreadStatus = AgentThreadStatus.USER_TURN,
        notice: AgentMessage | None = None,
    ) -> None:
        """Release the lease (when still held), optionally writing a notice row first."""
        self._positions.pop(lease.owner, None)
        try:
            with self._write(lease.thread_id) as conn:
                row = conn.execute(
                    "SELECT lease_owner FROM threads WHERE thread_id = ?", (lease.thread_id,)
                ).fetchone()
                if row is not None and row[0] == lease.owner:
                    if notice is not None:
                        writer.insert_message(conn, lease.thread_id, notice, extras=NOTICE)
                    writer.release_lease(conn, lease.thread_id, status)
        finally:
            self._lease_ended(lease.owner)

    def set_run_context(self, thread_id: str, context: Mapping[str, Any]) -> None:
        """Keep what a run was started with (client tools, scope, viewing context) on the
        thread, so a run resumed in another process (after client tool results) has it."""
        with self._write(thread_id) as conn:
            writer.set_meta(conn, thread_id, RUN_CONTEXT, dict(context), self._where)

    def get_run_context(self, thread_id: str) -> dict[str, Any]:
        """What ``set_run_context`` kept ({} when nothing was)."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT meta FROM threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
        if row is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r} in {self._where}")
        with _decoding(thread_id, "run context"):
            return dict(json.loads(row[0]).get(RUN_CONTEXT) or {})

    def get_tasks_and_goals(
        self, thread_id: str
    ) -> tuple[list[AgentTask], list[AgentThreadGoalRecord]]:
        """The thread's task list and goals, without reading its messages."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT tasks, goals FROM threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
        if row is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r} in {self._where}")
        with _decoding(thread_id, "tasks and goals"):
            tasks = [AgentTask.model_validate(t) for t in json.loads(row[0] or "[]")]
            goals = [AgentThreadGoalRecord.model_validate(g) for g in json.loads(row[1] or "[]")]
        return tasks, goals

    def run_state(self, thread_id: str) -> dict[str, Any]:
        """Who holds the thread's run lease now (``owner`` None when nobody)."""
        self.recover_interrupted(thread_id)
        with self._read() as conn:
            row = conn.execute(
                "SELECT lease_owner, lease_pid FROM threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
        if row is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r} in {self._where}")
        return {"owner": row[0], "pid": row[1]}


@contextmanager
def _decoding(thread_id: str, what: str) -> Generator[None]:
    """A stored value that cannot be decoded is a CorruptRecordError, as on every read."""
    from roboz.threads._rows import DECODE_ERRORS

    try:
        yield
    except DECODE_ERRORS as error:
        raise CorruptRecordError(
            f"{what} of thread {thread_id!r} cannot be decoded: {error}"
        ) from error
