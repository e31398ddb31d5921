"""external_dependencies() walks the whole declared graph without building anything."""

from __future__ import annotations

from dataclasses import dataclass

from roboz import AgentMode
from roboz.dependencies import DependencyFailure, ExternalDependency, LLMEndpointDependency
from roboz.deployment import Capability, DeployableAgent, RuntimeValue, ToolLabel
from roboz.llm import EndpointLike, MockLLMEndpoint
from roboz.runtime.events import EventPipe
from tests.deployment.tools import count, greet


@dataclass(frozen=True)
class Marker:
    label: str

    @property
    def name(self) -> str:
        return f"marker {self.label}"

    def check(self) -> DependencyFailure | None:
        return None


class Declares(Capability):
    """Declares dependencies and an endpoint; building it is a test failure."""

    def __init__(
        self,
        *,
        label: ToolLabel,
        deps: tuple[ExternalDependency, ...] = (),
        endpoint: EndpointLike | None = None,
        child: DeployableAgent | None = None,
    ) -> None:
        super().__init__(label=label)
        self.deps = deps
        self.endpoint = endpoint
        self.child = child

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        raise AssertionError("external_dependencies() must not build capabilities")

    def external_dependencies(self) -> tuple[ExternalDependency, ...]:
        return self.deps

    def endpoints(self) -> tuple[EndpointLike, ...]:
        return () if self.endpoint is None else (self.endpoint,)

    def background_agents(self) -> tuple[DeployableAgent, ...]:
        return () if self.child is None else (self.child,)


def test_disabled_capabilities_children_and_endpoints_all_count_once() -> None:
    main_endpoint = MockLLMEndpoint([])
    tool_endpoint = MockLLMEndpoint([], model_name="guard")
    child_endpoint = MockLLMEndpoint([], model_name="child")
    child = DeployableAgent(
        "child",
        agent_endpoint=child_endpoint,
        capabilities=[
            Declares(label=ToolLabel("child_dep"), deps=(Marker("socket"), Marker("child"))),
        ],
    )
    child.set_capability_selection({})  # left out in the child too: still declared
    agent = DeployableAgent(
        "parent",
        agent_endpoint=main_endpoint,
        capabilities=[
            Capability(label=ToolLabel("greet"), value=greet),
            Declares(label=ToolLabel("off"), deps=(Marker("socket"), Marker("rg"))),
            Declares(label=ToolLabel("guarded"), endpoint=tool_endpoint, child=child),
            Declares(label=ToolLabel("again"), endpoint=main_endpoint),
        ],
    )
    agent.set_capability_selection({"greet": True})
    before = agent.capability_selection

    found = agent.external_dependencies()

    assert [d.name for d in found] == [
        "LLM endpoint mock",
        "marker socket",
        "marker rg",
        "LLM endpoint mock (guard)",
        "LLM endpoint mock (child)",
        "marker child",
    ]
    endpoints = [d.endpoint for d in found if isinstance(d, LLMEndpointDependency)]
    assert endpoints == [main_endpoint, tool_endpoint, child_endpoint]
    assert agent.capability_selection is before
    assert all(d.check() is None for d in found)


def test_a_definition_without_external_resources_has_none() -> None:
    agent = DeployableAgent(
        "plain",
        mode=AgentMode.DETERMINISTIC,
        capabilities=[Capability(label=ToolLabel("count", default=True), value=count)],
    )
    assert agent.external_dependencies() == ()
