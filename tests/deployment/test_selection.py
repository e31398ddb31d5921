"""Selection rules: None includes everything; an explicit map includes fixed entries plus the
enabled optional ones; loading modes change per agent; errors name capability and rule."""

from __future__ import annotations

import json

import pytest

from roboz import AgentMode, Skill
from roboz.deployment import (
    Capability,
    CapabilitySelectionError,
    DeployableAgent,
    SkillLabel,
    SkillLoading,
    ToolLabel,
)
from roboz.llm import MockLLMEndpoint
from tests.deployment.tools import count, finish, greet, guide, manual


def definition() -> DeployableAgent:
    return DeployableAgent(
        "assistant",
        "Help.",
        agent_endpoint=MockLLMEndpoint([]),
        capabilities=(
            Capability(label=ToolLabel("greet", selectable=False), value=greet),
            Capability(label=ToolLabel("count", selectable=True), value=count),
            Capability(label=SkillLabel("guide", selectable=True), value=guide),
            Capability(
                label=SkillLabel("manual", loading=SkillLoading.AUTOMATIC, selectable=True),
                value=manual,
            ),
        ),
    )


def tool_names(agent: DeployableAgent) -> list[str]:
    runtime, _ = agent.build()
    return [t.name for t in runtime.tools]


def test_without_a_selection_everything_is_built_as_declared() -> None:
    agent = definition()
    assert agent.capability_selection is None
    runtime, background = agent.build()
    assert [t.name for t in runtime.tools] == ["greet", "count"]
    assert [s.name for s in runtime.skills] == ["guide"]
    assert [s.name for s in runtime.auto_loaded_skills] == ["manual"]
    assert background == ()


def test_an_explicit_map_keeps_fixed_entries_and_only_the_enabled_optional_ones() -> None:
    agent = definition()
    agent.set_capability_selection({"guide": True})
    runtime, _ = agent.build()
    assert [t.name for t in runtime.tools] == ["greet"]  # fixed, although not mentioned
    assert [s.name for s in runtime.skills] == ["guide"]
    assert runtime.auto_loaded_skills == ()  # omitted optional entry


def test_false_disables_an_optional_entry() -> None:
    agent = definition()
    agent.set_capability_selection({"count": False, "guide": True, "manual": True})
    assert tool_names(agent) == ["greet"]


def test_a_loading_mode_changes_how_a_selected_skill_loads() -> None:
    agent = definition()
    agent.set_capability_selection(
        {"guide": SkillLoading.AUTOMATIC, "manual": SkillLoading.ON_DEMAND}
    )
    runtime, _ = agent.build()
    assert [s.name for s in runtime.auto_loaded_skills] == ["guide"]
    assert [s.name for s in runtime.skills] == ["manual"]
    # The skill's embedded tool travels with it: offered only once the skill is loaded.
    assert [t.name for t in runtime.skills[0].tools] == ["lookup"]


def test_loading_modes_stored_as_strings_are_accepted() -> None:
    agent = definition()
    agent.set_capability_selection({"guide": "automatic"})
    assert agent.capability_selection == {"guide": SkillLoading.AUTOMATIC}
    with pytest.raises(CapabilitySelectionError, match=r"'sometimes' is not a loading mode"):
        agent.set_capability_selection({"guide": "sometimes"})


def test_new_optional_entries_stay_disabled_under_an_explicit_map() -> None:
    agent = definition()
    agent.set_capability_selection({"count": True})
    agent.add_capabilities(
        Capability(label=ToolLabel("finish", selectable=True), value=finish),
        Capability(label=ToolLabel("later_fixed", selectable=False), value=finish.renamed("x")),
    )
    assert tool_names(agent) == ["greet", "count", "x"]
    agent.set_capability_selection(None)
    assert tool_names(agent) == ["greet", "count", "finish", "x"]


def test_unknown_names_are_refused_naming_them() -> None:
    agent = definition()
    with pytest.raises(CapabilitySelectionError, match=r"'gretting', which is not a declared"):
        agent.set_capability_selection({"gretting": True})


def test_a_loading_mode_for_a_tool_is_refused() -> None:
    agent = definition()
    with pytest.raises(
        CapabilitySelectionError, match=r"Capability tool 'count'.*applies to skills only"
    ):
        agent.set_capability_selection({"count": SkillLoading.AUTOMATIC})


def test_fixed_entries_cannot_be_disabled_or_reloaded() -> None:
    agent = definition()
    with pytest.raises(CapabilitySelectionError, match=r"tool 'greet' is fixed"):
        agent.set_capability_selection({"greet": False})
    agent.add_capabilities(
        Capability(
            label=SkillLabel("rules", selectable=False),
            value=Skill(name="rules", description="d", instructions="i"),
        )
    )
    with pytest.raises(CapabilitySelectionError, match=r"skill 'rules' is fixed"):
        agent.set_capability_selection({"rules": SkillLoading.AUTOMATIC})
    agent.set_capability_selection({"greet": True, "rules": True})


@pytest.mark.parametrize("value", [1, None, "yes", 0.5])
def test_values_other_than_bool_or_loading_mode_are_refused(value: object) -> None:
    agent = definition()
    with pytest.raises(CapabilitySelectionError):
        agent.set_capability_selection({"count": value})


def test_a_failed_selection_leaves_the_previous_one_in_place() -> None:
    agent = definition()
    agent.set_capability_selection({"count": True})
    with pytest.raises(CapabilitySelectionError):
        agent.set_capability_selection({"count": True, "nope": True})
    assert agent.capability_selection == {"count": True}


def test_the_selection_is_a_read_only_copy() -> None:
    agent = definition()
    chosen = {"count": True}
    agent.set_capability_selection(chosen)
    chosen["guide"] = True
    assert dict(agent.capability_selection or {}) == {"count": True}
    with pytest.raises(TypeError):
        agent.capability_selection["guide"] = True  # type: ignore[index]


def test_resolve_reports_effective_choices_and_round_trips() -> None:
    agent = definition()
    assert agent.resolve_capabilities() == {
        "greet": True,
        "count": True,
        "guide": SkillLoading.ON_DEMAND,
        "manual": SkillLoading.AUTOMATIC,
    }
    agent.set_capability_selection({"guide": SkillLoading.AUTOMATIC})
    resolved = agent.resolve_capabilities()
    assert resolved == {
        "greet": True,
        "count": False,
        "guide": SkillLoading.AUTOMATIC,
        "manual": False,
    }
    assert agent.capability_selection == {"guide": SkillLoading.AUTOMATIC}  # unchanged

    other = definition()
    other.set_capability_selection(resolved)
    assert other.resolve_capabilities() == resolved
    # Persisted as JSON and read back, the choices still mean the same thing.
    other.set_capability_selection(json.loads(json.dumps(resolved)))
    assert other.resolve_capabilities() == resolved


def test_runtimes_built_earlier_keep_their_configuration() -> None:
    agent = definition()
    first, _ = agent.build()
    agent.set_capability_selection({})
    agent.system_prompt = "Changed."
    agent.mode = AgentMode.AUTONOMOUS
    second, _ = agent.build()
    assert first is not second
    assert [t.name for t in first.tools] == ["greet", "count"]
    assert first.system_prompt == "Help."
    assert first.mode is AgentMode.STEERABLE
    assert [t.name for t in second.tools] == ["greet"]
    assert second.system_prompt == "Changed."
    assert second.mode is AgentMode.AUTONOMOUS


def test_a_shared_capability_is_selected_per_agent() -> None:
    shared = Capability(label=SkillLabel("guide", selectable=True), value=guide)
    first = DeployableAgent("first", agent_endpoint=MockLLMEndpoint([]), capabilities=[shared])
    second = DeployableAgent("second", agent_endpoint=MockLLMEndpoint([]), capabilities=[shared])
    first.set_capability_selection({"guide": SkillLoading.AUTOMATIC})
    second.set_capability_selection({"guide": False})
    assert [s.name for s in first.build()[0].auto_loaded_skills] == ["guide"]
    assert second.build()[0].skills == second.build()[0].auto_loaded_skills == ()
    assert shared.label.loading is SkillLoading.ON_DEMAND
