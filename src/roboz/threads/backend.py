"""The interface of a thread store; :class:`~roboz.threads.store.SQLiteThreadStore` is the
default implementation and :class:`~roboz.threads.postgres.PostgresThreadStore` the shared
one (both on ``ThreadStoreBase``). Code that only records or reads threads, such as an
agent's persisted runs, depends on this rather than on a backend."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from roboz.threads._ledger import MemoryVersion, RunInfo, SnapshotRecord, TailRow
from roboz.threads._runs import RunLease, RunRow, StoredRunMessage
from roboz.threads.compression import CompressionTier
from roboz.threads.content import AgentContent
from roboz.threads.record import (
    AgentMessage,
    AgentMessageStatus,
    AgentThreadDelta,
    AgentThreadRecord,
    AgentThreadStatus,
    ThreadOrigin,
    ThreadVisibility,
)
from roboz.threads.task import AgentTask, AgentThreadGoalRecord


class ThreadStore(Protocol):
    """Persisted threads with per-thread revisions, deltas and compressed variants."""

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
    ) -> AgentThreadRecord: ...

    def get_thread(
        self, thread_id: str, *, with_tasks_and_goals: bool = True
    ) -> AgentThreadRecord: ...

    def list_threads(
        self, *, org_id: str | None = None, created_by: str | None = None, limit: int = 100
    ) -> list[AgentThreadRecord]: ...

    def fork_thread(
        self,
        source_thread_id: str,
        up_to_sequence_num: int,
        *,
        created_by: str,
        created_by_principal: str | None = None,
        title: str | None = None,
    ) -> AgentThreadRecord: ...

    def append_message(
        self, thread_id: str, message: AgentMessage, *, allow_read_only: bool = False
    ) -> int: ...

    def update_message(self, thread_id: str, sequence_num: int, message: AgentMessage) -> None: ...

    def append_blocks(
        self,
        thread_id: str,
        sequence_num: int,
        blocks: Sequence[AgentContent],
        status: AgentMessageStatus | None = None,
    ) -> None: ...

    def regenerate_turn(
        self, thread_id: str, sequence_num: int, replacement: AgentMessage | None = None
    ) -> None: ...

    def set_status(self, thread_id: str, status: AgentThreadStatus) -> None: ...

    def set_title(self, thread_id: str, title: str) -> None: ...

    def set_tasks(self, thread_id: str, tasks: Sequence[AgentTask]) -> None: ...

    def set_goals(self, thread_id: str, goals: Sequence[AgentThreadGoalRecord]) -> None: ...

    def delta_since(self, thread_id: str, continuation_token: str | None) -> AgentThreadDelta: ...

    def put_compressed(
        self, thread_id: str, sequence_num: int, tier: CompressionTier, variant: AgentMessage
    ) -> None: ...

    def get_compressed_thread(
        self, thread_id: str, tier: CompressionTier
    ) -> list[AgentMessage]: ...

    # -- persisted agent runs (one row per message, the run lease) ----------------------------

    @property
    def read_only(self) -> bool: ...

    def open_run(
        self,
        thread_id: str,
        *,
        org_id: str,
        created_by: str,
        created_from_agent_id: str | None,
        initial: Sequence[RunRow] = (),
    ) -> tuple[RunLease, list[StoredRunMessage], bool]: ...

    def append_run_message(
        self,
        lease: RunLease,
        row: RunRow,
        updated_extras: Sequence[tuple[int, str]] = (),
    ) -> int: ...

    def open_draft(self, lease: RunLease) -> int: ...

    def finish_draft(
        self,
        lease: RunLease,
        sequence_num: int,
        row: RunRow,
        added: Sequence[AgentContent],
        updated_extras: Sequence[tuple[int, str]] = (),
    ) -> None: ...

    def close_run(
        self,
        lease: RunLease,
        status: AgentThreadStatus = AgentThreadStatus.USER_TURN,
        notice: AgentMessage | None = None,
    ) -> None: ...

    def recover_interrupted(self, thread_id: str) -> None: ...

    # -- what a run was started with, for runs resumed elsewhere (client tools) --------------

    def set_run_context(self, thread_id: str, context: Mapping[str, Any]) -> None: ...

    def get_run_context(self, thread_id: str) -> dict[str, Any]: ...

    def get_tasks_and_goals(
        self, thread_id: str
    ) -> tuple[list[AgentTask], list[AgentThreadGoalRecord]]: ...


class LibrarianLedger(ThreadStore, Protocol):
    """A thread store that also keeps the Librarian's ledger (see ``roboz.threads._ledger``):
    runs by agent, snapshot coverage and memory versions."""

    def list_runs(self, agents: Sequence[str]) -> list[RunInfo]: ...

    def rows_after(self, thread_id: str, after_seq: int) -> list[TailRow]: ...

    def record_snapshot(
        self, snapshot_id: str, *, project: str, thread_id: str, first_seq: int, last_seq: int
    ) -> bool: ...

    def list_snapshots(self, project: str, *, pending: bool = False) -> list[SnapshotRecord]: ...

    def record_memory_version(
        self, project: str, base_version: int, digest: str, snapshot_ids: Sequence[str]
    ) -> int | None: ...

    def list_memory_versions(self, project: str) -> list[MemoryVersion]: ...

    def forget_artifacts(
        self,
        project: str,
        *,
        snapshot_ids: Sequence[str] = (),
        memory_versions: Sequence[int] = (),
    ) -> None: ...

    def delete_run(self, thread_id: str) -> bool: ...
