"""Tools, factories, skills and the built-in ``stop`` tool."""

from roboz.tools.skill import Skill, SkillFactory
from roboz.tools.stopping import stop
from roboz.tools.tool import (
    ChainCondition,
    Factory,
    Tool,
    ToolDefinitionError,
    ToolOutputError,
    factory,
    tool,
)

__all__ = [
    "ChainCondition",
    "Factory",
    "Skill",
    "SkillFactory",
    "Tool",
    "ToolDefinitionError",
    "ToolOutputError",
    "factory",
    "stop",
    "tool",
]
