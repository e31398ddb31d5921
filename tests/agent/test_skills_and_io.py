"""Skills, user interaction, events, images and show_agent_info."""

import pytest

from roboz import Agent, AgentMode, Skill, tool
from roboz.agent import AgentConfigurationError
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Image, Message, Stop, Str, StrImage
from roboz.runtime import EventPipe
from roboz.runtime.events import AgentFinished, Event, SkillLoaded, ToolFinished
from roboz.tools import stop
from tests.agent.helpers import system_text


@tool
def greet(input: Empty, messages: list[Message]) -> Str:
    """Say hello."""
    return Str(value="hello")


@tool(chained_to=greet)
def shout(input: Str, messages: list[Message]) -> Str:
    """Shout the greeting."""
    return Str(value=input.value.upper())


base = Skill(name="basics", description="Basic manners", instructions="Be polite.")
greeting = Skill(
    name="greeting",
    description="Greets people",
    instructions="Greet before anything else.",
    tools=[greet, shout],
    depends_on=base,
)


def test_on_demand_skills_are_offered_then_load_instructions_and_tools_together() -> None:
    endpoint = MockLLMEndpoint(
        [{"action": "greeting", "rationale": "need it"}, {"action": "greet"}, {"action": "stop"}]
    )
    agent = Agent(name="s", agent_endpoint=endpoint, tools=[stop], skills=[greeting])
    _, messages = agent.invoke()
    before, after = system_text(endpoint.requests[0]), system_text(endpoint.requests[1])
    assert "### greeting\nLoad the skill 'greeting'" in before
    assert "### greet\n" not in before and "Greet before anything else." not in before
    assert "### greet\nSay hello." in after and "Greet before anything else." in after
    assert "Be polite." in after  # the prerequisite came along
    assert "### shout" not in after  # chained tools of a skill stay passive
    assert [m.caller for m in messages if m.caller != "prompt_llm"] == [
        "basics",
        "greeting",
        "greet",
        "shout",
        "stop",
    ]
    assert any(m.content == '{"value":"HELLO"}' for m in messages)


def test_auto_loaded_skills_are_there_from_the_start() -> None:
    endpoint = MockLLMEndpoint([{"action": "greet"}, {"action": "stop"}])
    agent = Agent(name="s", agent_endpoint=endpoint, tools=[stop], auto_loaded_skills=[greeting])
    agent.invoke()
    prompt = system_text(endpoint.requests[0])
    assert "Greet before anything else." in prompt and "Be polite." in prompt
    assert "Load the skill" not in prompt


def test_a_skill_whose_chain_is_broken_fails_when_the_agent_is_built() -> None:
    broken = Skill(name="broken", description="", instructions="", tools=[shout])
    with pytest.raises(AgentConfigurationError, match="'shout' is chained to 'greet'"):
        Agent(name="s", agent_endpoint=MockLLMEndpoint([]), skills=[broken])


def test_events_reach_sinks_and_pipe_and_sinks_are_exclusive() -> None:
    seen: list[Event] = []
    endpoint = MockLLMEndpoint([{"action": "greeting"}, {"action": "greet"}, {"action": "stop"}])
    agent = Agent(
        name="s",
        agent_endpoint=endpoint,
        tools=[stop],
        skills=[greeting],
        event_sinks=[seen.append],
    )
    agent.invoke()
    assert [e.skill for e in seen if isinstance(e, SkillLoaded)] == ["basics", "greeting"]
    assert "shout" in [e.tool for e in seen if isinstance(e, ToolFinished)]
    finished = [e for e in seen if isinstance(e, AgentFinished)]
    assert finished and finished[0].llm_calls == 3
    with pytest.raises(AgentConfigurationError, match="either event_pipe or event_sinks"):
        Agent(name="s", agent_endpoint=endpoint, event_pipe=EventPipe(), event_sinks=[])


class ScriptedUser:
    def __init__(self, replies: list[Str | StrImage | None]) -> None:
        self.replies = replies
        self.prompts: list[str] = []
        self.notes: list[str] = []

    def request_input(self, prompt: str, *, timeout: float | None = None) -> Str | StrImage | None:
        self.prompts.append(prompt)
        return self.replies.pop(0)

    def notify(self, message: str) -> None:
        self.notes.append(message)


PHOTO = Image(url="https://example.com/cat.png")


def test_steerable_agents_ask_the_user_and_keep_image_replies() -> None:
    user = ScriptedUser([StrImage(value="this one", images=[PHOTO])])
    endpoint = MockLLMEndpoint([{"action": "ask_user", "question": "Which?"}, {"action": "stop"}])
    agent = Agent(name="s", agent_endpoint=endpoint, tools=[stop], user_io=user)
    _, messages = agent.invoke()
    assert user.prompts == ["Which?"]
    reply = [m for m in messages if m.caller == "ask_user"][0]
    assert reply.images == [PHOTO] and '"this one"' in reply.content
    assert endpoint.requests[1][-1]["images"] == [PHOTO]
    assert endpoint.requests[1][-1]["role"] == "user"


def test_autonomous_agents_cannot_ask_for_input() -> None:
    user = ScriptedUser([Str(value="should never be read")])

    @tool
    def wants_input(input: Empty, messages: list[Message]) -> Stop:
        """Try to ask."""
        from roboz.runtime.io import interact_with_user

        interact_with_user("fyi", with_reply=False)
        return Stop(value=interact_with_user("anything?"))

    endpoint = MockLLMEndpoint([{"action": "wants_input"}])
    agent = Agent(
        name="a",
        agent_endpoint=endpoint,
        tools=[wants_input],
        mode=AgentMode.AUTONOMOUS,
        user_io=user,
    )
    result, _ = agent.invoke()
    assert result.value is None
    assert user.prompts == [] and user.notes == ["fyi"]
    assert "ask_user" not in system_text(endpoint.requests[0])


class Photo(Empty):
    photo: Image


def test_image_arguments_are_declared_explicitly_and_chain_as_text_or_images() -> None:
    received: list[object] = []

    @tool
    def inspect(input: Photo, messages: list[Message]) -> StrImage:
        """Present a photo."""
        return StrImage(value="look", images=[input.photo])

    @tool(chained_to=inspect)
    def caption(input: Str, messages: list[Message]) -> Stop:
        """Caption from text only."""
        received.append(input)
        return Stop(value=input.value)

    endpoint = MockLLMEndpoint([{"action": "inspect", "photo": {"url": PHOTO.url}}])
    agent = Agent(name="i", agent_endpoint=endpoint, tools=[inspect, caption])
    result, messages = agent.invoke()
    assert result.value == "look"
    assert '"photo"' in system_text(endpoint.requests[0])
    assert PHOTO.url in messages[0].content  # supplied image arguments stay in the action text


def test_show_agent_info_prints_the_whole_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    agent = Agent(
        name="info",
        system_prompt="Be useful.",
        agent_endpoint=MockLLMEndpoint([]),
        tools=[stop],
        skills=[greeting],
        description="demo agent",
    )
    text = agent.show_agent_info()
    printed = capsys.readouterr().out
    assert text in printed
    for fragment in (
        "Agent 'info': demo agent",
        "mode: steerable",
        "MockLLMEndpoint model=mock",
        "defaults (in order): prompt_llm",
        "actions offered to the LLM: stop, ask_user",
        "greet -> shout when always",
        "skills on demand: greeting",
        "Be useful.",
        "## How to act",
    ):
        assert fragment in text
