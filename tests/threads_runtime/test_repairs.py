"""Repairs (the framework's corrections after an unusable LLM reply) are the framework's
messages, not the human's: a user interface can tell them apart, and a turn never starts at
one, so the goal budget and client-tool round trips of the turn hold across them."""

from __future__ import annotations

import roboz.tools
from roboz import Agent
from roboz.agent import ClientToolTurn, GoalsFailed
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Role, Stop
from roboz.runtime.events import Event
from roboz.threads import (
    AgentGoal,
    AgentGoalStatus,
    AgentRole,
    AgentThreadStatus,
    ClientToolSpec,
    ThreadStore,
)

from .conftest import HeldThread

ASK = [Message(role=Role.USER, content="Write the weekly report.")]
NOT_JSON = "I think I am done now."


def never_met(goal: AgentGoal, messages: list[Message], stop: Stop) -> bool | str:
    return "the report is missing"


def test_repairs_are_stored_as_the_frameworks_messages(store: ThreadStore) -> None:
    store.create_thread(thread_id="r-1", org_id="local", created_by="ui")
    ui = HeldThread(store, "r-1")
    agent = Agent(
        name="writer",
        agent_endpoint=MockLLMEndpoint([NOT_JSON, {"action": "stop", "value": "ok"}]),
        tools=[roboz.tools.stop],
        store=store,
    )
    stop, messages = agent.invoke(list(ASK), thread_id="r-1")
    assert stop.value == "ok"
    (repair,) = [m for m in messages if m.message_kind == "repair"]
    assert repair.role is Role.TOOL
    ui.sync()
    roles = [m.role for m in ui.record.messages]
    # Only the human's message is USER; the correction is the framework's (ROBOTO) message.
    assert roles.count(AgentRole.USER) == 1
    assert ui.record.messages[0].role is AgentRole.USER
    (shown,) = [
        m for m in ui.record.messages if "could not be used" in "".join(map(str, m.content))
    ]
    assert shown.role is AgentRole.ROBOTO
    ui.matches_store()


def test_the_goal_budget_holds_when_replies_are_repaired(store: ThreadStore) -> None:
    events: list[Event] = []
    stop_reply = {"action": "stop", "value": "done"}
    # Stop and an unusable reply, by turns, for longer than the budget allows.
    endpoint = MockLLMEndpoint([stop_reply, NOT_JSON] * 6)
    agent = Agent(
        name="writer",
        agent_endpoint=endpoint,  # type: ignore[arg-type]
        tools=[roboz.tools.stop],
        store=store,
        goal_checks={"report": never_met},
        max_goal_prompts=2,
        event_sinks=[events.append],
    )
    _, messages = agent.invoke(list(ASK), thread_id="r-2", goals=[{"goal_type": "report"}])
    # Stop, re-prompt, unusable, repair, Stop, re-prompt, unusable, repair, Stop: failed.
    assert endpoint.calls == 5
    kinds = [m.message_kind for m in messages]
    assert kinds.count("goal_reprompt") == 2 and kinds.count("repair") == 2
    thread = store.get_thread("r-2")
    assert thread.status is AgentThreadStatus.GOALS_FAILED
    assert [g.status for g in thread.goals or []] == [AgentGoalStatus.FAILED]
    assert [e.failed for e in events if isinstance(e, GoalsFailed)] == [("report",)]


PICK = ClientToolSpec(
    name="pick_files",
    description="Ask the user to pick files.",
    input_schema={"type": "object", "properties": {"pattern": {"type": "string"}}},
)


def test_a_goal_is_decided_after_a_client_tool_round_trip_with_a_repair(
    store: ThreadStore,
) -> None:
    endpoint = MockLLMEndpoint(
        [
            NOT_JSON,  # repaired before the client tool is called
            {"action": "pick_files", "pattern": "*.csv"},
            {"action": "stop", "value": "done"},
        ]
    )
    agent = Agent(
        name="analyst",
        agent_endpoint=endpoint,
        tools=[roboz.tools.stop],
        store=store,
        goal_checks={"report": never_met},
        max_goal_prompts=0,
    )
    waiting = agent.invoke(
        list(ASK), thread_id="r-3", goals=[{"goal_type": "report"}], client_tools=[PICK]
    )
    assert isinstance(waiting, ClientToolTurn)
    (use,) = waiting.pending
    agent.submit_tool_results("r-3", {use.tool_use_id: ["a.csv"]})
    thread = store.get_thread("r-3")
    # The goal belongs to the turn the user's message opened, and its Stop decided it.
    (goal,) = thread.goals or []
    assert goal.message_sequence_num == 0
    assert goal.status is AgentGoalStatus.FAILED
    assert thread.status is AgentThreadStatus.GOALS_FAILED


def test_a_turn_starts_at_the_humans_message_only() -> None:
    from roboz.agent.turn import turn_start

    conversation = [
        Message(role=Role.USER, content="first"),
        Message(role=Role.USER, content="second"),
        Message(role=Role.ASSISTANT, content="{}", message_kind="action"),
        # Added in the user's role by the framework: compacted context, and a repair as
        # threads written before repairs were the framework's messages hold it.
        Message(role=Role.USER, content="[Compacted context]", message_kind="compacted"),
        Message(role=Role.USER, content="Your previous reply ...", message_kind="repair"),
    ]
    assert turn_start(conversation) == 1
