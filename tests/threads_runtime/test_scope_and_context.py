"""The analysis scope reaches every tool (sync and async, invoke and ainvoke); the viewing
context is recorded as a client-context block on the user's message and nowhere else."""

from __future__ import annotations

import asyncio

import roboz.tools
from roboz import Agent, tool
from roboz.agent import current_scope, current_viewing_context
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Message, Role, Str
from roboz.threads import (
    AgentClientContextEntry,
    AgentRole,
    AnalysisScope,
    ClientViewingContext,
    ThreadStore,
    deletion_pass,
    stale_tool_exchanges,
)

from .conftest import HeldThread

seen: list[tuple[str, AnalysisScope | None]] = []


@tool
def sync_probe(input: Empty, messages: list[Message]) -> Str:
    """Look at the scope."""
    seen.append(("sync", current_scope()))
    context = current_viewing_context()
    return Str(value=f"datasets {context.dataset_ids if context else None}")


@tool
async def async_probe(input: Empty, messages: list[Message]) -> Str:
    """Look at the scope, asynchronously."""
    await asyncio.sleep(0)
    seen.append(("async", current_scope()))
    return Str(value="ok")


PROBES = [{"action": "sync_probe"}, {"action": "async_probe"}, {"action": "stop", "value": "ok"}]


def probe_agent(store: ThreadStore | None = None, scope: AnalysisScope | None = None) -> Agent:
    return Agent(
        name="probe",
        agent_endpoint=MockLLMEndpoint(PROBES * 2),  # type: ignore[arg-type]
        tools=[sync_probe, async_probe, roboz.tools.stop],
        store=store,
        scope=scope,
    )


def test_scope_reaches_every_tool_merged_over_the_agents_scope() -> None:
    seen.clear()
    agent = probe_agent(scope=AnalysisScope(start_time=1, end_time=100))
    agent.invoke(scope=AnalysisScope(end_time=50))
    asyncio.run(agent.ainvoke(scope=AnalysisScope(start_time=7)))
    assert seen == [
        ("sync", AnalysisScope(start_time=1, end_time=50)),
        ("async", AnalysisScope(start_time=1, end_time=50)),
        ("sync", AnalysisScope(start_time=7, end_time=100)),
        ("async", AnalysisScope(start_time=7, end_time=100)),
    ]
    seen.clear()
    probe_agent().invoke()
    assert seen == [("sync", None), ("async", None)]
    assert current_scope() is None  # nothing leaks out of the run


def test_viewing_context_is_a_block_on_the_users_message(store: ThreadStore) -> None:
    store.create_thread(thread_id="v-1", org_id="local", created_by="ui")
    ui = HeldThread(store, "v-1")
    viewing = ClientViewingContext(dataset_ids=["ds_1"], display_time_anchor_ns=5)
    agent = probe_agent(store)
    ask = [Message(role=Role.USER, content="What is in this dataset?")]
    _, messages = agent.invoke(ask, thread_id="v-1", viewing_context=viewing)
    assert "datasets ['ds_1']" in messages[2].content
    system = agent.agent_endpoint.requests[0][0]["content"]  # type: ignore[union-attr]
    assert '## What the user is looking at\n{"dataset_ids":["ds_1"]' in system
    delta = ui.sync()
    blocks = [
        (index, message.role, block)
        for index, message in delta.messages_by_idx.items()
        for block in message.content
        if isinstance(block, AgentClientContextEntry)
    ]
    assert len(blocks) == 1
    index, role, block = blocks[0]
    assert (index, role, block.context) == (0, AgentRole.USER, viewing)
    ui.matches_store()
    # The next turn's context sits on that turn's user message.
    later = ClientViewingContext(file_ids=["f_9"])
    agent.invoke(
        [Message(role=Role.USER, content="And this file?")], thread_id="v-1", viewing_context=later
    )
    delta = ui.sync()
    contexts = [
        (message.role, block.context)
        for message in delta.messages_by_idx.values()
        for block in message.content
        if isinstance(block, AgentClientContextEntry)
    ]
    assert contexts == [(AgentRole.USER, later)]
    stored = ui.matches_store()
    for message in stored.messages:
        if message.role is not AgentRole.USER:
            assert not any(isinstance(b, AgentClientContextEntry) for b in message.content)
    # The deletion pass collapses old tool exchanges, never a user's message: both contexts
    # stay in the most compressed view.
    dropped = deletion_pass(stored.messages, stale_tool_exchanges(stored.messages, keep_last=1))
    assert dropped  # it did compress something
    view = [dropped.get(i, m) for i, m in enumerate(stored.messages)]
    kept = [b.context for m in view for b in m.content if isinstance(b, AgentClientContextEntry)]
    assert kept == [viewing, later]


def test_streams_take_the_scope_and_end_on_a_client_tool_use(store: ThreadStore) -> None:
    from roboz.agent import ClientToolUse
    from roboz.runtime.events import AgentFinished
    from roboz.threads import AgentThreadStatus, ClientToolSpec

    seen.clear()
    agent = Agent(
        name="streamer",
        agent_endpoint=MockLLMEndpoint([{"action": "sync_probe"}, {"action": "pick"}]),
        tools=[sync_probe, roboz.tools.stop],
        store=store,
    )
    pick = ClientToolSpec(name="pick", description="Pick.", input_schema={"type": "object"})
    events = list(
        agent.stream(thread_id="s-1", scope=AnalysisScope(start_time=3), client_tools=[pick])
    )
    assert seen == [("sync", AnalysisScope(start_time=3))]
    finished = events[-1]
    assert isinstance(finished, AgentFinished) and isinstance(finished.output, ClientToolUse)
    assert finished.output.tool_name == "pick"
    assert store.get_thread("s-1").status is AgentThreadStatus.CLIENT_TOOL_TURN
