"""Messages, the thread record, and the incremental delta a client applies to it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from roboz.threads.content import AgentClientContextEntry, AgentContent, AgentTextContent
from roboz.threads.context import parse_legacy_context_marker
from roboz.threads.errors import DeltaApplyError
from roboz.threads.task import AgentTask, AgentThreadGoalRecord


def utc_now() -> datetime:
    return datetime.now(UTC)


class AgentRole(StrEnum):
    """Who wrote a message."""

    USER = "user"
    """A person."""
    ASSISTANT = "assistant"
    """The model."""
    ROBOTO = "roboto"
    """The system: tool results and other system information."""


class AgentMessageStatus(StrEnum):
    """Where a message is in its generation lifecycle."""

    NOT_STARTED = "not_started"
    GENERATING = "generating"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def is_terminal(self) -> bool:
        """True once generation has ended (completed, failed or cancelled)."""
        return self in (
            AgentMessageStatus.COMPLETED,
            AgentMessageStatus.FAILED,
            AgentMessageStatus.CANCELLED,
        )


class AgentMessage(BaseModel):
    """One message of a thread: who wrote it, its content blocks, and its status.

    When read, a legacy ROBOTO message whose only block is a ``<ctx>{json}</ctx>`` marker is
    turned into a client-context block in place, so old threads present context the same way
    new ones do and keep their message indices.
    """

    role: AgentRole
    content: list[AgentContent]
    status: AgentMessageStatus
    created: datetime = Field(default_factory=utc_now)

    @classmethod
    def text(cls, text: str, role: AgentRole = AgentRole.USER) -> AgentMessage:
        """A completed message holding one text block."""
        return cls(
            role=role, content=[AgentTextContent(text=text)], status=AgentMessageStatus.COMPLETED
        )

    def is_complete(self) -> bool:
        """True when the status is COMPLETED."""
        return self.status is AgentMessageStatus.COMPLETED

    def is_unsuccessful(self) -> bool:
        """True when generation failed or was cancelled."""
        return self.status in (AgentMessageStatus.FAILED, AgentMessageStatus.CANCELLED)

    @model_validator(mode="after")
    def _lift_legacy_context_marker(self) -> AgentMessage:
        if self.role is AgentRole.ROBOTO and len(self.content) == 1:
            block = self.content[0]
            if isinstance(block, AgentTextContent):
                context = parse_legacy_context_marker(block.text)
                if context is not None:
                    self.content = [AgentClientContextEntry(context=context)]
        return self


class AgentThreadStatus(StrEnum):
    """Whose move it is in a thread."""

    NOT_STARTED = "not_started"
    """Created, no message sent yet."""
    USER_TURN = "user_turn"
    """Waiting for the user."""
    ROBOTO_TURN = "roboto_turn"
    """The agent is generating."""
    CLIENT_TOOL_TURN = "client_tool_turn"
    """The client must run pending client-side tools and submit their results."""
    GOALS_FAILED = "goals_failed"
    """The runner ran out of corrective re-prompts before every goal of the turn was met."""


class ThreadOrigin(StrEnum):
    """The surface that owns a thread (minimal; the roboto model only names API).

    A thread whose origin is outside RoboZ is read-only for new messages. None on a record
    means the same as API.
    """

    API = "api"
    """Created through RoboZ itself; writable."""
    EXTERNAL = "external"
    """Owned by a surface outside RoboZ; reading works, new messages are refused."""


class ThreadVisibility(StrEnum):
    """Who may read a thread (minimal: the two levels the roboto model describes)."""

    PRIVATE = "private"
    """Only the creator (and administrators)."""
    ORG = "org"
    """Every member of the owning organization."""


def new_thread_id() -> str:
    return f"th_{uuid.uuid4().hex}"


class AgentThreadRecord(BaseModel):
    """Everything persisted about a thread: metadata, messages, tasks, goals, sync token.

    ``thread_id`` also accepts the legacy spellings ``session_id`` and ``chat_id`` on input,
    and ``forked_from_thread_id`` accepts ``forked_from_session_id``; output always uses the
    canonical names. ``tasks`` and ``goals`` are None when they were not loaded and ``[]``
    when loaded but empty.
    """

    model_config = ConfigDict(populate_by_name=True)

    thread_id: str = Field(
        default_factory=new_thread_id,
        validation_alias=AliasChoices("thread_id", "session_id", "chat_id"),
    )
    org_id: str
    created_by: str
    created: datetime
    status: AgentThreadStatus
    continuation_token: str
    visibility: ThreadVisibility = ThreadVisibility.PRIVATE
    created_by_principal: str | None = None
    """``"ptype:id"`` of what started the thread (a user, a device, an invocation)."""
    title: str | None = None
    model_profile: str | None = None
    origin: ThreadOrigin | None = None
    created_from_agent_id: str | None = None
    """The agent whose launch produced this thread; forks do not inherit it."""
    created_from_trigger_id: str | None = None
    """The trigger that launched this thread; forks do not inherit it."""
    forked_from_thread_id: str | None = Field(
        default=None,
        validation_alias=AliasChoices("forked_from_thread_id", "forked_from_session_id"),
    )
    forked_from_message_sequence_num: int | None = None
    """Last source message copied into this fork; set together with forked_from_thread_id."""
    parent_thread_id: str | None = None
    """RoboZ: the thread of the agent that ran this one as a nested agent (a tool)."""
    parent_tool_use_id: str | None = None
    """RoboZ: the tool call in ``parent_thread_id`` that ran this thread's agent."""
    pinned_at: datetime | None = None
    """When the reading user pinned the thread; personal, so None in single-thread reads."""
    messages: list[AgentMessage] = Field(default_factory=list[AgentMessage])
    tasks: list[AgentTask] | None = None
    goals: list[AgentThreadGoalRecord] | None = None

    def is_read_only(self) -> bool:
        """True when a surface outside RoboZ owns the thread and refuses new messages."""
        return self.origin not in (None, ThreadOrigin.API)

    def apply_delta(self, delta: AgentThreadDelta) -> AgentThreadRecord:
        """The record a client holds after applying ``delta``; ``self`` is left unchanged.

        A delta extends what the client holds: for an index the client already has, the
        delta message's blocks are appended to the held message's blocks (never merged into
        held text) and its status is taken; the next index appends a new message. With
        ``reset_from_message_sequence_num`` set, held messages at or after it are dropped
        first, so a regenerated turn is never spliced onto its abandoned draft.
        """
        messages = list(self.messages)
        reset = delta.reset_from_message_sequence_num
        if reset is not None:
            # Python slicing would read -1 as "the last one" and drop a message silently. A
            # reset past what the client holds is possible (the rewound messages were created
            # after its token); the index check below catches a gap.
            if reset < 0:
                raise DeltaApplyError(
                    f"reset_from_message_sequence_num is {reset}; sequence numbers start at 0"
                )
            del messages[reset:]
        negative = [index for index in delta.messages_by_idx if index < 0]
        if negative:
            raise DeltaApplyError(
                f"messages_by_idx has negative index {min(negative)}; sequence numbers start at 0"
            )
        for index in sorted(delta.messages_by_idx):
            message = delta.messages_by_idx[index]
            if index < len(messages):
                held = messages[index]
                messages[index] = held.model_copy(
                    update={"content": [*held.content, *message.content], "status": message.status}
                )
            elif index == len(messages):
                messages.append(message)
            else:
                raise DeltaApplyError(
                    f"delta carries message {index} but the client holds only {len(messages)}; "
                    "it missed an earlier delta and must reload the thread"
                )
        update: dict[str, Any] = {
            "messages": messages,
            "continuation_token": delta.continuation_token,
        }
        for name in ("status", "title", "tasks", "goals"):
            value = getattr(delta, name)
            if value is not None:
                update[name] = value
        return self.model_copy(update=update)


class AgentThreadDelta(BaseModel):
    """What changed in a thread since a continuation token.

    ``messages_by_idx`` holds, by sequence number, new messages whole and, for a message the
    client already holds, only the blocks it has not seen yet (with the current status). When
    ``reset_from_message_sequence_num`` is set, the server rewound the thread (a turn was
    regenerated): the client first drops every message at or after that index, then applies
    ``messages_by_idx``, which then carries those messages whole. For ``status``, ``title``,
    ``tasks`` and ``goals`` None means "unchanged, keep what you have"; for ``tasks`` and
    ``goals`` an empty list means "there are none now" and a non-empty list replaces the
    previous snapshot.
    """

    continuation_token: str
    messages_by_idx: dict[int, AgentMessage]
    reset_from_message_sequence_num: int | None = None
    status: AgentThreadStatus | None = None
    title: str | None = None
    tasks: list[AgentTask] | None = None
    goals: list[AgentThreadGoalRecord] | None = None
