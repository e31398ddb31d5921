"""Goals: a turn's Stop counts only once its goals are met; the LLM is told what is missing
within a budget, and a thread whose budget ran out is GOALS_FAILED."""

from __future__ import annotations

import json

import pytest

import roboz.tools
from roboz import Agent, tool
from roboz.agent import AgentConfigurationError, GoalsFailed, ToolExecutionError, declare_goal
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Role, Stop, Str
from roboz.runtime.events import Event
from roboz.threads import (
    AgentGoal,
    AgentGoalStatus,
    AgentThreadStatus,
    ThreadStore,
)

from .conftest import HeldThread


@tool
def write_report(input: Str, messages: list[Message]) -> Str:
    """Write the report with the given text."""
    return Str(value=f"report written: {input.value}")


def report_written(goal: AgentGoal, messages: list[Message], stop: Stop) -> bool | str:
    done = any(m.caller == "write_report" for m in messages)
    return done or f"no report was written to {goal.model_extra['path']}"  # type: ignore[index]


def stop_says(goal: AgentGoal, messages: list[Message], stop: Stop) -> bool | str:
    return stop.value == goal.model_extra["answer"] or "the answer is wrong"  # type: ignore[index]


def make_agent(store: ThreadStore, replies: list[object], events: list[Event]) -> Agent:
    return Agent(
        name="writer",
        agent_endpoint=MockLLMEndpoint(replies),  # type: ignore[arg-type]
        tools=[write_report, roboz.tools.stop],
        store=store,
        goal_checks={"report_written": report_written, "answer": stop_says},
        max_goal_prompts=2,
        event_sinks=[events.append],
    )


ASK = [Message(role=Role.USER, content="Write the weekly report.")]
GOAL = {"goal_type": "report_written", "path": "weekly.md"}


def test_goals_achieved_after_a_reprompt(store: ThreadStore) -> None:
    store.create_thread(thread_id="g-1", org_id="local", created_by="ui")
    ui = HeldThread(store, "g-1")
    assert ui.record.goals == []
    events: list[Event] = []
    endpoint_replies: list[object] = [
        {"action": "stop", "value": "done"},  # too early: no report yet
        {"action": "write_report", "value": "all good"},
        {"action": "stop", "value": "done"},
    ]
    agent = make_agent(store, endpoint_replies, events)
    stop, messages = agent.invoke(list(ASK), thread_id="g-1", goals=[GOAL])
    assert stop.value == "done"
    reprompt = [m for m in messages if m.message_kind == "goal_reprompt"]
    assert len(reprompt) == 1
    assert "report_written: no report was written to weekly.md" in reprompt[0].content
    shown = agent.agent_endpoint.requests[1]  # type: ignore[union-attr]
    assert "no report was written to weekly.md" in json.dumps(shown)
    delta = ui.sync()
    assert delta.status is AgentThreadStatus.USER_TURN
    (goal,) = delta.goals or []
    assert goal.status is AgentGoalStatus.ACHIEVED and goal.concluded_at is not None
    assert goal.message_sequence_num == 0  # the user's message opened the turn
    assert goal.goal_data.model_extra == {"path": "weekly.md"}
    assert not [e for e in events if isinstance(e, GoalsFailed)]
    ui.matches_store()
    # A later delta with no goal change carries None: the client keeps its snapshot.
    store.set_title("g-1", "weekly")
    later = ui.sync()
    assert later.goals is None and ui.record.goals == [goal]


def test_goals_failed_when_the_budget_runs_out(store: ThreadStore) -> None:
    store.create_thread(thread_id="g-2", org_id="local", created_by="ui")
    ui = HeldThread(store, "g-2")
    events: list[Event] = []
    replies: list[object] = [{"action": "stop", "value": "done"}] * 3
    agent = make_agent(store, replies, events)
    goals = [GOAL, {"goal_type": "answer", "answer": "done"}]
    stop, messages = agent.invoke(list(ASK), thread_id="g-2", goals=goals)
    endpoint = agent.agent_endpoint
    assert endpoint.calls == 3  # type: ignore[union-attr]  # the first Stop and 2 re-prompts
    assert len([m for m in messages if m.message_kind == "goal_reprompt"]) == 2
    (failed,) = [e for e in events if isinstance(e, GoalsFailed)]
    assert failed.thread_id == "g-2" and failed.failed == ("report_written",)
    delta = ui.sync()
    assert delta.status is AgentThreadStatus.GOALS_FAILED
    by_type = {g.goal_type: g for g in delta.goals or []}
    assert by_type["report_written"].status is AgentGoalStatus.FAILED
    assert by_type["answer"].status is AgentGoalStatus.ACHIEVED
    assert all(g.concluded_at is not None for g in by_type.values())
    ui.matches_store()


def test_goals_of_earlier_turns_are_not_driven(store: ThreadStore) -> None:
    events: list[Event] = []
    agent = make_agent(store, [{"action": "stop", "value": "x"}] * 4, events)
    agent = agent.replace(max_goal_prompts=0)
    agent.invoke(list(ASK), thread_id="g-3", goals=[GOAL])
    assert store.get_thread("g-3").status is AgentThreadStatus.GOALS_FAILED
    agent.invoke([Message(role=Role.USER, content="Never mind.")], thread_id="g-3")
    thread = store.get_thread("g-3")
    assert thread.status is AgentThreadStatus.USER_TURN
    assert [g.status for g in thread.goals or []] == [AgentGoalStatus.FAILED]


@tool
def promise_report(input: Str, messages: list[Message]) -> Str:
    """Promise a report at a path; it then has to be written before stopping."""
    declare_goal({"goal_type": "report_written", "path": input.value})
    return Str(value="promised")


def test_a_tool_declares_a_goal(store: ThreadStore) -> None:
    events: list[Event] = []
    agent = make_agent(
        store,
        [
            {"action": "promise_report", "value": "q3.md"},
            {"action": "stop", "value": "done"},
            {"action": "write_report", "value": "q3"},
            {"action": "stop", "value": "done"},
        ],
        events,
    )
    agent = agent.replace(tools=[*agent.tools, promise_report])
    stop, messages = agent.invoke(list(ASK), thread_id="g-4")
    assert "no report was written to q3.md" in next(
        m.content for m in messages if m.message_kind == "goal_reprompt"
    )
    (goal,) = store.get_thread("g-4").goals or []
    assert goal.status is AgentGoalStatus.ACHIEVED


def test_goals_in_memory_without_a_store() -> None:
    agent = Agent(
        name="m",
        agent_endpoint=MockLLMEndpoint(
            [{"action": "stop", "value": "no"}, {"action": "stop", "value": "yes"}]
        ),
        tools=[roboz.tools.stop],
        goal_checks={"answer": stop_says},
    )
    stop, _ = agent.invoke(list(ASK), goals=[{"goal_type": "answer", "answer": "yes"}])
    assert stop.value == "yes"


def test_a_goal_type_without_a_check_is_refused(store: ThreadStore) -> None:
    agent = make_agent(store, [], [])
    with pytest.raises(AgentConfigurationError, match="goal type 'unknown' has no check"):
        agent.invoke(list(ASK), thread_id="g-5", goals=[{"goal_type": "unknown"}])


def test_a_check_that_raises_ends_the_run_with_a_clear_error(store: ThreadStore) -> None:
    def broken(goal: AgentGoal, messages: list[Message], stop: Stop) -> bool:
        raise KeyError("path")

    agent = make_agent(store, [{"action": "stop", "value": "x"}], [])
    agent = agent.replace(goal_checks={**agent.goal_checks, "broken": broken})
    with pytest.raises(ToolExecutionError, match="the check of goal 'broken' failed: KeyError"):
        agent.invoke(list(ASK), thread_id="g-6", goals=[{"goal_type": "broken"}])
    assert store.get_thread("g-6").status is AgentThreadStatus.USER_TURN
