"""The task-list tools: one task in progress at most, contiguous positions, and every change
reaching a watching user interface as a task snapshot in its deltas."""

from __future__ import annotations

import json

import roboz.tools
from roboz import Agent
from roboz.agent import TASK_TOOLS
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Role
from roboz.runtime.events import Event, ToolFinished
from roboz.threads import AgentTaskStatus, ThreadStore

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
