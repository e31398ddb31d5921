"""Task lists and declared goals of a thread.

The roboto thread model refers to ``AgentTask`` and ``AgentThreadGoalRecord`` without
defining them here; these are minimal versions with just what threads and deltas need.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel


class AgentTaskStatus(StrEnum):
    """Progress of one task on a thread's task list."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class AgentTask(BaseModel):
    """One entry of a thread's task list (minimal: id, order, title, progress)."""

    task_id: str
    position: int
    """Place in the list; lists are ordered by it."""
    title: str
    status: AgentTaskStatus = AgentTaskStatus.PENDING


class AgentGoalStatus(StrEnum):
    """Whether a declared goal has been reached."""

    PENDING = "pending"
    ACHIEVED = "achieved"
    FAILED = "failed"


class AgentThreadGoalRecord(BaseModel):
    """A goal declared in a thread (minimal: id, description, the turn that declared it)."""

    goal_id: str
    description: str
    declared_at_message_sequence_num: int
    """Sequence number of the message whose turn declared the goal; goals sort by it."""
    status: AgentGoalStatus = AgentGoalStatus.PENDING
