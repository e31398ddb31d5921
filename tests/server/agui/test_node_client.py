"""The real ``@ag-ui/client`` (npm, run by Node) drives ``roboz serve``: it runs turns,
answers a frontend tool standing in for a RoboZ client tool, and ends up holding exactly the
messages ``GET`` of the thread maps to, and the goals and tasks as its state."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from roboz.server.agui import agui_messages, agui_state
from roboz.threads import AgentThreadRecord, ThreadVisibility
from tests.conftest import skip_or_fail
from tests.server.conftest import Served

NODE_DIR = Path(__file__).parent / "node"


def _node() -> str:
    node = shutil.which("node")
    if node is None or not (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        skip_or_fail(
            "node and tests/server/agui/node/node_modules (scripts/setup.sh installs them)"
        )
    assert node is not None
    return node


def _drive(served: Served, who: str, thread_id: str, *script: str, **props: Any) -> Any:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FORWARDED": json.dumps(props)}
    done = subprocess.run(
        [
            _node(),
            str(NODE_DIR / "run_turns.mjs"),
            f"{served.url}/v1/agui",
            served.tokens[who],
            thread_id,
            *script,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _as_client_holds(record: AgentThreadRecord) -> list[dict[str, Any]]:
    return [
        m.model_dump(by_alias=True, exclude_none=True, mode="json") for m in agui_messages(record)
    ]


def test_the_agui_client_runs_turns_answers_a_frontend_tool_and_rebuilds_the_thread(
    agui_served: Served,
) -> None:
    goals = {"roboz": {"goals": [{"goal_type": "say_ok"}]}}
    held = _drive(agui_served, "bob", "frontend-chat-1", "plan the week", "hello 7", **goals)
    runs = held["runs"]
    assert [run["error"] for run in runs] == [None, None, None]
    first, answered, hello = (run["events"] for run in runs)
    assert first[:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    assert first[-1] == "RUN_FINISHED" and "TOOL_CALL_RESULT" in first
    for kind in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
        assert kind in first and kind in hello
    for kind in ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "STATE_DELTA"):
        assert kind in first
    assert "TOOL_CALL_RESULT" in answered and answered[-1] == "RUN_FINISHED"

    # The frontend's thread id named a new private thread of bob's.
    bob = agui_served.client("bob")
    (thread,) = bob.list_threads().threads
    assert thread.visibility is ThreadVisibility.PRIVATE and thread.created_by == "bob"
    stored = bob.get_thread(thread.thread_id)
    assert held["messages"] == _as_client_holds(stored)
    assert held["state"] == agui_state(stored)
    assert [t["status"] for t in held["state"]["tasks"]] == ["completed", "completed"]
    assert {g["status"] for g in held["state"]["goals"]} == {"achieved"}
    # The confirm answer reached the agent as the client tool's result.
    assert held["messages"][-1]["role"] == "tool"
    assert any("you said yes" in (m.get("content") or "") for m in held["messages"])


def test_a_rewound_reply_and_a_roboz_thread_id_through_the_agui_client(
    agui_served: Served,
) -> None:
    bob = agui_served.client("bob")
    thread = bob.create_thread(title="shared", visibility=ThreadVisibility.ORG)
    held = _drive(agui_served, "bob", thread.thread_id, "garble this", "hello 3")
    assert [run["error"] for run in held["runs"]] == [None, None]
    garbled = held["runs"][0]["events"]
    # The refused draft streamed, then a snapshot replaced it mid-run.
    assert garbled.count("MESSAGES_SNAPSHOT") == 2
    assert held["messages"] == _as_client_holds(bob.get_thread(thread.thread_id))

    # cat (same org) reads the ORG thread but may not run turns on bob's thread.
    before = bob.get_thread(thread.thread_id)
    refused = _drive(agui_served, "cat", thread.thread_id, "hello 2")
    assert "403" in refused["runs"][0]["error"]
    assert bob.get_thread(thread.thread_id).model_dump() == before.model_dump()


def test_a_failed_turn_is_a_run_error_for_the_agui_client(agui_served: Served) -> None:
    held = _drive(agui_served, "eve", "frontend-chat-2", "fail now")
    (run,) = held["runs"]
    assert run["events"][-1] == "RUN_ERROR"
    assert run["error"] is None  # the run ended as the protocol says, not by a broken stream
    assert "the scripted model failed" in run["runError"]["message"]
    eve = agui_served.client("eve")
    (thread,) = eve.list_threads().threads
    assert held["messages"] == _as_client_holds(eve.get_thread(thread.thread_id))
