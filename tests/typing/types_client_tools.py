"""Agent.invoke() with client tools may return a ClientToolTurn; without them it cannot."""

from __future__ import annotations

from typing import assert_type

from roboz import Agent
from roboz.agent import ClientToolTurn
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Stop
from roboz.threads import ClientToolSpec, SQLiteThreadStore
from roboz.tools import stop


async def run() -> None:
    agent = Agent(
        name="typed",
        agent_endpoint=MockLLMEndpoint([{"action": "stop", "value": "done"}]),
        tools=[stop],
        store=SQLiteThreadStore(":memory:"),
    )
    assert_type(agent.invoke(), tuple[Stop, list[Message]])
    assert_type(await agent.ainvoke(thread_id="t"), tuple[Stop, list[Message]])
    pick = ClientToolSpec(name="pick", description="Pick a file.", input_schema={})
    result = agent.invoke(client_tools=[pick])
    assert_type(result, tuple[Stop, list[Message]] | ClientToolTurn)
    if isinstance(result, ClientToolTurn):
        resumed = agent.submit_tool_results(result.thread_id or "", {"tu_1": "a.txt"})
        assert_type(resumed, tuple[Stop, list[Message]] | ClientToolTurn)
    assert_type(
        await agent.ainvoke(client_tools=[pick]), tuple[Stop, list[Message]] | ClientToolTurn
    )
