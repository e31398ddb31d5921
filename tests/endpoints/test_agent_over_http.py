"""An Agent driven by JSON action replies from a real OpenAI-compatible server."""

from __future__ import annotations

import json

from roboz import Agent, AgentMode, tool
from roboz.endpoints.adapters.openai_compatible import chat_endpoint
from roboz.models import Empty, Int, Message
from roboz.runtime.events import Event, LLMDelta
from roboz.tools import stop
from tests.endpoints.openai_fake import FakeOpenAIServer, Reply


class Numbers(Empty):
    left: int
    right: int


@tool
def add(input: Numbers, messages: list[Message]) -> Int:
    """Add two numbers."""
    return Int(value=input.left + input.right)


def test_agent_runs_two_tool_calls_from_streamed_json_actions(
    openai_server: FakeOpenAIServer,
) -> None:
    first = json.dumps({"action": "add", "rationale": "sum them", "left": 2, "right": 40})
    second = json.dumps({"action": "stop", "rationale": "done", "value": "42"})
    # The first action arrives split mid-JSON, as real streams do.
    openai_server.enqueue(Reply(chunks=[first[:17], first[17:]]), Reply(text=second))
    events: list[Event] = []
    agent = Agent(
        name="calc",
        system_prompt="Add the numbers, then stop with the sum.",
        agent_endpoint=chat_endpoint(
            model="agent-model",
            max_context_tokens=16_000,
            base_url=openai_server.base_url,
            api_key="sk-test",
        ),
        tools=[add, stop],
        mode=AgentMode.AUTONOMOUS,
        event_sinks=[events.append],
    )

    result, conversation = agent.invoke()

    assert result.value == "42"
    assert len(openai_server.requests) == 2
    first_request, second_request = (request.json() for request in openai_server.requests)
    assert first_request["stream"] is True
    assert first_request["messages"][0]["role"] == "system"
    assert "Add the numbers" in first_request["messages"][0]["content"]
    # The second request carries the first action and the add tool's result.
    action, result_message = second_request["messages"][1:]
    assert action == {"role": "assistant", "content": first}
    # Tool results travel as user turns; the exact wording belongs to the core.
    assert result_message["role"] == "user"
    assert '"value":42' in result_message["content"].replace(" ", "")
    deltas = [event for event in events if isinstance(event, LLMDelta)]
    assert "".join(delta.text for delta in deltas) == first + second
    assert {delta.agent for delta in deltas} == {"calc"}
    assert any(message.content == first for message in conversation)


def _stop_agent(server: FakeOpenAIServer, **options: object) -> Agent:
    return Agent(
        name="quiet",
        agent_endpoint=chat_endpoint(
            model="m", max_context_tokens=8_000, base_url=server.base_url, api_key="sk-test"
        ),
        tools=[stop],
        **options,  # type: ignore[arg-type]
    )


def test_the_agent_streams_only_when_a_sink_consumes_deltas(
    openai_server: FakeOpenAIServer,
) -> None:
    reply = json.dumps({"action": "stop", "value": "done"})
    openai_server.enqueue(Reply(text=reply), Reply(text=reply), Reply(text=reply))

    class Summary:
        """A sink that reads only whole replies and says so."""

        wants_deltas = False

        def __init__(self) -> None:
            self.events: list[Event] = []

        def __call__(self, event: Event) -> None:
            self.events.append(event)

    summary = Summary()
    assert _stop_agent(openai_server).invoke()[0].value == "done"
    assert _stop_agent(openai_server, event_sinks=[summary]).invoke()[0].value == "done"
    assert summary.events and not [e for e in summary.events if isinstance(e, LLMDelta)]
    deltas: list[Event] = []
    _stop_agent(openai_server, event_sinks=[summary, deltas.append]).invoke()

    bodies = [request.json() for request in openai_server.requests]
    assert ["stream" in body for body in bodies] == [False, False, True]
    assert "".join(e.text for e in deltas if isinstance(e, LLMDelta)) == reply
