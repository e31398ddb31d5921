"""The thread-level state of one run: scope, viewing context, tasks and goals.

Tool signatures are fixed as ``(input, messages)``, so a tool reaches this state through
context accessors: ``current_scope()`` (the analysis window the tool may honour) and
``current_viewing_context()`` (what the user had open). The task and goal tools use
``current_turn()``. A persisted run writes every change of tasks or goals to the thread, so a
user interface sees it in its next delta.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from roboz.models import Message, Role
from roboz.threads import (
    AgentTask,
    AgentThreadGoalRecord,
    AgentThreadStatus,
    AnalysisScope,
    ClientViewingContext,
)

if TYPE_CHECKING:
    from roboz.agent.goals import GoalCheck
    from roboz.threads import ThreadStore


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


def sequence_numbers(messages: Sequence[Message]) -> list[int]:
    """The thread sequence number of each message (list positions when not persisted)."""
    seqs = getattr(messages, "_seqs", None)
    return list(seqs) if seqs is not None else list(range(len(messages)))


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


_current: contextvars.ContextVar[Turn | None] = contextvars.ContextVar(
    "roboz_current_turn", default=None
)


def current_turn() -> Turn | None:
    """The thread state of the run whose tool is executing, if any."""
    return _current.get()


def current_scope() -> AnalysisScope | None:
    """The analysis scope of the current run (None: unconstrained). Tools opt in to it."""
    turn = _current.get()
    return None if turn is None else turn.scope


def current_viewing_context() -> ClientViewingContext | None:
    """What the user was looking at when they wrote the current turn's message, if given."""
    turn = _current.get()
    return None if turn is None else turn.viewing_context


@contextlib.contextmanager
def use_turn(turn: Turn) -> Generator[None, None, None]:
    token = _current.set(turn)
    try:
        yield
    finally:
        _current.reset(token)
