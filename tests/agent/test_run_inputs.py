"""What invoke accepts, the user-io binding in force, and rejected replies that are reported."""

from __future__ import annotations

import pytest

from roboz import Agent, AgentMode, tool
from roboz.agent import AgentReplyError
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Message, Role, Stop, Str, StrImage
from roboz.runtime import use_user_io
from roboz.runtime.events import Event, LLMReplyRejected
from roboz.runtime.io import interact_with_user
from roboz.tools import stop


class HostIO:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []
        self.notes: list[str] = []

    def request_input(self, prompt: str, *, timeout: float | None = None) -> Str | StrImage | None:
        self.prompts.append(prompt)
        return Str(value=self.answers.pop(0))

    def notify(self, message: str) -> None:
        self.notes.append(message)


@tool
def approve(input: Empty, messages: list[Message]) -> Stop:
    """Ask the user for approval."""
    interact_with_user("heads up", with_reply=False)
    return Stop(value=interact_with_user("approve?"))


def test_an_agent_without_user_io_uses_the_host_binding_in_force() -> None:
    host = HostIO("yes")
    agent = Agent(
        name="h", agent_endpoint=MockLLMEndpoint([{"action": "approve"}]), tools=[approve]
    )
    with use_user_io(host):
        result, _ = agent.invoke()
    assert result.value == Str(value="yes")
    assert host.prompts == ["approve?"] and host.notes == ["heads up"]


def test_an_agents_own_user_io_wins_over_the_binding() -> None:
    host, own = HostIO("host"), HostIO("own")
    agent = Agent(
        name="h",
        agent_endpoint=MockLLMEndpoint([{"action": "approve"}]),
        tools=[approve],
        user_io=own,
    )
    with use_user_io(host):
        assert agent.invoke()[0].value == Str(value="own")
    assert host.prompts == []


def test_autonomous_agents_still_refuse_input_under_a_host_binding() -> None:
    host = HostIO("never read")
    agent = Agent(
        name="h",
        agent_endpoint=MockLLMEndpoint([{"action": "approve"}]),
        tools=[approve],
        mode=AgentMode.AUTONOMOUS,
    )
    with use_user_io(host):
        assert agent.invoke()[0].value is None
    assert host.prompts == [] and host.notes == ["heads up"]


@pytest.mark.parametrize(
    ("given", "complaint"),
    [
        (["hello"], "item 0 is str, not a Message"),
        ("hello", "got str"),
        ((Message(role=Role.USER, content="hi"),), "got tuple"),
        ([Message(role=Role.USER, content="hi"), {"role": "user"}], "item 1 is dict"),
    ],
)
def test_invoke_refuses_what_is_not_a_list_of_messages_at_the_call(
    given: object, complaint: str
) -> None:
    endpoint = MockLLMEndpoint([{"action": "stop"}])
    agent = Agent(name="i", agent_endpoint=endpoint, tools=[stop])
    with pytest.raises(TypeError, match=complaint):
        agent.invoke(given)  # type: ignore[arg-type]
    assert endpoint.calls == 0


def test_text_initial_messages_are_the_way_to_start_from_text() -> None:
    endpoint = MockLLMEndpoint([{"action": "stop", "value": "hi"}])
    agent = Agent(name="i", agent_endpoint=endpoint, tools=[stop], initial_messages=["hello"])
    _, messages = agent.invoke()
    assert messages[0] == Message(role=Role.USER, content="hello")


def test_every_rejected_reply_is_an_event_and_the_error_names_the_last_reason() -> None:
    events: list[Event] = []
    endpoint = MockLLMEndpoint(["not json", {"action": "multiply"}, {"action": "stop", "x": 1}])
    agent = Agent(
        name="r", agent_endpoint=endpoint, tools=[stop], max_repairs=2, event_sinks=[events.append]
    )
    with pytest.raises(AgentReplyError) as caught:
        agent.invoke()
    reasons = [e.reason for e in events if isinstance(e, LLMReplyRejected)]
    assert len(reasons) == 3
    assert "not a JSON object" in reasons[0] and "unknown action 'multiply'" in reasons[1]
    assert "x: Extra inputs" in reasons[2]
    assert "x: Extra inputs" in str(caught.value)
    kinds = [m.message_kind for m in caught.value.messages]
    assert kinds == ["rejected_reply", "repair", "rejected_reply", "repair", "rejected_reply"]
    assert caught.value.messages[-1].content == '{"action": "stop", "x": 1}'
    assert caught.value.messages is agent.messages


def test_an_agent_is_immutable_and_replace_makes_another() -> None:
    import dataclasses

    from roboz.agent import MaxStepsExceededError

    endpoint = MockLLMEndpoint([{"action": "ask_user", "question": "?"}] * 3 + [{"action": "stop"}])
    agent = Agent(name="f", agent_endpoint=endpoint, tools=[stop], user_io=HostIO("a", "b"))
    spec = agent.run_spec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.max_steps = 1  # type: ignore[misc]
    with pytest.raises(AttributeError, match=r"immutable .* agent.replace\(max_steps=...\)"):
        agent.max_steps = 2
    strict = agent.replace(max_steps=2)
    with pytest.raises(MaxStepsExceededError, match="more than 2 steps"):
        strict.invoke()
    assert spec.max_steps == agent.max_steps == 1000
    assert strict.event_pipe is agent.event_pipe and strict.user_io is agent.user_io
