"""Persisted, compressible agent threads with incremental deltas for user interfaces.

The typed thread model (content blocks, messages, thread records, deltas, UI events), the
compression tiers, a SQLite store and a PostgreSQL one (``roboz[postgres]``). An agent given
a store (``Agent(store=...)``) records each of its runs as a thread.
"""

from typing import TYPE_CHECKING

from roboz.threads._access import ThreadPage
from roboz.threads._ledger import MemoryVersion, RunInfo, SnapshotRecord, TailRow
from roboz.threads._runs import RunLease, RunRow, StoredRunMessage
from roboz.threads._tokens import ApiTokenInfo
from roboz.threads.access import AccessStore, CallerThreads, ThreadRating, api_delta, api_view
from roboz.threads.backend import LibrarianLedger, ThreadStore
from roboz.threads.compression import (
    FILLER_TEXT,
    CompressionTier,
    compressed_view,
    deletion_pass,
    model_facing_blocks,
    resolved_task_interiors,
    stale_tool_exchanges,
    trim_message,
    validate_variant,
)
from roboz.threads.content import (
    AGENT_CONTENT_MODEL_BY_TYPE,
    AgentClientContextEntry,
    AgentCompressionFillerContent,
    AgentContent,
    AgentContentType,
    AgentDeletedContent,
    AgentErrorContent,
    AgentTextContent,
    AgentToolResultContent,
    AgentToolUseContent,
    synthesize_tool_result_payload,
)
from roboz.threads.context import AnalysisScope, ClientViewingContext
from roboz.threads.errors import (
    CompressionError,
    ContinuationTokenError,
    CorruptRecordError,
    DeltaApplyError,
    MessageFinalizedError,
    MessageGeneratingError,
    MessageNotFoundError,
    RobotoThreadReadOnlyException,
    SchemaVersionError,
    ThreadBusyError,
    ThreadError,
    ThreadNotFoundError,
    ThreadPermissionError,
    ThreadReadOnlyError,
    ThreadStoreError,
    UnencodableTextError,
    UnmappedContentTypeError,
)
from roboz.threads.event import (
    AgentErrorEvent,
    AgentEvent,
    AgentStartTextEvent,
    AgentTextDeltaEvent,
    AgentTextEndEvent,
    AgentToolResultEvent,
    AgentToolUseEvent,
)
from roboz.threads.identity import Caller, can_change, can_read
from roboz.threads.postgres import PostgresThreadStore
from roboz.threads.record import (
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentThreadDelta,
    AgentThreadRecord,
    AgentThreadStatus,
    ThreadOrigin,
    ThreadVisibility,
)
from roboz.threads.specs import ClientToolSpec, ModelProfileResponse
from roboz.threads.store import SQLiteThreadStore
from roboz.threads.task import (
    AgentGoal,
    AgentGoalStatus,
    AgentTask,
    AgentTaskStatus,
    AgentThreadGoalRecord,
)

if TYPE_CHECKING:
    # Static interface checks, never run: each assignment fails type checking (mypy and
    # pyright) if a store stops satisfying the protocol. Annotated assignments rather than
    # unused private functions, which pyright strict reports as not accessed.
    _sqlite_store_fits_the_interface: type[ThreadStore] = SQLiteThreadStore
    _sqlite_store_keeps_the_ledger: type[LibrarianLedger] = SQLiteThreadStore
    # psycopg is imported when a PostgresThreadStore is made, not here.
    _postgres_store_fits_the_interface: type[ThreadStore] = PostgresThreadStore
    _postgres_store_keeps_the_ledger: type[LibrarianLedger] = PostgresThreadStore
    _sqlite_store_serves_the_api: type[AccessStore] = SQLiteThreadStore
    _postgres_store_serves_the_api: type[AccessStore] = PostgresThreadStore


__all__ = [
    "AGENT_CONTENT_MODEL_BY_TYPE",
    "FILLER_TEXT",
    "AccessStore",
    "AgentClientContextEntry",
    "AgentCompressionFillerContent",
    "AgentContent",
    "AgentContentType",
    "AgentDeletedContent",
    "AgentErrorContent",
    "AgentErrorEvent",
    "AgentEvent",
    "AgentGoal",
    "AgentGoalStatus",
    "AgentMessage",
    "AgentMessageStatus",
    "AgentRole",
    "AgentStartTextEvent",
    "AgentTask",
    "AgentTaskStatus",
    "AgentTextContent",
    "AgentTextDeltaEvent",
    "AgentTextEndEvent",
    "AgentThreadDelta",
    "AgentThreadGoalRecord",
    "AgentThreadRecord",
    "AgentThreadStatus",
    "AgentToolResultContent",
    "AgentToolResultEvent",
    "AgentToolUseContent",
    "AgentToolUseEvent",
    "AnalysisScope",
    "ApiTokenInfo",
    "Caller",
    "CallerThreads",
    "ClientToolSpec",
    "ClientViewingContext",
    "CompressionError",
    "CompressionTier",
    "ContinuationTokenError",
    "CorruptRecordError",
    "DeltaApplyError",
    "LibrarianLedger",
    "MemoryVersion",
    "MessageFinalizedError",
    "MessageGeneratingError",
    "MessageNotFoundError",
    "ModelProfileResponse",
    "PostgresThreadStore",
    "RobotoThreadReadOnlyException",
    "RunInfo",
    "RunLease",
    "RunRow",
    "SQLiteThreadStore",
    "SchemaVersionError",
    "SnapshotRecord",
    "StoredRunMessage",
    "TailRow",
    "ThreadBusyError",
    "ThreadError",
    "ThreadNotFoundError",
    "ThreadOrigin",
    "ThreadPage",
    "ThreadPermissionError",
    "ThreadRating",
    "ThreadReadOnlyError",
    "ThreadStore",
    "ThreadStoreError",
    "ThreadVisibility",
    "UnencodableTextError",
    "UnmappedContentTypeError",
    "api_delta",
    "api_view",
    "can_change",
    "can_read",
    "compressed_view",
    "deletion_pass",
    "model_facing_blocks",
    "resolved_task_interiors",
    "stale_tool_exchanges",
    "synthesize_tool_result_payload",
    "trim_message",
    "validate_variant",
]
