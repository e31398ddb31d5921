"""Goals: outcomes a turn must reach before its Stop counts.

A turn declares goals (roboto's ``AgentThreadGoalRecord``), given by the host with
``invoke(goals=...)`` or by a tool with ``declare_goal``. Each goal type has a check: a
predicate over the goal, the conversation and the Stop, returning True when the goal is met,
else False or a sentence saying what is missing. When the run reaches Stop with a goal of the
turn pending, the LLM is told what is missing and the run goes on, at most
``max_goal_prompts`` times; then the unmet goals fail and the thread goes to GOALS_FAILED.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from roboz.agent.context import current_run
from roboz.agent.errors import AgentConfigurationError, ToolExecutionError
from roboz.agent.transcript import Transcript
from roboz.agent.turn import GoalCheck as GoalCheck  # re-exported: its public home
from roboz.agent.turn import Turn, turn_start
from roboz.models import Message, Role, Stop
from roboz.runtime.events import Event, emit
from roboz.threads import AgentGoal, AgentGoalStatus, AgentThreadGoalRecord, AgentThreadStatus
from roboz.threads.record import utc_now

REPROMPT_KIND = "goal_reprompt"
"""``message_kind`` of the message that tells the LLM which goals are not met yet."""


@dataclass(frozen=True)
class GoalsFailed(Event):
    """The re-prompt budget ran out with goals of the turn unmet; the thread needs a person."""

    thread_id: str | None = None
    failed: tuple[str, ...] = ()
    """The goal types that failed."""


def as_goal(goal: AgentGoal | Mapping[str, Any]) -> AgentGoal:
    return goal if isinstance(goal, AgentGoal) else AgentGoal.model_validate(dict(goal))


def declare(
    turn: Turn,
    goal: AgentGoal | Mapping[str, Any],
    checks: Mapping[str, GoalCheck],
    check: GoalCheck | None = None,
) -> AgentThreadGoalRecord:
    goal = as_goal(goal)
    if check is None and goal.goal_type not in checks:
        raise AgentConfigurationError(
            f"goal type {goal.goal_type!r} has no check: pass check= or add it to "
            f"Agent(goal_checks=...) (known: {sorted(checks)})"
        )
    record = AgentThreadGoalRecord(
        goal_type=goal.goal_type,
        goal_data=goal,
        message_sequence_num=turn.turn_seq,
        created=utc_now(),
    )
    turn.goals.append(record)
    if check is not None:
        turn.checks[id(record)] = check
    turn.save_goals()
    return record


def declare_goal(
    goal: AgentGoal | Mapping[str, Any], check: GoalCheck | None = None
) -> AgentThreadGoalRecord:
    """From a tool: add a goal to the current turn (its check from ``check`` or the agent's
    ``goal_checks``; a ``check`` given here lives in this process only)."""
    run = current_run()
    if run is None:
        raise RuntimeError("declare_goal() works only inside a tool of a running agent")
    return declare(run.turn, goal, run.goal_checks, check)


class GoalKeeper:
    """Decides, at each Stop of a run, whether the turn's goals let it end."""

    def __init__(
        self, turn: Turn, checks: Mapping[str, GoalCheck], budget: int, agent: str
    ) -> None:
        self.turn = turn
        self.checks = checks
        self.budget = budget
        self.agent = agent

    def _check(self, record: AgentThreadGoalRecord) -> GoalCheck:
        check = self.turn.checks.get(id(record)) or self.checks.get(record.goal_type)
        if check is None:
            raise AgentConfigurationError(
                f"goal type {record.goal_type!r} of thread {self.turn.thread_id!r} has no "
                "check: add it to Agent(goal_checks=...)"
            )
        return check

    def reprompt(self, stop: Stop, transcript: Transcript) -> bool:
        """True when a message telling the LLM what is missing was appended (go on)."""
        messages = transcript.messages
        pending = [g for g in self.turn.turn_goals() if g.status is AgentGoalStatus.PENDING]
        if not pending:
            return False
        missing: list[tuple[AgentThreadGoalRecord, str]] = []
        changed = False
        for record in pending:
            try:
                verdict = self._check(record)(record.goal_data, messages, stop)
            except Exception as error:
                raise ToolExecutionError(
                    f"the check of goal {record.goal_type!r} failed: "
                    f"{type(error).__name__}: {error}",
                    tool="goals",
                    messages=messages,
                ) from error
            if verdict is True:
                record.status, record.concluded_at = AgentGoalStatus.ACHIEVED, utc_now()
                changed = True
            else:
                missing.append((record, verdict if isinstance(verdict, str) else "not met"))
        if not missing:
            self.turn.save_goals()
            return False
        if self._prompts_used(transcript) >= self.budget:
            for record, _ in missing:
                record.status, record.concluded_at = AgentGoalStatus.FAILED, utc_now()
            self.turn.save_goals()
            self.turn.end_status = AgentThreadStatus.GOALS_FAILED
            failed = tuple(record.goal_type for record, _ in missing)
            emit(GoalsFailed(agent=self.agent, thread_id=self.turn.thread_id, failed=failed))
            return False
        if changed:
            self.turn.save_goals()
        lines = "\n".join(f"- {record.goal_type}: {why}" for record, why in missing)
        transcript.append(
            Message(
                role=Role.TOOL,
                content="You stopped, but these goals of the request are not met yet:\n"
                f"{lines}\nContinue until they are met, then stop.",
                caller="goals",
                message_kind=REPROMPT_KIND,
            )
        )
        return True

    def _prompts_used(self, transcript: Transcript) -> int:
        messages = transcript.messages
        start = turn_start(messages)
        # Counted in the conversation, so a run resumed in another process keeps the budget.
        return sum(
            1
            for index in range(start, len(messages))
            if messages[index].message_kind == REPROMPT_KIND
            and transcript.seq(index) >= self.turn.turn_seq
        )
