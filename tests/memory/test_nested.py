"""Nested agents: an agent offered to another as a tool, with its own linked thread."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import roboz.tools
from roboz import Agent, AgentMode, tool
from roboz.agent.errors import AgentCancelledError, ToolExecutionError
from roboz.agent.nested import NestedAgentError, agent_tool
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Message, Str
from roboz.threads import AgentToolUseContent, SQLiteThreadStore


def child(replies: list[object], **kw: object) -> Agent:
    return Agent(
        name="researcher",
        description="Research a question and answer it.",
        agent_endpoint=MockLLMEndpoint(replies),
        tools=[roboz.tools.stop],
        **kw,  # type: ignore[arg-type]
    )


def test_the_parent_llm_invokes_the_child_and_gets_its_stop_value() -> None:
    researcher = child([{"action": "stop", "value": "the answer is 42"}])
    parent_endpoint = MockLLMEndpoint(
        [{"action": "researcher", "value": "what is it?"}, {"action": "stop", "value": "done"}]
    )
    parent = Agent(
        name="lead",
        agent_endpoint=parent_endpoint,
        tools=[agent_tool(researcher), roboz.tools.stop],
    )
    stop, conversation = parent.invoke()
    assert stop.value == "done"
    results = [m for m in conversation if m.caller == "researcher"]
    assert len(results) == 1 and "the answer is 42" in results[0].content
    # The child saw the input as its task; the tool's instruction is the child's description.
    assert "what is it?" in str(researcher.agent_endpoint.requests[0])  # type: ignore[union-attr]
    assert "Research a question" in str(parent_endpoint.requests[0])


def test_a_nested_agent_chains_like_any_tool() -> None:
    @tool
    def topic(input: Empty, messages: list[Message]) -> Str:
        """Pick a topic."""
        return Str(value="owls")

    @tool(chained_to="researcher")
    def finish(input: Str, messages: list[Message]) -> roboz.models.Stop:
        """Stop with the research."""
        return roboz.models.Stop(value=f"report: {input.value}")

    researcher = child([{"action": "stop", "value": "owls hoot"}])
    lead = Agent(
        name="lead",
        mode=AgentMode.DETERMINISTIC,
        default_tools=[topic],
        tools=[agent_tool(researcher, chained_to=topic), finish],
    )
    stop, _ = lead.invoke()
    assert stop.value == "report: owls hoot"


def test_the_childs_thread_is_linked_to_the_parents_tool_call(tmp_path: Path) -> None:
    with SQLiteThreadStore(tmp_path / "runs.db") as store:
        researcher = child([{"action": "stop", "value": "found it"}])
        lead = Agent(
            name="lead",
            agent_endpoint=MockLLMEndpoint(
                [{"action": "researcher", "value": "look"}, {"action": "stop", "value": "ok"}]
            ),
            tools=[agent_tool(researcher), roboz.tools.stop],
            store=store,
        )
        lead.invoke(thread_id="lead-1")
        (nested,) = [t for t in store.list_threads() if t.thread_id.startswith("lead-1.")]
        nested = store.get_thread(nested.thread_id)
        assert nested.thread_id == f"lead-1.researcher.{nested.parent_tool_use_id}"
        assert nested.parent_thread_id == "lead-1"
        uses = [
            b
            for m in store.get_thread("lead-1").messages
            for b in m.content
            if isinstance(b, AgentToolUseContent) and b.tool_name == "researcher"
        ]
        assert [u.tool_use_id for u in uses] == [nested.parent_tool_use_id]
        assert researcher.store is None  # borrowed for the call only
        assert len(nested.messages) == 3  # the task, the child's action, its result

        # Resumed later (a new tool, as in another process), the next call gets its own thread.
        again = Agent(
            name="lead",
            agent_endpoint=MockLLMEndpoint(
                [{"action": "researcher", "value": "more"}, {"action": "stop", "value": "ok"}]
            ),
            tools=[
                agent_tool(child([{"action": "stop", "value": "more found"}])),
                roboz.tools.stop,
            ],
            store=store,
        )
        again.invoke(thread_id="lead-1")
        children = [t.thread_id for t in store.list_threads() if t.thread_id.startswith("lead-1.")]
        assert len(children) == 2


def test_a_failing_child_is_the_tools_error_and_keeps_the_childs_messages() -> None:
    researcher = child([RuntimeError("provider down")])
    lead = Agent(
        name="lead",
        agent_endpoint=MockLLMEndpoint([{"action": "researcher", "value": "look"}]),
        tools=[agent_tool(researcher), roboz.tools.stop],
    )
    with pytest.raises(ToolExecutionError, match="researcher") as caught:
        lead.invoke()
    cause = caught.value.__cause__
    assert isinstance(cause, NestedAgentError)
    assert cause.messages and cause.messages[0].content == "look"
    assert caught.value.messages[-1].caller == "prompt_llm"  # the parent's own messages


def test_cancelling_the_parent_cancels_the_child() -> None:
    ticks: list[float] = []

    @tool
    def tick(input: Empty, messages: list[Message]) -> Empty:
        """Work forever, a little at a time."""
        ticks.append(time.monotonic())
        time.sleep(0.02)
        return Empty()

    worker = Agent(
        name="worker", mode=AgentMode.DETERMINISTIC, default_tools=[tick], max_steps=10**6
    )
    lead = Agent(
        name="lead",
        agent_endpoint=MockLLMEndpoint([{"action": "worker", "value": "go"}]),
        tools=[agent_tool(worker), roboz.tools.stop],
    )
    threading.Timer(0.3, lead.cancel).start()
    started = time.monotonic()
    with pytest.raises(AgentCancelledError):
        lead.invoke()
    assert time.monotonic() - started < 3
    count = len(ticks)
    time.sleep(0.1)
    assert len(ticks) == count  # the child stopped too


def test_a_chain_into_a_nested_agent_with_the_wrong_input_fails_at_build() -> None:
    from roboz.agent.errors import AgentConfigurationError
    from roboz.models import Int

    @tool
    def topic(input: Empty, messages: list[Message]) -> Str:
        """Pick a topic."""
        return Str(value="owls")

    nested = agent_tool(child([]), input_type=Int, chained_to=topic)
    with pytest.raises(AgentConfigurationError, match=r"'topic'.*'researcher'.*Int"):
        Agent(name="lead", mode=AgentMode.DETERMINISTIC, default_tools=[topic], tools=[nested])


def test_a_deployable_agent_definition_is_offered_as_a_tool() -> None:
    from roboz.deployment import Capability, DeployableAgent, ToolLabel

    definition = DeployableAgent(
        "summarizer",
        description="Summarize a text.",
        agent_endpoint=MockLLMEndpoint([{"action": "stop", "value": "short"}]),
        capabilities=[Capability(label=ToolLabel("stop"), value=roboz.tools.stop)],
    )
    lead = Agent(
        name="lead",
        agent_endpoint=MockLLMEndpoint(
            [{"action": "summarizer", "value": "long text"}, {"action": "stop", "value": "ok"}]
        ),
        tools=[agent_tool(definition), roboz.tools.stop],
    )
    _, conversation = lead.invoke()
    assert any(m.caller == "summarizer" and "short" in m.content for m in conversation)
