"""The task-list tools: one task in progress at most, contiguous positions, and every change
reaching a watching user interface as a task snapshot in its deltas."""

from __future__ import annotations

import json

import roboz.tools
from roboz import Agent
from roboz.agent import TASK_TOOLS
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Role, Str
from roboz.runtime.events import Event, ToolFinished
from roboz.threads import (
    AgentCompressionFillerContent,
    AgentRole,
    AgentTaskStatus,
    AgentToolUseContent,
    CompressionTier,
    ThreadStore,
    deletion_pass,
    resolved_task_interiors,
)
from roboz.threads.compression import RESOLVE_TASK_TOOLS, START_TASK_TOOL

from .conftest import HeldThread

TASK_NAMES = {t.name for t in TASK_TOOLS}

PLAN = [
    {"action": "create_task", "title": "load data"},
    {"action": "create_task", "title": "plot"},
    {"action": "create_task", "title": "clean", "position": 1},
    {"action": "start_task", "task_id": 1},
    {"action": "start_task", "task_id": 2},  # refused: task 1 is in progress
    {"action": "complete_task", "task_id": 1},
    {"action": "start_task", "task_id": 2},
    {"action": "reorder_tasks", "task_ids": [2, 1]},  # refused: task 3 is missing
    {"action": "reorder_tasks", "task_ids": [2, 3, 1]},
    {"action": "stop", "value": "planned"},
]


def test_task_rule_and_snapshots(store: ThreadStore) -> None:
    store.create_thread(thread_id="p-1", org_id="local", created_by="ui")
    ui = HeldThread(store, "p-1")
    assert ui.record.tasks == []
    snapshots: list[list[tuple[int, int, str, str]]] = []

    def watch(event: Event) -> None:
        if isinstance(event, ToolFinished) and event.tool in TASK_NAMES:
            delta = ui.sync()
            assert delta.tasks is not None  # the change is in the very next delta
            snapshots.append(
                [(t.position, t.task_id, t.title, t.status.value) for t in delta.tasks]
            )

    endpoint = MockLLMEndpoint(PLAN)  # type: ignore[arg-type]
    agent = Agent(
        name="planner",
        agent_endpoint=endpoint,
        tools=[*TASK_TOOLS, roboz.tools.stop],
        store=store,
        event_sinks=[watch],
    )
    stop, _ = agent.invoke([Message(role=Role.USER, content="Plan it.")], thread_id="p-1")
    assert stop.value == "planned"
    assert snapshots == [
        [(0, 1, "load data", "pending")],
        [(0, 1, "load data", "pending"), (1, 2, "plot", "pending")],
        [(0, 1, "load data", "pending"), (1, 3, "clean", "pending"), (2, 2, "plot", "pending")],
        [
            (0, 1, "load data", "in_progress"),
            (1, 3, "clean", "pending"),
            (2, 2, "plot", "pending"),
        ],
        [
            (0, 1, "load data", "completed"),
            (1, 3, "clean", "pending"),
            (2, 2, "plot", "pending"),
        ],
        [
            (0, 1, "load data", "completed"),
            (1, 3, "clean", "pending"),
            (2, 2, "plot", "in_progress"),
        ],
        [
            (0, 2, "plot", "in_progress"),
            (1, 3, "clean", "pending"),
            (2, 1, "load data", "completed"),
        ],
    ]
    # The refused start reached the LLM as a correction, and changed nothing.
    shown = json.dumps(endpoint.requests[5])
    assert "task #1 'load data' is in progress; complete it before starting #2" in shown
    assert "needs every task id exactly once" in json.dumps(endpoint.requests[8])
    final = ui.sync()
    assert final.tasks is None  # no change since the last snapshot: keep what is held
    stored = ui.matches_store()
    tasks = stored.tasks or []
    assert [t.position for t in tasks] == [0, 1, 2]
    assert [t.status for t in tasks].count(AgentTaskStatus.IN_PROGRESS) == 1
    # A later run reads the task list back from the thread.
    more = Agent(
        name="planner",
        agent_endpoint=MockLLMEndpoint(
            [{"action": "complete_task", "task_id": 2}, {"action": "stop", "value": "ok"}]
        ),
        tools=[*TASK_TOOLS, roboz.tools.stop],
        store=store,
    )
    more.invoke([Message(role=Role.USER, content="Finish plot.")], thread_id="p-1")
    delta = ui.sync()
    assert [(t.task_id, t.status.value) for t in delta.tasks or []] == [
        (2, "completed"),
        (3, "pending"),
        (1, "completed"),
    ]


def test_task_tools_in_memory() -> None:
    agent = Agent(
        name="m",
        agent_endpoint=MockLLMEndpoint(
            [
                {"action": "create_task", "title": "a"},
                {"action": "start_task", "task_id": 9},
                {"action": "start_task", "task_id": 1},
                {"action": "stop", "value": "ok"},
            ]
        ),
        tools=[*TASK_TOOLS, roboz.tools.stop],
    )
    _, messages = agent.invoke([Message(role=Role.USER, content="go")])
    assert "there is no task #9 (tasks: #1)" in json.dumps([m.content for m in messages])
    assert messages[-3].content.endswith('[in_progress] #1 a"}')


def test_compression_collapses_a_finished_tasks_work_but_not_the_users_turn(
    store: ThreadStore,
) -> None:
    @roboz.tools.tool
    def lookup(input: Str, messages: list[Message]) -> Str:
        """Look something up."""
        return Str(value=f"rows for {input.value}")

    def planner(script: list[dict[str, object]]) -> Agent:
        return Agent(
            name="planner",
            agent_endpoint=MockLLMEndpoint(script),  # type: ignore[arg-type]
            tools=[*TASK_TOOLS, lookup, roboz.tools.stop],
            store=store,
        )

    planner(
        [
            {"action": "create_task", "title": "load data"},
            {"action": "start_task", "task_id": 1},
            {"action": "lookup", "value": "April"},
            {"action": "stop", "value": "which month?"},
        ]
    ).invoke([Message(role=Role.USER, content="Load the data.")], thread_id="c-1")
    # The user answers while the task is in progress: their turn lies inside its interior.
    planner(
        [
            {"action": "lookup", "value": "May"},
            {"action": "complete_task", "task_id": 1},
            {"action": "lookup", "value": "June"},
            {"action": "stop", "value": "done"},
        ]
    ).invoke([Message(role=Role.USER, content="Use May.")], thread_id="c-1")

    thread = store.get_thread("c-1")
    messages = thread.messages
    interior = resolved_task_interiors(messages, thread.tasks or [])
    assert interior
    inside = [messages[i] for i in sorted(interior)]
    assert [m.role for m in inside].count(AgentRole.USER) == 1
    assert "rows for April" in json.dumps([m.model_dump(mode="json") for m in inside])
    for index, variant in deletion_pass(messages, collapse=interior).items():
        store.put_compressed("c-1", index, CompressionTier.DELETED, variant)

    view = store.get_compressed_thread("c-1", CompressionTier.DELETED)
    assert store.get_thread("c-1").messages == messages  # the verbatim thread is unchanged
    assert [m.role for m in view] == [m.role for m in messages]
    for index in sorted(interior):
        if messages[index].role is AgentRole.USER:
            assert view[index] == messages[index]
        else:
            assert view[index].content == [AgentCompressionFillerContent()]
    shown = json.dumps([m.model_dump(mode="json") for m in view])
    assert "Use May." in shown and "rows for April" not in shown and "rows for May" not in shown
    assert "rows for June" in shown  # after the task: kept
    # The start and the completion stay, so the compressed thread still tells the story.
    calls = [
        (b.tool_name, (b.input or {}).get("task_id"))
        for m in view
        for b in m.content
        if isinstance(b, AgentToolUseContent)
    ]
    assert ("start_task", 1) in calls and ("complete_task", 1) in calls


def test_the_compression_task_tool_names_are_the_task_tools() -> None:
    names = {t.name for t in TASK_TOOLS}
    assert START_TASK_TOOL in names and names >= RESOLVE_TASK_TOOLS
