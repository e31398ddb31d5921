"""Task lists and declared goals of a thread, in roboto's wire format.

A thread written by RoboZ reads in a roboto client and back: the field names and types are
roboto's, and fields this version does not know are kept on read and written out again
(``extra="allow"``), so a round trip through RoboZ loses nothing.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, model_validator


class AgentTaskStatus(StrEnum):
    """Progress of one task on a thread's task list."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class AgentTask(BaseModel):
    """One entry of a thread's task list: integer id, place in the list, title, progress."""

    model_config = ConfigDict(extra="allow")

    task_id: int
    position: int
    """Place in the list; lists are ordered by it."""
    title: str
    status: AgentTaskStatus = AgentTaskStatus.PENDING


class AgentGoalStatus(StrEnum):
    """Whether a declared goal has been reached."""

    PENDING = "pending"
    ACHIEVED = "achieved"
    FAILED = "failed"


class AgentGoal(BaseModel):
    """The typed payload of a goal; ``goal_type`` names its shape, other fields are its data."""

    model_config = ConfigDict(extra="allow")

    goal_type: str


class AgentThreadGoalRecord(BaseModel):
    """A goal declared in a thread: what it is, whether it is met, which turn declared it.

    ``goal_data`` carries its own ``goal_type``, which must equal the record's.
    """

    model_config = ConfigDict(extra="allow")

    goal_type: str
    goal_data: AgentGoal
    status: AgentGoalStatus = AgentGoalStatus.PENDING
    message_sequence_num: int
    """Sequence number of the message whose turn declared the goal; goals sort by it."""
    created: datetime
    concluded_at: datetime | None = None
    """When the goal was achieved or failed; None while pending."""

    @model_validator(mode="before")
    @classmethod
    def _data_names_its_type(cls, data: Any) -> Any:
        # A goal_data given without its own goal_type inherits the record's, so hosts can
        # pass plain dicts; a different one is a contradiction and refused.
        if isinstance(data, dict):
            fields = cast("dict[str, Any]", data)  # the raw input of a model: string keys
            goal_data: object = fields.get("goal_data")
            if isinstance(goal_data, dict):
                given = cast("dict[str, Any]", goal_data)
                if "goal_type" not in given and "goal_type" in fields:
                    return {**fields, "goal_data": {**given, "goal_type": fields["goal_type"]}}
            return fields
        return data

    @model_validator(mode="after")
    def _types_match(self) -> AgentThreadGoalRecord:
        if self.goal_data.goal_type != self.goal_type:
            raise ValueError(
                f"goal_data.goal_type {self.goal_data.goal_type!r} does not match goal_type "
                f"{self.goal_type!r}"
            )
        return self
