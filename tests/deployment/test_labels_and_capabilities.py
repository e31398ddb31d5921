"""Labels are immutable metadata; a Capability only accepts what its label can carry."""

from __future__ import annotations

import dataclasses

import pytest

from roboz.deployment import (
    Capability,
    DeployableAgent,
    DeploymentError,
    SkillLabel,
    SkillLoading,
    ToolLabel,
)
from roboz.models import Empty, Message, Str
from roboz.runtime.events import EventPipe
from roboz.tools import Skill, SkillFactory, factory
from tests.deployment.tools import greet, guide, shout


def test_labels_are_frozen_and_report_their_kind() -> None:
    tool_label = ToolLabel("greet", default=True)
    skill_label = SkillLabel("guide", loading=SkillLoading.AUTOMATIC, selectable=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tool_label.default = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        skill_label.loading = SkillLoading.ON_DEMAND  # type: ignore[misc]
    assert (tool_label.kind, skill_label.kind) == ("tool", "skill")
    # Labels are fixed unless declared selectable.
    assert ToolLabel("x") == ToolLabel("x", default=False, selectable=False)
    assert SkillLabel("x").selectable is False
    assert SkillLabel("x").loading is SkillLoading.ON_DEMAND


@pytest.mark.parametrize("name", ["", "has space", "1st", "dash-ed", None])
def test_label_names_must_be_identifiers(name: object) -> None:
    with pytest.raises(ValueError, match="identifier"):
        ToolLabel(name)  # type: ignore[arg-type]


def test_skill_label_rejects_a_loading_that_is_not_a_skill_loading() -> None:
    with pytest.raises(TypeError, match="SkillLoading"):
        SkillLabel("guide", loading="automatic")  # type: ignore[arg-type]


def test_value_capability_builds_its_value_in_a_singleton_tuple() -> None:
    capability = Capability(label=ToolLabel("greet"), value=greet)
    owner = DeployableAgent("a")
    assert capability.build(owner, EventPipe()) == (greet,)
    chain = Capability(label=ToolLabel("greeting"), value=[greet, shout])
    # A chain is frozen into a tuple so that nobody can split it after registration.
    assert chain.build(owner, EventPipe()) == ((greet, shout),)


def test_a_skill_under_a_tool_label_is_refused_naming_the_capability() -> None:
    with pytest.raises(DeploymentError, match=r"Capability tool 'guide'.*needs a Tool"):
        Capability(label=ToolLabel("guide"), value=guide)


def test_a_tool_under_a_skill_label_is_refused() -> None:
    with pytest.raises(DeploymentError, match=r"skill 'greet'.*needs a Skill"):
        Capability(label=SkillLabel("greet"), value=greet)


def test_factories_must_be_called_first() -> None:
    @factory
    def echo(input: Str, messages: list[Message], ctx: str) -> Str:
        """Echo with a prefix."""
        return Str(value=ctx + input.value)

    with pytest.raises(DeploymentError, match="is a factory; call it"):
        Capability(label=ToolLabel("echo"), value=echo)  # type: ignore[arg-type]
    skill_factory: SkillFactory[object] = Skill.factory(
        name="s", description="d", instructions="i", build_tools=lambda ctx: ()
    )
    with pytest.raises(DeploymentError, match="is a factory"):
        Capability(label=SkillLabel("s"), value=skill_factory)  # type: ignore[arg-type]


def test_an_empty_chain_is_refused() -> None:
    with pytest.raises(DeploymentError, match="non-empty chain"):
        Capability(label=ToolLabel("nothing"), value=[])


def test_a_plain_capability_without_value_must_be_a_builder() -> None:
    with pytest.raises(DeploymentError, match=r"pass value=.*override build"):
        Capability(label=ToolLabel("nothing"))


def test_builder_results_are_checked_against_the_label() -> None:
    class Wrong(Capability):
        def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[Skill, ...]:
            return (guide,)

    class NotATuple(Capability):
        def build(self, agent: DeployableAgent, pipe: EventPipe) -> list[Empty]:  # type: ignore[override]
            return [greet]  # type: ignore[list-item]

    with pytest.raises(DeploymentError, match=r"Wrong tool 'wrong'.*needs a Tool"):
        DeployableAgent("a", capabilities=[Wrong(label=ToolLabel("wrong"))]).build()
    with pytest.raises(DeploymentError, match=r"NotATuple tool 'listy'.*must return a tuple"):
        DeployableAgent("a", capabilities=[NotATuple(label=ToolLabel("listy"))]).build()
