"""Building runtimes: defaults, intact chains, unique names, owner attributes, background
agents, initial messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboz import Agent, AgentMode, tool
from roboz.agent import AgentConfigurationError
from roboz.deployment import (
    Capability,
    DeployableAgent,
    DeploymentError,
    MissingAttributesError,
    RuntimeValue,
    SkillLabel,
    ToolLabel,
)
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Message, Role, Stop
from roboz.runtime.events import EventPipe, ToolStarted
from roboz.tools import stop
from tests.deployment.tools import count, finish, greet, guide, shout


def test_a_default_label_runs_its_first_tool_before_the_llm() -> None:
    mock = MockLLMEndpoint([{"action": "stop", "rationale": "done", "value": "ok"}])
    agent = DeployableAgent(
        "a",
        agent_endpoint=mock,
        capabilities=[
            Capability(label=ToolLabel("count", default=True), value=count),
            Capability(label=ToolLabel("stop", selectable=False), value=stop),
        ],
    )
    runtime, _ = agent.build()
    assert [t.name for t in runtime.default_tools] == ["count"]
    output, messages = runtime.invoke()
    assert output.value == "ok"
    # count ran (a default) before prompt_llm asked the mock.
    assert [m.caller for m in messages if m.role is Role.TOOL][:1] == ["count"]


def test_a_default_chain_stays_intact_root_as_default_and_the_rest_chained() -> None:
    agent = DeployableAgent(
        "a",
        mode=AgentMode.DETERMINISTIC,
        capabilities=[Capability(label=ToolLabel("greeting", default=True), value=(greet, shout))],
    )
    runtime, _ = agent.build()
    assert [t.name for t in runtime.default_tools] == ["greet"]
    assert [t.name for t in runtime.tools] == ["shout"]
    output, _ = runtime.invoke()
    assert output.value == "HELLO"


def test_default_roots_run_in_declaration_order_and_selection_keeps_it() -> None:
    seen: list[str] = []
    pipe = EventPipe([lambda e: seen.append(e.tool) if isinstance(e, ToolStarted) else None])
    agent = DeployableAgent(
        "a",
        mode=AgentMode.DETERMINISTIC,
        event_pipe=pipe,
        capabilities=[
            Capability(label=ToolLabel("greet", default=True, selectable=True), value=greet),
            Capability(label=ToolLabel("count", default=True, selectable=True), value=count),
            Capability(label=ToolLabel("finish", default=True), value=finish),
        ],
    )
    agent.build()[0].invoke()
    assert seen == ["greet", "count", "finish"]
    seen.clear()
    agent.set_capability_selection({"count": True, "greet": True})  # map order is irrelevant
    agent.build()[0].invoke()
    assert seen == ["greet", "count", "finish"]
    seen.clear()
    agent.set_capability_selection({"count": True})
    agent.build()[0].invoke()
    assert seen == ["count", "finish"]


def test_a_builder_returning_several_entries_under_a_default_label_gives_separate_roots() -> None:
    class Pair(Capability):
        def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
            return (count, (greet, shout))

    agent = DeployableAgent(
        "a", mode=AgentMode.DETERMINISTIC, capabilities=[Pair(label=ToolLabel("p", default=True))]
    )
    runtime, _ = agent.build()
    assert [t.name for t in runtime.default_tools] == ["count", "greet"]
    assert runtime.invoke()[0].value == "HELLO"


def test_duplicate_names_are_refused_naming_both_capabilities() -> None:
    agent = DeployableAgent("a", capabilities=[Capability(label=ToolLabel("greet"), value=greet)])
    with pytest.raises(DeploymentError) as caught:
        agent.add_capabilities(
            Capability(label=ToolLabel("count"), value=count),
            Capability(label=SkillLabel("greet"), value=guide),
        )
    message = str(caught.value)
    assert "Capability tool 'greet' (capabilities[0])" in message
    assert "Capability skill 'greet' (capabilities[2])" in message
    # All or nothing: the valid entry of the refused call was not added either.
    assert [c.name for c in agent.capabilities] == ["greet"]
    with pytest.raises(DeploymentError, match="unique"):
        DeployableAgent(
            "b",
            capabilities=[
                Capability(label=ToolLabel("x"), value=greet),
                Capability(label=ToolLabel("x"), value=count),
            ],
        )


def test_non_capabilities_are_refused() -> None:
    with pytest.raises(DeploymentError, match="is not a Capability"):
        DeployableAgent("a", capabilities=[greet])  # type: ignore[list-item]


class NeedsSettings(Capability):
    required_attributes = ("greeting", "punctuation")

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        text = agent.attributes["greeting"] + agent.attributes["punctuation"]

        @tool
        def say(input: Empty, messages: list[Message]) -> Stop:
            """Say the configured greeting."""
            return Stop(value=text)

        return (say,)


def test_missing_required_attributes_fail_naming_capability_and_attributes() -> None:
    agent = DeployableAgent(
        "a",
        mode=AgentMode.DETERMINISTIC,
        capabilities=[NeedsSettings(label=ToolLabel("say", default=True))],
    )
    agent.set_attributes(greeting="hi")
    with pytest.raises(MissingAttributesError, match=r"NeedsSettings tool 'say' needs punctuation"):
        agent.build()
    agent.set_attributes(punctuation="!")
    assert agent.build()[0].invoke()[0].value == "hi!"


def test_an_excluded_builder_and_its_requirements_are_skipped() -> None:
    built: list[str] = []

    class Tracking(NeedsSettings):
        def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
            built.append(self.name)
            return super().build(agent, pipe)

    agent = DeployableAgent(
        "a",
        agent_endpoint=MockLLMEndpoint([]),
        capabilities=[
            Capability(label=ToolLabel("greet"), value=greet),
            Tracking(label=ToolLabel("say", selectable=True)),
        ],
    )
    agent.set_capability_selection({"greet": True})
    runtime, _ = agent.build()
    assert [t.name for t in runtime.tools] == ["greet"]
    assert built == []


def test_builders_receive_the_owner_and_the_deployments_pipe() -> None:
    received: list[tuple[DeployableAgent, EventPipe]] = []

    class Spy(Capability):
        def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
            received.append((agent, pipe))
            return (greet,)

    pipe = EventPipe()
    agent = DeployableAgent(
        "a",
        agent_endpoint=MockLLMEndpoint([]),
        event_pipe=pipe,
        capabilities=[Spy(label=ToolLabel("greet"))],
    )
    runtime, _ = agent.build()
    assert received == [(agent, pipe)]
    assert runtime.event_pipe is pipe


def test_set_attributes_refuses_structural_fields() -> None:
    agent = DeployableAgent("a")
    with pytest.raises(DeploymentError, match=r"cannot set mode, system_prompt"):
        agent.set_attributes(system_prompt="x", mode=AgentMode.AUTONOMOUS, color="red")
    assert "color" not in agent.attributes
    agent.set_attributes(color="red")
    assert agent.attributes["color"] == "red"
    with pytest.raises(TypeError):
        agent.attributes["color"] = "blue"  # type: ignore[index]


def test_structural_fields_are_writable_and_checked(tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("from a file")
    mock = MockLLMEndpoint([{"action": "stop", "rationale": "r", "value": "v"}])
    agent = DeployableAgent("a", capabilities=[Capability(label=ToolLabel("stop"), value=stop)])
    agent.name = "renamed"
    agent.description = "described"
    agent.mode = AgentMode.AUTONOMOUS
    agent.automatic_tool_prompt = False
    agent.agent_endpoint = mock
    agent.initial_messages = ("hello", note)
    runtime, _ = agent.build()
    assert (runtime.name, runtime.description, runtime.mode) == (
        "renamed",
        "described",
        AgentMode.AUTONOMOUS,
    )
    assert runtime.automatic_tool_prompt is False
    assert runtime.agent_endpoint is mock
    assert [m.content for m in runtime.initial_messages] == ["hello", "from a file"]
    agent.set_initial_messages(["only"])
    assert agent.initial_messages == ("only",)
    with pytest.raises(DeploymentError, match="must be a tuple"):
        agent.initial_messages = ["a list"]  # type: ignore[assignment]
    with pytest.raises(ValueError):
        agent.mode = "chaotic"  # type: ignore[assignment]


def test_an_llm_agent_without_an_endpoint_fails_when_built() -> None:
    with pytest.raises(AgentConfigurationError, match="needs agent_endpoint"):
        DeployableAgent("a").build()


class WithHelper(Capability):
    """Contributes a child definition that runs as a background agent."""

    def __init__(self, *, label: ToolLabel, child: DeployableAgent) -> None:
        super().__init__(label=label)
        self.child = child

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        return (greet,)

    def background_agents(self) -> tuple[DeployableAgent, ...]:
        return (self.child,)


def child_definition() -> DeployableAgent:
    return DeployableAgent(
        "janitor",
        mode=AgentMode.DETERMINISTIC,
        capabilities=[
            Capability(label=ToolLabel("count", default=True, selectable=True), value=count),
            Capability(label=ToolLabel("finish", default=True, selectable=True), value=finish),
        ],
    )


def test_background_agents_come_from_included_capabilities_with_their_own_selection() -> None:
    child = child_definition()
    parent = DeployableAgent(
        "parent",
        agent_endpoint=MockLLMEndpoint([]),
        capabilities=[
            WithHelper(label=ToolLabel("greet", selectable=True), child=child),
            Capability(label=ToolLabel("count", selectable=True), value=count),
        ],
    )
    child.set_capability_selection({"finish": True})
    parent.set_capability_selection({"greet": True})
    runtime, background = parent.build()
    assert [t.name for t in runtime.tools] == ["greet"]
    assert [agent.name for agent in background] == ["janitor"]
    assert isinstance(background[0], Agent)
    # The child's own selection applies ("count" is its optional entry, left out there),
    # and the parent's selection did not touch it.
    assert [t.name for t in background[0].default_tools] == ["finish"]
    assert child.capability_selection == {"finish": True}
    parent.set_capability_selection({"count": True})
    assert parent.build()[1] == ()
