"""A skill factory given where a skill belongs is refused with the error DeployableAgent
gives, naming the entry, instead of failing later with an AttributeError."""

from __future__ import annotations

from typing import Any, cast

import pytest

from roboz import Agent, Skill
from roboz.agent import AgentConfigurationError
from roboz.deployment import Capability, DeployableAgent, DeploymentError, SkillLabel
from roboz.llm import MockLLMEndpoint
from roboz.shed.skills import filesystem_skill
from roboz.tools import stop

HINT = "is a factory; call it with its context first"


@pytest.mark.parametrize("field", ["skills", "auto_loaded_skills"])
def test_an_agent_refuses_a_skill_factory_and_says_to_call_it(field: str) -> None:
    entries = cast("Any", [filesystem_skill])  # what an untyped caller may pass
    with pytest.raises(AgentConfigurationError) as caught:
        Agent(name="a", agent_endpoint=MockLLMEndpoint([]), tools=[stop], **{field: entries})
    message = str(caught.value)
    assert f"agent 'a': {field}[0] SkillFactory(name='filesystem') {HINT}" in message
    # The deployment says the same about the same mistake.
    with pytest.raises(DeploymentError, match=HINT):
        DeployableAgent("d", capabilities=[Capability(label=SkillLabel("fs"), value=entries[0])])


def test_an_agent_refuses_what_is_not_a_skill() -> None:
    with pytest.raises(AgentConfigurationError, match=r"skills\[1\] 'notes' is not a Skill"):
        Agent(
            name="a",
            agent_endpoint=MockLLMEndpoint([]),
            skills=cast("Any", [Skill(name="ok", description="", instructions=""), "notes"]),
        )
