"""The initial prompt asks the user for a run's first message through the UserIO; the reply
(images included) is the user's message the LLM then answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboz import Agent, AgentMode
from roboz.agent import AgentConfigurationError
from roboz.agent.initial_prompt import NO_FIRST_MESSAGE
from roboz.llm import MockLLMEndpoint
from roboz.models import Image, Message, Role, Str, StrImage
from roboz.runtime.events import Event, UserPrompted
from roboz.threads import AgentRole, SQLiteThreadStore
from roboz.tools import stop

PHOTO = Image(url="https://example.com/chart.png")
QUESTION = "What should I look at?"


class ScriptedUser:
    def __init__(self, replies: list[Str | StrImage | None]) -> None:
        self.replies = replies
        self.prompts: list[str] = []

    def request_input(self, prompt: str, *, timeout: float | None = None) -> Str | StrImage | None:
        self.prompts.append(prompt)
        return self.replies.pop(0)

    def notify(self, message: str) -> None:
        pass


def make_agent(user: ScriptedUser, endpoint: MockLLMEndpoint, **extra: object) -> Agent:
    return Agent(
        name="viewer",
        agent_endpoint=endpoint,
        tools=[stop],
        user_io=user,
        initial_prompt=QUESTION,
        **extra,  # type: ignore[arg-type]
    )


def test_the_first_message_is_asked_for_and_keeps_its_images() -> None:
    user = ScriptedUser([StrImage(value="Describe this chart.", images=[PHOTO])])
    endpoint = MockLLMEndpoint([{"action": "stop", "value": "a chart"}])
    events: list[Event] = []
    agent = make_agent(user, endpoint, event_sinks=[events.append])
    stop_value, messages = agent.invoke()
    assert stop_value.value == "a chart"
    assert user.prompts == [QUESTION]
    assert [e.prompt for e in events if isinstance(e, UserPrompted)] == [QUESTION]
    first = messages[0]
    assert (first.role, first.content, first.images) == (Role.USER, "Describe this chart.", [PHOTO])
    assert first.message_kind is None  # the human's message: the turn starts at it
    # The LLM's first request carries the user's text and image, in the user's role.
    (record,) = [r for r in endpoint.requests[0] if r["role"] == "user"]
    assert record["content"] == "Describe this chart." and record["images"] == [PHOTO]


def test_a_run_that_has_a_first_message_does_not_ask() -> None:
    user = ScriptedUser([])
    agent = make_agent(user, MockLLMEndpoint([{"action": "stop"}, {"action": "stop"}]))
    agent.invoke([Message(role=Role.USER, content="Given.")])
    agent = agent.replace(initial_messages=[Message(role=Role.USER, content="Configured.")])
    agent.invoke()
    assert user.prompts == []


def test_no_reply_stops_the_run_without_asking_the_llm() -> None:
    endpoint = MockLLMEndpoint([])
    result, messages = make_agent(ScriptedUser([None]), endpoint).invoke()
    assert result.value == NO_FIRST_MESSAGE
    assert messages == [] and endpoint.calls == 0


def test_the_first_message_is_stored_as_the_users(tmp_path: Path) -> None:
    store = SQLiteThreadStore(tmp_path / "runs.db")
    user = ScriptedUser([Str(value="Hello there.")])
    agent = make_agent(user, MockLLMEndpoint([{"action": "stop"}]), store=store)
    agent.invoke()
    assert agent.thread_id is not None
    thread = store.get_thread(agent.thread_id)
    assert thread.messages[0].role is AgentRole.USER
    assert agent.show_agent_info(print_it=False).count(repr(QUESTION)) == 1


def test_an_autonomous_agent_cannot_have_an_initial_prompt() -> None:
    with pytest.raises(AgentConfigurationError, match="initial_prompt asks the user"):
        Agent(
            name="a",
            agent_endpoint=MockLLMEndpoint([]),
            mode=AgentMode.AUTONOMOUS,
            initial_prompt=QUESTION,
        )
    with pytest.raises(AgentConfigurationError, match="give non-empty text"):
        Agent(name="a", agent_endpoint=MockLLMEndpoint([]), initial_prompt=" ")


def test_a_deployment_passes_its_initial_prompt_to_the_runtimes_it_builds() -> None:
    from roboz.deployment import DeployableAgent

    definition = DeployableAgent("d", agent_endpoint=MockLLMEndpoint([]), initial_prompt=QUESTION)
    runtime, _ = definition.build()
    assert runtime.initial_prompt == QUESTION
