"""Labels: the immutable metadata under which a capability is offered and selected.

A label is fixed (always built, whatever the selection) unless it is declared
``selectable=True``: leaving out a capability must be something its author allowed, so that a
selection naming only the optional entries never drops, say, the agent's ``stop`` tool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Literal

# Names are used as selection keys and usually end up as tool or skill names the LLM types,
# so keep them to what both accept.
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SkillLoading(StrEnum):
    ON_DEMAND = "on_demand"
    """The skill is offered; the LLM loads its instructions and tools when it needs them."""
    AUTOMATIC = "automatic"
    """The skill's instructions and tools are loaded when the agent starts."""


def _check_name(kind: str, name: object) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"{kind} label name {name!r} must be an identifier (letters, digits, underscores)"
        )


@dataclass(frozen=True)
class ToolLabel:
    """Offers a tool or an intact chain. ``default=True`` runs its first tool as a default."""

    name: str
    default: bool = False
    selectable: bool = False
    kind: ClassVar[Literal["tool"]] = "tool"

    def __post_init__(self) -> None:
        _check_name("tool", self.name)
        if not isinstance(self.default, bool) or not isinstance(self.selectable, bool):
            raise TypeError(f"tool label {self.name!r}: default and selectable must be bools")


@dataclass(frozen=True)
class SkillLabel:
    """Offers a skill; its instructions and embedded tools always travel together."""

    name: str
    loading: SkillLoading = SkillLoading.ON_DEMAND
    selectable: bool = False
    kind: ClassVar[Literal["skill"]] = "skill"

    def __post_init__(self) -> None:
        _check_name("skill", self.name)
        if not isinstance(self.loading, SkillLoading):
            raise TypeError(
                f"skill label {self.name!r}: loading must be a SkillLoading, got {self.loading!r}"
            )
        if not isinstance(self.selectable, bool):
            raise TypeError(f"skill label {self.name!r}: selectable must be a bool")


Label = ToolLabel | SkillLabel
