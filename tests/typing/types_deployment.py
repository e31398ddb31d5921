"""DeployableAgent: labels, selections and what build() returns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, assert_type

from roboz import Agent
from roboz.deployment import Capability, DeployableAgent, SkillLabel, SkillLoading, ToolLabel
from roboz.tools import stop

agent = DeployableAgent(
    name="assistant",
    system_prompt="Help the user.",
    capabilities=(Capability(label=ToolLabel("stop"), value=stop),),
)
assert_type(agent.resolve_capabilities(), dict[str, bool | SkillLoading])
assert_type(agent.capability_selection, Mapping[str, bool | SkillLoading] | None)
assert_type(agent.build(), tuple[Agent, tuple[Agent, ...]])
assert_type(ToolLabel("stop").kind, Literal["tool"])
assert_type(SkillLabel("guide", selectable=True).kind, Literal["skill"])

ToolLabel("stop", loading=SkillLoading.AUTOMATIC)  # type: ignore[call-arg]
SkillLabel("guide", default=True)  # type: ignore[call-arg]
