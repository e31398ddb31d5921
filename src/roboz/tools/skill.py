"""Skills: instructions and the tools they describe, offered or loaded together."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from roboz.tools.tool import Tool, ToolDefinitionError

C = TypeVar("C")


@dataclass(frozen=True, eq=False)
class Skill:
    """A named bundle: loading it adds its instructions and tools to the agent at once.

    ``depends_on`` names an already constructed prerequisite skill, loaded first.
    """

    name: str
    description: str
    instructions: str
    tools: tuple[Tool, ...] = ()
    depends_on: Skill | None = None

    def __init__(
        self,
        *,
        name: str,
        description: str,
        instructions: str,
        tools: Sequence[Tool] = (),
        depends_on: Skill | None = None,
    ) -> None:
        if not name.isidentifier():
            raise ToolDefinitionError(f"skill name {name!r} must be a Python identifier")
        for item in tools:
            if not isinstance(item, Tool):
                raise ToolDefinitionError(
                    f"skill {name!r}: tools must be Tool instances, got {item!r} "
                    "(call factories with their context first)"
                )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "instructions", inspect.cleandoc(instructions))
        object.__setattr__(self, "tools", tuple(tools))
        object.__setattr__(self, "depends_on", depends_on)

    def with_prerequisites(self) -> list[Skill]:
        """This skill after its chain of prerequisites, each once, prerequisites first."""
        ordered: list[Skill] = []
        seen: set[int] = set()
        current: Skill | None = self
        while current is not None:
            if id(current) in seen:
                raise ToolDefinitionError(f"skill {self.name!r} depends on itself")
            seen.add(id(current))
            ordered.append(current)
            current = current.depends_on
        return list(reversed(ordered))

    @staticmethod
    def factory(
        *,
        name: str,
        description: str,
        instructions: str,
        build_tools: Callable[[C], Sequence[Tool]],
        depends_on: Skill | None = None,
    ) -> SkillFactory[C]:
        """A skill whose tools need a context; call the result with that context."""
        return SkillFactory(
            name=name,
            description=description,
            instructions=instructions,
            build_tools=build_tools,
            depends_on=depends_on,
        )


@dataclass(frozen=True)
class SkillFactory(Generic[C]):
    name: str
    description: str
    instructions: str
    build_tools: Callable[[C], Sequence[Tool]] = field(repr=False)
    depends_on: Skill | None = None

    def __call__(self, ctx: C) -> Skill:
        return Skill(
            name=self.name,
            description=self.description,
            instructions=self.instructions,
            tools=tuple(self.build_tools(ctx)),
            depends_on=self.depends_on,
        )

    def __repr__(self) -> str:
        # Short, like Factory's: error messages name the factory, not its instructions.
        return f"SkillFactory(name={self.name!r})"
