"""The seed's DeployableAgent example, verbatim, and what it builds."""

from __future__ import annotations

from roboz import Agent
from roboz.deployment import DeployableAgent, SkillLoading

SEED_EXAMPLE = """
from roboz import Skill
from roboz.deployment import (
    Capability, DeployableAgent, SkillLabel, SkillLoading, ToolLabel,
)
from roboz.llm import MockLLMEndpoint
from roboz.tools import stop

agent = DeployableAgent(
    name="assistant",
    system_prompt="Help the user.",
    capabilities=(Capability(label=ToolLabel("stop"), value=stop),),
)
guide = Skill(name="guide", description="Project guidance", instructions="Help.")
agent.add_capabilities(
    Capability(label=SkillLabel("guide", selectable=True), value=guide)
)
agent.set_agent_endpoint(MockLLMEndpoint([]))
agent.set_capability_selection({"guide": SkillLoading.ON_DEMAND})
runtime, background_agents = agent.build()
"""


def test_seed_example_runs_unchanged_and_builds_what_it_selected() -> None:
    namespace: dict[str, object] = {}
    exec(compile(SEED_EXAMPLE, "seed-example", "exec"), namespace)
    runtime = namespace["runtime"]
    assert isinstance(runtime, Agent)
    assert namespace["background_agents"] == ()
    assert [skill.name for skill in runtime.skills] == ["guide"]
    assert runtime.auto_loaded_skills == ()
    # "stop" is declared without selectable=True, so it is fixed: the explicit map that names
    # only "guide" keeps it, and the example agent can still stop.
    assert [t.name for t in runtime.tools] == ["stop"]
    agent = namespace["agent"]
    assert isinstance(agent, DeployableAgent)
    assert agent.resolve_capabilities() == {"stop": True, "guide": SkillLoading.ON_DEMAND}
    assert runtime.name == "assistant"
    assert runtime.system_prompt == "Help the user."
