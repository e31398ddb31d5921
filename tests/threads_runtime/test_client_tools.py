"""Client tools: offered like native tools, never run by the agent, answered by the client.

The round trip crosses processes: one process runs until the LLM calls the client tool, a
second one submits the result and the run goes on there; a user interface watching the
thread sees each step as deltas applied to the record it holds.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

import roboz.tools
from roboz import Agent, tool
from roboz.agent import (
    AgentConfigurationError,
    ClientToolError,
    ClientToolResult,
    ClientToolTurn,
)
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Invoke, Message, Role, Str
from roboz.threads import (
    AgentThreadStatus,
    AgentToolResultContent,
    AgentToolUseContent,
    ClientToolSpec,
    ThreadNotFoundError,
    ThreadStore,
)
from tests.postgres import CHILD_PRELUDE, store_from_spec, store_spec

from .conftest import HeldThread

PICK = ClientToolSpec(
    name="pick_files",
    description="Ask the user to pick files matching a pattern in their browser.",
    input_schema={
        "type": "object",
        "properties": {"pattern": {"type": "string", "minLength": 1}},
        "required": ["pattern"],
        "additionalProperties": False,
    },
)

PROCESS = r"""
import json, sys
import roboz.tools
from roboz import Agent, tool
from roboz.agent import ClientToolResult, ClientToolTurn, current_scope
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Invoke, Message, Role, Str
from roboz.threads import AnalysisScope, ClientToolSpec

where, step = sys.argv[1], sys.argv[2]

@tool(chained_to="pick_files")
def count_files(input: ClientToolResult, messages: list[Message]) -> Str:
    "Count the files the user picked."
    scope = current_scope()
    return Str(value=f"{len(input.payload)} files, scope {scope.start_time}-{scope.end_time}")

if step == "ask":
    replies = [{"action": "pick_files", "rationale": "need files", "pattern": "*.csv"}]
else:
    replies = [{"action": "stop", "value": "counted"}]
endpoint = MockLLMEndpoint(replies)
agent = Agent(
    name="analyst",
    agent_endpoint=endpoint,
    tools=[count_files, roboz.tools.stop],
    store=store_from_spec(where),
)
if step == "ask":
    spec = ClientToolSpec.model_validate_json(sys.argv[3])
    result = agent.invoke(
        [Message(role=Role.USER, content="How many CSV files do I have?")],
        thread_id="job-1",
        client_tools=[spec],
        scope=AnalysisScope(start_time=10, end_time=20),
    )
    assert isinstance(result, ClientToolTurn), result
    print(json.dumps([u.__dict__ for u in result.pending]))
else:
    result = agent.submit_tool_results("job-1", json.loads(sys.argv[3]))
    assert not isinstance(result, ClientToolTurn), result
    stop, messages = result
    print(json.dumps({"stop": stop.value, "last_request": endpoint.requests[-1][-1]["content"]}))
"""


class Picked(ClientToolResult):
    """More than a client tool's result carries."""

    count: int


def run_process(spec: str, step: str, argument: str) -> object:
    done = subprocess.run(
        [sys.executable, "-c", CHILD_PRELUDE + PROCESS, spec, step, argument],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_round_trip_across_two_processes(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = store_spec(backend, tmp_path, request)
    store = store_from_spec(where)
    store.create_thread(thread_id="job-1", org_id="local", created_by="web-ui")
    ui = HeldThread(store, "job-1")
    assert ui.record.status is AgentThreadStatus.NOT_STARTED

    pending = run_process(where, "ask", PICK.model_dump_json())
    assert pending == [
        {"tool_use_id": "tu_1", "tool_name": "pick_files", "input": {"pattern": "*.csv"}}
    ]
    asked = ui.sync()
    assert asked.status is AgentThreadStatus.CLIENT_TOOL_TURN
    (use,) = [b for b in asked.messages_by_idx[1].content if isinstance(b, AgentToolUseContent)]
    assert (use.tool_use_id, use.tool_name, use.input) == (
        "tu_1",
        "pick_files",
        {"pattern": "*.csv"},
    )
    assert ui.record.messages[0].role.value == "user"
    assert asked.goals is None and asked.tasks is None
    ui.matches_store()
    assert store.run_state("job-1")["owner"] is None  # the waiting run holds no lease

    finished = run_process(where, "submit", json.dumps({"tu_1": ["a.csv", "b.csv", "c.csv"]}))
    assert finished["stop"] == "counted"
    # The client's result flowed down the chain into the native tool, which saw the scope
    # the first process was given: the run really continued in the second process.
    assert "3 files, scope 10-20" in finished["last_request"]
    resumed = ui.sync()
    assert resumed.status is AgentThreadStatus.USER_TURN
    results = [
        b
        for m in resumed.messages_by_idx.values()
        for b in m.content
        if isinstance(b, AgentToolResultContent)
    ]
    assert results[0].tool_use_id == "tu_1"
    assert results[0].tool_name == "pick_files"
    assert results[0].payload == ["a.csv", "b.csv", "c.csv"]
    assert [r.tool_name for r in results] == ["pick_files", "count_files", "stop"]
    assert min(resumed.messages_by_idx) == 2  # only what the client had not seen yet
    ui.matches_store()
    store.close()


def asking_agent(store: ThreadStore, *replies: object) -> tuple[Agent, MockLLMEndpoint]:
    endpoint = MockLLMEndpoint(
        [{"action": "pick_files", "pattern": "*.csv"}, *replies]  # type: ignore[list-item]
    )
    agent = Agent(name="asker", agent_endpoint=endpoint, tools=[roboz.tools.stop], store=store)
    return agent, endpoint


def test_wrong_result_ids_are_refused_and_nothing_is_recorded(store: ThreadStore) -> None:
    agent, endpoint = asking_agent(store, {"action": "stop", "value": "ok"})
    turn = agent.invoke(thread_id="t-1", client_tools=[PICK])
    assert isinstance(turn, ClientToolTurn)
    assert turn.thread_id == "t-1" and [u.tool_use_id for u in turn.pending] == ["tu_0"]
    before = store.get_thread("t-1")
    for wrong, says in [
        ({"tu_7": "x"}, "unknown tool_use_id 'tu_7'"),
        ({}, "no result for 'tu_0'"),
        ({"tu_0": "x", "tu_9": "y"}, "unknown tool_use_id 'tu_9'"),
    ]:
        with pytest.raises(ClientToolError, match=says) as caught:
            agent.submit_tool_results("t-1", wrong)
        assert "nothing was recorded" in str(caught.value)
        delta = store.delta_since("t-1", before.continuation_token)
        assert delta.messages_by_idx == {} and delta.status is None
        assert delta.continuation_token == before.continuation_token
    with pytest.raises(ClientToolError, match="submit them with submit_tool_results"):
        agent.invoke([Message(role=Role.USER, content="hello?")], thread_id="t-1")
    delta = store.delta_since("t-1", before.continuation_token)
    assert delta.messages_by_idx == {} and delta.status is None
    assert endpoint.calls == 1  # no wrong submission reached the LLM
    stop, messages = agent.submit_tool_results("t-1", {"tu_0": ["a.csv"]})  # type: ignore[misc]
    assert stop.value == "ok"
    assert messages[1].caller == "pick_files" and messages[1].content == '["a.csv"]'
    with pytest.raises(ClientToolError, match="not waiting for client tool results"):
        agent.submit_tool_results("t-1", {"tu_0": "again"})
    assert store.get_thread("t-1").status is AgentThreadStatus.USER_TURN


def test_arguments_are_checked_against_the_schema_before_the_client_sees_them(
    store: ThreadStore,
) -> None:
    endpoint = MockLLMEndpoint(
        [
            {"action": "pick_files", "glob": "*.csv"},
            {"action": "pick_files", "pattern": ""},
            {"action": "pick_files", "pattern": "*.csv"},
        ]
    )
    agent = Agent(
        name="asker",
        agent_endpoint=endpoint,
        tools=[roboz.tools.stop],
        store=store,
        max_repairs=3,
    )
    turn = agent.invoke(thread_id="t-2", client_tools=[PICK])
    assert isinstance(turn, ClientToolTurn)
    assert turn.pending[0].input == {"pattern": "*.csv"}
    shown = json.dumps(endpoint.requests[1])
    assert "lacks the required field 'pattern'" in shown
    assert "input.glob is not allowed" in shown
    assert "at least 1 characters" in json.dumps(endpoint.requests[2])
    system = endpoint.requests[0][0]["content"]
    assert "### pick_files" in system and '"minLength":1' in system


def test_unsupported_schemas_and_stores_are_clear_errors(store: ThreadStore) -> None:
    agent, _ = asking_agent(store)
    odd = PICK.model_copy(update={"input_schema": {"type": "object", "oneOf": []}})
    with pytest.raises(AgentConfigurationError, match=r"keywords \['oneOf'\] are not supported"):
        agent.invoke(thread_id="t-3", client_tools=[odd])
    in_memory = Agent(name="m", agent_endpoint=MockLLMEndpoint([]), tools=[roboz.tools.stop])
    with pytest.raises(AgentConfigurationError, match="client tools need a store"):
        in_memory.invoke(client_tools=[PICK])


def test_only_the_llm_calls_a_client_tool(store: ThreadStore) -> None:
    @tool
    def sneaky(input: Empty, messages: list[Message]) -> Invoke:
        """Try to run the client tool from the server."""
        return Invoke(action="pick_files", input=Empty())

    endpoint = MockLLMEndpoint([{"action": "sneaky"}])
    agent = Agent(name="s", agent_endpoint=endpoint, tools=[sneaky, roboz.tools.stop], store=store)
    with pytest.raises(Exception, match="only the LLM calls client tools"):
        agent.invoke(thread_id="t-4", client_tools=[PICK])


def test_a_tool_chained_to_a_client_tool_waits_for_a_turn_that_offers_it(
    store: ThreadStore,
) -> None:
    """A client offers the client tools it has, turn by turn: a turn without ``pick_files``
    runs as usual (the chain after it cannot fire), a turn with it follows the chain."""
    ran: list[object] = []

    @tool(chained_to="pick_files")
    def after(input: ClientToolResult, messages: list[Message]) -> Str:
        """Use the picked files."""
        ran.append(input.payload)
        return Str(value="used")

    endpoint = MockLLMEndpoint(
        [
            {"action": "stop", "value": "no files needed"},
            {"action": "pick_files", "pattern": "*.csv"},
            {"action": "stop", "value": "used them"},
        ]
    )
    agent = Agent(name="c", agent_endpoint=endpoint, tools=[after, roboz.tools.stop], store=store)
    stop, _ = agent.invoke([Message(role=Role.USER, content="hi")], thread_id="t-5")  # type: ignore[misc]
    assert stop.value == "no files needed"
    assert "pick_files" not in endpoint.requests[0][0]["content"]  # not offered to the LLM
    thread = store.get_thread("t-5")
    assert thread.status is AgentThreadStatus.USER_TURN
    assert not any(m.is_unsuccessful() for m in thread.messages)

    turn = agent.invoke(
        [Message(role=Role.USER, content="count my CSVs")], thread_id="t-5", client_tools=[PICK]
    )
    assert isinstance(turn, ClientToolTurn)
    stop, messages = agent.submit_tool_results("t-5", {turn.pending[0].tool_use_id: ["a.csv"]})  # type: ignore[misc]
    assert stop.value == "used them" and ran == [["a.csv"]]
    tools = [m.caller for m in messages if m.role is Role.TOOL]
    assert tools[-3:] == ["pick_files", "after", "stop"]


def test_a_client_tool_that_does_not_fit_the_agent_is_refused_before_anything_is_recorded(
    store: ThreadStore,
) -> None:
    @tool(chained_to="pick_files")
    def narrow(input: Picked, messages: list[Message]) -> Str:
        """Needs more than a client tool gives."""
        return Str(value=str(input.count))

    endpoint = MockLLMEndpoint([{"action": "stop", "value": "never"}])
    agent = Agent(name="c", agent_endpoint=endpoint, tools=[narrow, roboz.tools.stop], store=store)
    clashing = ClientToolSpec(name="stop", description="mine", input_schema={"type": "object"})
    for offered, says in [
        ([PICK], "chain 'pick_files' -> 'narrow'"),
        ([clashing], "'stop'"),
    ]:
        with pytest.raises(AgentConfigurationError, match=says):
            agent.invoke(
                [Message(role=Role.USER, content="go")], thread_id="t-7", client_tools=offered
            )
    with pytest.raises(ThreadNotFoundError):
        store.get_thread("t-7")  # refused before the thread existed
    assert endpoint.calls == 0


def test_async_round_trip(store: ThreadStore) -> None:
    agent, _ = asking_agent(store, {"action": "stop", "value": "async ok"})

    async def main() -> object:
        turn = await agent.ainvoke(thread_id="t-6", client_tools=[PICK])
        assert isinstance(turn, ClientToolTurn)
        return await agent.asubmit_tool_results("t-6", {turn.pending[0].tool_use_id: "a.csv"})

    result = asyncio.run(main())
    assert isinstance(result, tuple)
    assert result[0].value == "async ok"


@pytest.mark.parametrize("value", [3, 2.5, True, None, "3", "plain text", {"n": 3}, [1, "a"]])
def test_any_json_result_is_stored_so_the_thread_reads_back(
    store: ThreadStore, value: object
) -> None:
    agent, _ = asking_agent(store, {"action": "stop", "value": "ok"})
    turn = agent.invoke(thread_id="t-9", client_tools=[PICK])
    assert isinstance(turn, ClientToolTurn)
    agent.submit_tool_results("t-9", {"tu_0": value})
    thread = store.get_thread("t-9")
    (result,) = [
        b
        for m in thread.messages
        for b in m.content
        if isinstance(b, AgentToolResultContent) and b.tool_name == "pick_files"
    ]
    # Objects and arrays are kept as JSON; anything else as the text the tool returned.
    expected = (
        value
        if isinstance(value, dict | list)
        else (value if isinstance(value, str) else json.dumps(value))
    )
    assert result.payload == expected
    assert thread.status is AgentThreadStatus.USER_TURN


def test_a_result_that_is_not_json_is_refused_and_nothing_is_recorded(store: ThreadStore) -> None:
    agent, endpoint = asking_agent(store, {"action": "stop", "value": "ok"})
    turn = agent.invoke(thread_id="t-8", client_tools=[PICK])
    assert isinstance(turn, ClientToolTurn)
    before = store.get_thread("t-8")
    for wrong in ({1, 2}, float("nan"), "\ud800", {"k": object()}):
        with pytest.raises(ClientToolError, match="the result for 'tu_0' is not a JSON value"):
            agent.submit_tool_results("t-8", {"tu_0": wrong})
    delta = store.delta_since("t-8", before.continuation_token)
    assert delta.messages_by_idx == {} and delta.status is None
    assert endpoint.calls == 1
