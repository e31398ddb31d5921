"""The thread-level state of one run: scope, viewing context, tasks and goals.

A tool reaches it through its run's context (``roboz.agent.context``: ``current_scope()``,
``current_viewing_context()``, ``current_turn()``). A persisted run writes every change of
tasks or goals to the thread, so a user interface sees it in its next delta.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from roboz.models import Message, Role, Stop
from roboz.threads import (
    AgentGoal,
    AgentTask,
    AgentThreadGoalRecord,
    AgentThreadStatus,
    AnalysisScope,
    ClientViewingContext,
)

if TYPE_CHECKING:
    from roboz.threads import ThreadStore

GoalCheck = Callable[[AgentGoal, list[Message], Stop], bool | str]
"""A goal type's check: True when the goal is met; False, or what is still missing, when it
is not. (Here, beside the turn that holds the checks, so nothing below goals imports it.)"""


@dataclass
class Turn:
    """What one run knows about its thread beyond the conversation."""

    scope: AnalysisScope | None = None
    viewing_context: ClientViewingContext | None = None
    store: ThreadStore | None = None
    thread_id: str | None = None
    tasks: list[AgentTask] = field(default_factory=list[AgentTask])
    goals: list[AgentThreadGoalRecord] = field(default_factory=list[AgentThreadGoalRecord])
    """Every goal of the thread; those of this turn carry ``turn_seq``."""
    checks: dict[int, GoalCheck] = field(default_factory=dict[int, "GoalCheck"])
    """Checks given with a goal (by ``id`` of its record), before the agent's goal_checks."""
    turn_seq: int = 0
    """Sequence number of the user message that opened this turn."""
    end_status: AgentThreadStatus = AgentThreadStatus.USER_TURN

    def save_tasks(self) -> None:
        self.tasks.sort(key=lambda task: task.position)
        if self.store is not None and self.thread_id is not None:
            self.store.set_tasks(self.thread_id, self.tasks)

    def save_goals(self) -> None:
        if self.store is not None and self.thread_id is not None:
            self.store.set_goals(self.thread_id, self.goals)

    def turn_goals(self) -> list[AgentThreadGoalRecord]:
        return [g for g in self.goals if g.message_sequence_num == self.turn_seq]


def turn_start(messages: Sequence[Message]) -> int:
    """Index of the user message that opened the current turn (0 when there is none).

    Only the human's messages count: those the framework or a tool adds in the user's role
    carry a ``message_kind`` (compacted context, project memory, and repairs in threads
    written before repairs were TOOL messages), and a turn never starts at one of them.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role is Role.USER and message.message_kind is None:
            return index
    return 0
