"""Agent.invoke() returns the Stop and the conversation."""

from __future__ import annotations

from typing import assert_type

from roboz import Agent, tool
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Message, Role, Stop


@tool
def finish(input: Empty, messages: list[Message]) -> Stop:
    """Stop."""
    return Stop(value="done")


def run() -> None:
    agent = Agent(
        name="typed",
        system_prompt="Stop.",
        agent_endpoint=MockLLMEndpoint([{"action": "finish", "rationale": "done"}]),
        tools=[finish],
    )
    result = agent.invoke()
    assert_type(result, tuple[Stop, list[Message]])
    _stop, messages = result
    assert_type(messages[0].role, Role)
    agent.invoke([Message(role=Role.USER, content="hi")])
    agent.invoke("hello")  # type: ignore[call-overload]
