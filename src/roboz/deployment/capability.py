"""Capability: one labelled unit of behaviour an agent definition can include.

``Capability(label=..., value=...)`` registers something that already exists (a tool, a chain
of tools, or a skill). Capabilities that need runtime bindings (a permission policy, the
deployment's event pipe, a socket) subclass it and override ``build``; what ``build`` returns
is checked against the label here, so a builder cannot smuggle a skill in under a tool label.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias, TypeGuard, cast

from roboz.deployment.errors import DeploymentError
from roboz.deployment.labels import Label, SkillLabel, ToolLabel
from roboz.llm import EndpointLike
from roboz.runtime.events import EventPipe
from roboz.tools import Factory, Skill, SkillFactory, Tool

if TYPE_CHECKING:
    from roboz.dependencies import ExternalDependency
    from roboz.deployment.deployable import DeployableAgent

Chain: TypeAlias = tuple[Tool, ...]
RuntimeValue: TypeAlias = Tool | Sequence[Tool] | Skill
"""What a capability contributes: a tool, a chain (a sequence of tools kept together), or a
skill (instructions and tools kept together)."""


class Capability:
    """A labelled tool, chain or skill; subclass and override ``build`` for runtime bindings.

    ``required_attributes`` names owner attributes (``DeployableAgent.set_attributes``) that
    ``build`` reads, and ``requires_sandbox`` says it reads the owner's ``sandbox``; a
    deployment checks both before building, and only for included capabilities.
    """

    required_attributes: tuple[str, ...] = ()
    requires_sandbox: bool = False
    """``build`` reads the owner's ``sandbox`` (its guarded tools' policy); a deployment without
    one is refused before building, with the setting to add."""

    def __init__(self, *, label: Label, value: RuntimeValue | None = None) -> None:
        if not isinstance(label, ToolLabel | SkillLabel):
            raise TypeError(
                f"{type(self).__name__}: label must be a ToolLabel or a SkillLabel, got {label!r}"
            )
        self._label: Label = label
        self._value: Tool | Chain | Skill | None = None
        if value is not None:
            self._value = check_value(self, value)
        elif type(self).build is Capability.build:
            raise DeploymentError(
                f"{self.describe()}: pass value= (a tool, chain or skill), or subclass "
                "Capability and override build()"
            )

    @property
    def label(self) -> Label:
        return self._label

    @property
    def name(self) -> str:
        return self._label.name

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        """Runtime tools, chains or skills, in construction order.

        ``agent`` is the owning definition (read its attributes); ``pipe`` is the event pipe
        the built agent will use.
        """
        if self._value is None:  # pragma: no cover - prevented in __init__
            raise NotImplementedError(f"{self.describe()} does not override build()")
        return (self._value,)

    def external_dependencies(self) -> tuple[ExternalDependency, ...]:
        """External resources this capability needs at run time (sockets, executables)."""
        return ()

    def endpoints(self) -> tuple[EndpointLike, ...]:
        """LLM endpoints this capability's tools call, besides the agent's own."""
        return ()

    def background_agents(self) -> tuple[DeployableAgent, ...]:
        """Child definitions built alongside the owner as background agents.

        Each child keeps its own capability selection.
        """
        return ()

    def describe(self) -> str:
        return f"{type(self).__name__} {self._label.kind} {self._label.name!r}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(label={self._label!r})"


def _is_tool(value: object) -> TypeGuard[Tool]:
    """A Tool of any input and output (``isinstance`` alone leaves them unknown)."""
    return isinstance(value, Tool)


def check_value(capability: Capability, value: object) -> Tool | Chain | Skill:
    """``value`` as the label's kind expects it; chains become tuples so nobody can edit them."""
    label = capability.label
    if isinstance(value, Factory | SkillFactory):
        raise DeploymentError(
            f"{capability.describe()}: {value!r} is a factory; call it with its context first "
            "(or build it in a Capability subclass's build())"
        )
    if isinstance(label, SkillLabel):
        if isinstance(value, Skill):
            return value
        raise DeploymentError(
            f"{capability.describe()}: a skill label needs a Skill, got {_kind_of(value)}"
        )
    if _is_tool(value):
        return value
    kind = _kind_of(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        items: tuple[object, ...] = tuple(cast("Sequence[object]", value))
        tools = tuple(item for item in items if _is_tool(item))
        if tools and len(tools) == len(items):
            return tools
    raise DeploymentError(
        f"{capability.describe()}: a tool label needs a Tool or a non-empty chain of Tools, "
        f"got {kind}"
    )


def check_build_result(capability: Capability, result: object) -> tuple[Tool | Chain | Skill, ...]:
    if not isinstance(result, tuple):
        raise DeploymentError(
            f"{capability.describe()}: build() must return a tuple of tools, chains or "
            f"skills, got {type(result).__name__}"
        )
    if not result:
        raise DeploymentError(f"{capability.describe()}: build() returned nothing")
    items: tuple[object, ...] = cast("tuple[object, ...]", result)
    return tuple(check_value(capability, item) for item in items)


def _kind_of(value: object) -> str:
    if isinstance(value, Skill):
        return f"skill {value.name!r}"
    if isinstance(value, Tool):
        return f"tool {value.name!r}"
    return repr(value)
